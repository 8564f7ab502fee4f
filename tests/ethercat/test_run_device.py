"""``softrt run --device ethercat:IFACE``: the real worker, the real pysoem master, the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import RUN_WAIT

pytestmark = pytest.mark.rt

#: This VM stalls the simulator for ~10 ms now and then (issue 20): these runs test the master's
#: path, not bus health, so they tolerate it.
BUS_TIMEOUT = "200ms"


def test_softrt_run_drives_the_simulated_bus(start_sim, ecat_ns, tmp_path):
    sim = start_sim("--slaves", "2", "--bad-wkc-every", "500", fifo=True)
    env = {**os.environ, "SOFTRT_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.run(
        ecat_ns.cmd(
            sys.executable,
            "-m",
            "softrt",
            "run",
            "--device",
            f"ethercat:{ecat_ns.master_iface}",
            "--axes",
            "2",
            "--period",
            "1ms",
            "--duration",
            "2s",
            "--json",
            "--out-dir",
            str(tmp_path),
            *RUN_WAIT,
            "--bus-timeout",
            "1s",
        ),  # (not a bus-health test: a hypervisor stall of 10 ms is no lost bus here)
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.stdout, proc.stderr  # (a run that never started prints its reason there, and no summary)
    s = json.loads(proc.stdout)
    assert proc.returncode == 0, (s["status"], s["partial_reason"], proc.stderr)
    assert s["status"] == "complete" and s["config"]["device"] == f"ethercat:{ecat_ns.master_iface}"
    board = s["board"]
    assert board["writes"] == s["cycles"] > 1000
    # Every injected wrong working counter is a device error and a missed update.
    injected = sim.stats()["injected"]["bad_wkc"]
    assert injected >= 2
    # The simulator counts every process-data frame, also the keep-alive before the run and the
    # disable sequence after it: one or two of its faults may fall outside the run's cycles.
    assert 0 <= injected - board["wkc_errors"] <= 2, (injected, board["wkc_errors"])
    assert (
        board["wkc_errors"] == s["misses"]["device_errors"] - board["drive_not_enabled_cycles"] - board["lost_frames"]
    )
    assert s["rtt_us"]["p50"] > 0
    assert s["motion"]["writes"] == s["cycles"]
    after = sim.stats()["slaves"]  # on stop: drives disabled, bus back in INIT
    assert [x["al_state"] for x in after] == ["INIT", "INIT"]
    assert [x["drive_state"] for x in after] == ["SWITCH_ON_DISABLED"] * 2


def test_missing_interface_is_bad_input(tmp_path):
    env = {**os.environ, "SOFTRT_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "softrt",
            "run",
            "--device",
            "ethercat:nosuch0",
            "--duration",
            "1s",
            "--out-dir",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "nosuch0" in lines[0], proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


DRIVES_TOML = """
# target before controlword, no mode object; the error code after the statusword
[defaults]
rx = ["0x607A/32", "0x6040/16"]
tx = ["0x6064/32", "0x6041/16", "0x603F/16"]

[[drive]]
position = 0
axes = 2
assign = "always"
"""


def test_run_configures_a_two_axis_drive_that_aborts_complete_access(
    start_sim, ecat_ns, tmp_path, run_cli, monkeypatch
):
    sim = start_sim("--device", "csp-drive-coe", "--axes-per-slave", "2", "--ca-abort", fifo=True)
    drives = tmp_path / "drives.toml"
    drives.write_text(DRIVES_TOML)
    env = {**os.environ, "SOFTRT_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.run(
        ecat_ns.cmd(
            sys.executable,
            "-m",
            "softrt",
            "run",
            "--device",
            f"ethercat:{ecat_ns.master_iface}",
            "--axes",
            "2",
            "--ecat-drives",
            str(drives),
            "--period",
            "1ms",
            "--duration",
            "1.5s",
            "--json",
            "--bus-timeout",
            BUS_TIMEOUT,
            *RUN_WAIT,
            "--out-dir",
            str(tmp_path / "runs"),
        ),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert s["status"] == "complete" and s["config"]["ecat_drives"] == str(drives)
    board = s["board"]
    # The complete-access abort SOEM recovered from is a warning, not a failure.
    assert board["warnings"] == [
        "PDO mapping: slave 0: 0x1C00:00 SDO abort 0x06010000 (Unsupported access to an "
        "object); SOEM recovered (the mapping is complete)"
    ]
    (slave,) = board["slaves"]
    assert (slave["vendor_id"], slave["product_code"]) == (0x0EC0FFEE, 0x0011_0402)
    assert slave["device_name"] == "softrt virtual CSP drive (2 axes) (CoE)"
    assert (slave["axes"], slave["pdo"], slave["error_register"], slave["error_codes"]) == (
        2,
        "assigned by SDO",
        0,
        [0, 0],
    )
    # The simulator reports the mapping it was given, for both axes.
    pdo = sim.stats()["slaves"][0]["pdo"]
    assert pdo["0x1C12"] == ["0x1600", "0x1610"] and pdo["0x1C13"] == ["0x1A00", "0x1A10"]
    assert pdo["0x1610"] == ["0x687A:00/32", "0x6840:00/16"]
    assert pdo["0x1A10"] == ["0x6864:00/32", "0x6841:00/16", "0x683F:00/16"]
    # Both axes moved (at 1.5 s the return move of the profile is under way).
    assert [(d["slave"], d["axis"]) for d in board["drives"]] == [(0, 0), (0, 1)]
    moved = [d["position_counts"] - d["origin_counts"] for d in board["drives"]]
    assert moved[0] > 10_000 and abs(moved[1] / moved[0] - 0.75) < 0.05, moved  # the profile's axis 1: 3/4 of axis 0
    # The simulator's own axes agree (they went on a few cycles after the run's last confirmed frame,
    # through the disable sequence: the board shows what the run confirmed, docs/run-format.md).
    sim_moved = [
        a["position_counts"] - d["origin_counts"] for a, d in zip(sim.stats()["slaves"][0]["axes"], board["drives"])
    ]
    assert all(abs(s - m) < 0.1 * m for s, m in zip(sim_moved, moved)), (sim_moved, moved)
    assert abs(sim_moved[1] / sim_moved[0] - 0.75) < 0.05, sim_moved
    # What `softrt show` prints about them.
    (run_dir,) = (tmp_path / "runs").iterdir()
    monkeypatch.setenv("COLUMNS", "200")
    code, shown, err = run_cli("show", str(run_dir))
    assert code == 0, err
    assert (
        "slave 0 'softrt virtual CSP drive (2 axes) (CoE)': vendor 0x0EC0FFEE, product 0x00110402, revision "
        "0x00010000, serial 1; PDOs assigned by SDO; error register 0x00"
    ) in shown
    assert "axis 1: statusword 0x" in shown and "warning: PDO mapping: slave 0: 0x1C00:00" in shown
