"""Bus health and the receive deadline through the real CLI, the real worker and the simulator.

A lost bus, a slave that leaves OP with an AL status code: the run stops as *failed* (exit
status 1) with the reason, and keeps its records. A dropped frame costs the cycle it belongs to:
the loop goes on at the next edge. A reply that is late, changed or for another frame is never
taken for the cycle's own. Faults are injected through the simulator's control socket once the
run's loop is cycling (seen in its checkpoints), so they hit the run's frames only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from softrt.ipc.layout import FLAG_DEVICE_ERROR, FLAG_DEVICE_FAILED
from softrt.store.rundir import read_samples

from .conftest import RUN_WAIT

pytestmark = pytest.mark.rt

DRIVE = "softrt virtual CSP drive"


def start_run(ecat_ns, tmp_path: Path, *args: str) -> subprocess.Popen:
    """Start ``softrt run --device ethercat:ecm0 --json --no-trace ARGS`` in the namespace
    (checkpoints every 0.1 s). Untraced: these runs test the bus, and explaining thousands of late
    cycles would take the trace reader seconds."""
    env = {**os.environ, "SOFTRT_STATE_DIR": str(tmp_path / "state"), "SOFTRT_CHECKPOINT_INTERVAL": "0.1"}
    return subprocess.Popen(
        ecat_ns.cmd(
            sys.executable,
            "-m",
            "softrt",
            "run",
            "--device",
            f"ethercat:{ecat_ns.master_iface}",
            "--json",
            "--no-trace",
            *RUN_WAIT,
            "--out-dir",
            str(tmp_path / "runs"),
            *args,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def wait_for_cycles(proc: subprocess.Popen, tmp_path: Path, cycles: int, timeout_s: float = 60) -> None:
    """Return once the run's checkpoint shows at least *cycles* cycles (its loop is running)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        for path in (tmp_path / "runs").glob("*/summary.json"):
            try:
                if json.loads(path.read_text()).get("cycles", 0) >= cycles:
                    return
            except (OSError, ValueError):  # being replaced
                pass
        time.sleep(0.05)
    raise AssertionError(f"the run did not reach {cycles} cycles")


def wait_for_injected(sim, kind: str, count: int, timeout_s: float = 30) -> None:
    """Return once the simulator has injected *count* faults of *kind* (into the run's frames)."""
    end = time.monotonic() + timeout_s
    while sim.stats()["injected"][kind] < count:
        assert time.monotonic() < end, f"the simulator did not inject {count} {kind}"
        time.sleep(0.02)


def finish(proc: subprocess.Popen) -> tuple[int, dict, str]:
    out, err = proc.communicate(timeout=120)
    assert out, err  # (a run that never started prints its reason there, and no summary)
    return proc.returncode, json.loads(out), err


def run_path(tmp_path: Path, summary: dict) -> Path:
    return tmp_path / "runs" / summary["run_id"]


def test_killed_simulator_fails_the_run_and_keeps_its_records(start_sim, ecat_ns, tmp_path):
    sim = start_sim("--slaves", "2", fifo=True)
    # 50 ms, not the default 10: a stall of this busy VM must not lose the bus before the kill.
    proc = start_run(ecat_ns, tmp_path, "--axes", "2", "--period", "1ms", "--duration", "20s", "--bus-timeout", "50ms")
    wait_for_cycles(proc, tmp_path, 400)
    sim.proc.kill()  # the cable is pulled
    status, s, err = finish(proc)
    assert status == 1, err
    assert s["status"] == "failed"
    # Lost means 50 frames *sent* in a row and not answered (--bus-timeout 50 ms of 1 ms cycles),
    # whatever the host's own stalls: windows it missed sent no frame and are not counted.
    reason = s["partial_reason"]
    assert reason.startswith("bus lost: no frame answered: 50 frames sent in a row (50.0 ms of cycles) since cycle "), (
        reason
    )
    assert s["elapsed_s"] < 20  # it stopped when the bus was lost, not at the end
    # Every record up to the failure is kept; the last ones are the lost frames.
    records = read_samples(run_path(tmp_path, s))
    assert len(records) == s["cycles"] == s["board"]["writes"] > 400
    assert records["flags"][-1] & FLAG_DEVICE_FAILED
    assert not (records["flags"][:-1] & FLAG_DEVICE_FAILED).any()
    lost_since = int(reason.rsplit(" ", 1)[1].replace(",", ""))
    tail = records[records["cycle"] >= lost_since]
    assert len(tail) == 50 and (tail["wkc"] < 0).all() and (tail["flags"] & FLAG_DEVICE_ERROR).all()
    # The drives as last confirmed by a valid frame, and when: the last record before the bus was lost.
    confirmed = int(records["cycle"][records["cycle"] < lost_since][-1])
    for i, d in enumerate(s["board"]["drives"]):
        assert d["name"] == DRIVE and d["slave"] == i
        assert d["state"] == "operation enabled"
        assert d["confirmed_cycle"] == confirmed
        assert d["confirmed_at_s"] == pytest.approx(d["confirmed_cycle"] * 1e-3, abs=1e-3)
    assert s["board"]["failure"] == s["partial_reason"]


def test_changed_and_late_replies_are_never_the_cycles_answer(start_sim, ecat_ns, tmp_path):
    """A reply whose command or length was changed is a bad frame, counted by kind; once every
    reply is held 1.5 ms (a 1 ms cycle), no frame counts as valid with a round trip under that
    (SOEM matches replies by a 16-value index: a reply 16 frames late looked fresh)."""
    sim = start_sim("--slaves", "2", fifo=True)
    proc = start_run(ecat_ns, tmp_path, "--axes", "2", "--period", "1ms", "--duration", "20s", "--bus-timeout", "300ms")
    wait_for_cycles(proc, tmp_path, 200)
    for kind in ("command", "length", "short"):
        bad = sim.control(cmd="bad_frame", every=4, kind=kind)["injected"]["bad_frame"]
        wait_for_injected(sim, "bad_frame", bad + 20)
    bad = sim.control(cmd="bad_frame", every=0)["injected"]["bad_frame"]
    pd = sim.stats()["pd_frames"]
    while sim.stats()["pd_frames"] < pd + 50:  # a few good frames: the run is not lost yet
        time.sleep(0.02)
    sim.control(cmd="delay", every=1, delay_us=1500)
    held_from_ns = time.monotonic_ns()
    status, s, err = finish(proc)
    assert status == 1 and s["status"] == "failed", err
    frames = s["board"]["frames"]
    assert set(frames["bad"]) == {"command", "length", "short"} and sum(frames["bad"].values()) == bad
    # The replies still came, late: the bus answers, so it is not "lost" (issue 20: late replies
    # were called a lost bus); no valid frame for 300 frames in a row ends the run all the same.
    reason = s["partial_reason"]
    assert reason.startswith("no valid frame: 300 frames sent in a row") and "answered late (up to" in reason, reason
    assert frames["late"] > 0
    records = read_samples(run_path(tmp_path, s))
    valid = records[records["wkc"] == s["board"]["expected_wkc"]]
    assert len(valid) >= 300
    assert not (valid["rtt_ns"] <= 0).any()  # every accepted frame has its own round trip
    held = valid[valid["detect_ns"] > held_from_ns]
    assert (held["rtt_ns"] >= 1_500_000).all(), held["rtt_ns"].min()
    # The round trip figures come from the frames answered in time alone.
    assert (records["rtt_ns"][records["wkc"] < 0] == 0).all()


def test_a_dropped_frame_costs_its_own_cycle(start_sim, ecat_ns, tmp_path):
    EVERY = 50  # the simulator drops every 50th process-data frame it sees while asked to
    sim = start_sim("--slaves", "2", fifo=True)
    proc = start_run(ecat_ns, tmp_path, "--axes", "2", "--period", "1ms", "--duration", "3s", "--bus-timeout", "200ms")
    wait_for_cycles(proc, tmp_path, 500)
    before = sim.control(cmd="drop", every=EVERY)["injected"]["drop"]
    wait_for_cycles(proc, tmp_path, 500 + 21 * EVERY)  # 21 drops
    dropped = sim.control(cmd="drop", every=0)["injected"]["drop"] - before
    status, s, err = finish(proc)
    assert status == 0 and s["status"] == "complete", err
    board = s["board"]
    assert dropped >= 10  # ~21 asked for; fewer when this VM stalls the simulator's control socket
    records = read_samples(run_path(tmp_path, s))
    lost = np.flatnonzero(records["wkc"] < 0)  # record index = process-data frame of the run
    assert board["lost_frames"] == len(lost) and board["wkc_errors"] == 0
    assert (records["flags"][lost] & FLAG_DEVICE_ERROR).all() and (records["missed"][lost] >= 1).all()
    # The simulator dropped every 50th process-data frame it saw, so the dropped ones are the lost
    # records 50 apart; any other lost record is a reply that really came back late (a stall of
    # this VM), counted too but not injected. Exact accounting: as many as the simulator says.
    # A late reply may share the drops' residue (seen: 4,308 after drops up to 4,108): the drops are
    # the longest run of lost records exactly 50 apart.
    if (s["board"].get("host_gaps") or {}).get("count"):
        # This VM stalled the worker (a host gap, seen up to 100 ms): the simulator's count of
        # frames no longer lines up with the records after it, so only "every drop was a lost
        # cycle" holds, not which ones.
        assert len(lost) >= dropped, (len(lost), dropped, s["board"].get("host_gaps"))
        return
    residues, counts = np.unique(lost % EVERY, return_counts=True)
    same = lost[lost % EVERY == residues[np.argmax(counts)]]
    runs = np.split(same, np.flatnonzero(np.diff(same) != EVERY) + 1)
    injected = max(runs, key=len)
    # A late reply right after the last drop, 50 frames on, continues the run by one (seen twice
    # in ~20 suite runs on this VM: 22 lost records 100 apart for 21 drops, at every 100th); never by more.
    assert len(injected) - dropped in (0, 1), (len(injected), dropped, same)
    # Each costs its own cycle and no more: the loop goes on at the next edge (the next write lands
    # in its own window: no missed update). Most, not all: this VM may delay any one cycle; with
    # SOEM's blocking receive (4-13 ms for a lost frame) none of them did.
    injected = injected[injected < len(records) - 1]
    on_time = records["missed"][injected + 1] == 0
    assert on_time.mean() >= 0.8, f"{on_time.sum()} of {len(on_time)} dropped frames were followed by an on-time write"


def test_al_status_code_ends_the_run_with_that_code(start_sim, ecat_ns, tmp_path):
    sim = start_sim("--slaves", "2", fifo=True)
    proc = start_run(ecat_ns, tmp_path, "--axes", "2", "--period", "1ms", "--duration", "20s", "--bus-timeout", "200ms")
    wait_for_cycles(proc, tmp_path, 500)
    sim.control(cmd="al_error", slave=1, state="SAFEOP", code=0x001A)  # synchronization error
    status, s, err = finish(proc)
    assert status == 1, err
    assert s["status"] == "failed"
    assert s["partial_reason"] == f"slave 1 '{DRIVE}' left OP: SAFEOP+ERR, AL status 0x001A synchronization error"
    assert s["board"]["wkc_errors"] >= 1 and s["board"]["al_reads"] >= 1
    records = read_samples(run_path(tmp_path, s))
    assert len(records) == s["cycles"] and records["flags"][-1] & FLAG_DEVICE_FAILED
    # On the way out the bus went back to INIT (the error acknowledged).
    assert [x["al_state"] for x in sim.stats()["slaves"]] == ["INIT", "INIT"]


def test_a_bus_that_does_not_answer_is_a_runtime_failure_not_bad_input(ecat_ns, tmp_path):
    env = {**os.environ, "SOFTRT_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.run(
        ecat_ns.cmd(
            sys.executable,
            "-m",
            "softrt",
            "run",
            "--device",
            f"ethercat:{ecat_ns.master_iface}",
            "--duration",
            "1s",
            "--out-dir",
            str(tmp_path / "runs"),
        ),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1  # the bus failed (exit 2 is for bad input: no such interface)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no slaves answered" in lines[0], proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_bus_that_dies_in_bring_up_fails_in_seconds_naming_the_step(start_sim, ecat_ns, tmp_path):
    """The slaves fall silent when softrt reads their SII in PRE-OP (each read of zeros went on
    for 8 KiB: 242 s, then a bare ``WkcError: ``): one line, exit status 1, the step and the slave."""
    start_sim("--slaves", "2", "--mute-at", "sii", fifo=True)
    t = time.monotonic()
    proc = start_run(ecat_ns, tmp_path, "--axes", "2", "--duration", "5s")
    out, err = proc.communicate(timeout=120)
    took_s = time.monotonic() - t
    assert proc.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(
        "softrt: error: EtherCAT on ecm0: bring-up, step SII (slave 0 'softrt virtual CSP "
        "drive'): the bus went silent (no slave answers) while expecting its SII EEPROM"
    ), err
    assert took_s < 20  # seconds (the worker's 60 s arming timeout never comes into it)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
