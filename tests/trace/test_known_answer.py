"""Known-answer tests of the late-cycle attribution (issue 9): real runs with injected disturbers.

A C disturber (``disturber.c``, compiled here) runs on the RT CPU with a known interference: a
SCHED_FIFO thread above the loop that spins a known time at a known pace must be named as the
cause of every late cycle it made, with its duration, and top the culprits; a SCHED_OTHER busy
task under a sleeping loop must never be named; and a run without a disturber must report only
what it can show. They assert attribution and accounting, never a latency bound.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from softrt.session.config import RunConfig
from softrt.session.run import run
from softrt.store.rundir import read_samples

pytestmark = [pytest.mark.rt, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="tracing and SCHED_FIFO need root"),
              pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler for the disturber")]

NAME = "softrt-disturb"
# 500 µs every 100 ms. The disturber held the CPU at least for its spin and at most from its
# timer's deadline to the end of the spin (its timer IRQ, switch and system-call exit take
# ~25-40 µs on a loaded VM, seen in the trace): the attributed time must lie in that range,
# with the tolerance (10 % or 10 µs) on either side.
SPIN_US, EVERY_US = 500, 100_000
LOOP_PRIORITY, DISTURBER_PRIORITY = 80, 90


@pytest.fixture(scope="module")
def disturber_bin(tmp_path_factory):
    out = tmp_path_factory.mktemp("disturber") / "disturber"
    src = os.path.join(os.path.dirname(__file__), "disturber.c")
    subprocess.run(["cc", "-O2", "-o", str(out), src], check=True)
    return str(out)


def _last_cpu() -> int:
    return max(os.sched_getaffinity(0))


class Disturber:
    """The disturber as a context manager; ``spikes`` holds its [start, end] ns after exit."""

    def __init__(self, binary: str, policy: str, spin_us: int, every_us: int) -> None:
        self.args = [binary, NAME, str(_last_cpu()), policy, str(DISTURBER_PRIORITY), str(spin_us), str(every_us)]
        self.spikes: list[tuple[int, int, int]] = []  # (deadline, start, end) ns

    def __enter__(self):
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr.readline().strip() == "ready", self.proc.stderr.read()
        self.pid = self.proc.pid
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        self.spikes = [tuple(map(int, line.split())) for line in out.splitlines()]


def _run(tmp_path, wait: str, keep_late: int = 1000):
    config = RunConfig(duration_ns=2_500_000_000, wait=wait, cpu=_last_cpu(), priority=LOOP_PRIORITY,
                       out_dir=tmp_path, keep_late=keep_late)
    for _ in range(30):  # another real-time test (of another checkout) may hold the machine lock
        try:
            return run(config)
        except Exception as err:  # noqa: BLE001 - only the lock is retried
            if "another real-time softrt run" not in str(err):
                raise
            time.sleep(2)
    pytest.skip("another real-time softrt run kept the machine busy")


def _overlap_us(start: int, end: int, late_cycle: dict) -> float:
    return max(0, min(end, late_cycle["window_end_ns"]) - max(start, late_cycle["window_start_ns"])) / 1e3


def _causes(late_cycle: dict, name: str) -> list[dict]:
    return [c for c in late_cycle["causes"] if c.get("name") == name]


def test_a_higher_priority_fifo_spinner_is_named_for_every_spike_it_caused(tmp_path, disturber_bin, attribution):
    with Disturber(disturber_bin, "fifo", SPIN_US, EVERY_US) as dist:
        result = _run(tmp_path, "spin")
    why = result.summary["why_late"]
    assert isinstance(why["tracing"], dict) and why["tracing"]["status"] == "on", why["tracing"]
    records = read_samples(result.path)
    first, last = int(records["detect_ns"][0]), int(records["detect_ns"][-1])
    spikes = [s for s in dist.spikes if first < s[0] and s[2] < last]
    assert len(spikes) >= 10, f"the disturber spiked {len(spikes)} times during the loop"
    late = why["late_cycles"]
    off = []
    for deadline, start, end in spikes:
        hit = [lc for lc in late if lc["window_start_ns"] < end and start < lc["window_end_ns"]]
        assert hit, f"the spike at {start} ({(end - start) / 1e3:.0f} µs) made no reported late cycle"
        named = [(lc, c) for lc in hit for c in _causes(lc, NAME)]
        assert named, f"the spike at {start} is not attributed to {NAME}: {[lc['causes'] for lc in hit]}"
        for lc, cause in named:
            # The part of the spike inside the late cycle's window is what the cycle lost to it.
            least_us = _overlap_us(start, end, lc)
            most_us = _overlap_us(deadline, end, lc)
            low, high = least_us - max(10.0, 0.1 * least_us), most_us + max(10.0, 0.1 * most_us)
            if not low <= cause["duration_us"] <= high:
                off.append((round(least_us, 1), round(most_us, 1), cause["duration_us"]))
    # Every spike is named. Its duration may be stretched by what a guest cannot see: a hypervisor
    # that deschedules the vCPU while the disturber holds it (milliseconds on a busy host) makes
    # the disturber look longer; so on a VM one spike in ten may fall outside the tolerance.
    assert len(off) <= len(spikes) // 10, f"durations off (least µs, most µs, attributed µs): {off}"
    # It tops the tasks; overall it is among the first three (other tenants of a shared VM also
    # stall the CPU for milliseconds: that shows as kernel or outside-the-guest time).
    tasks = [c for c in why["culprits"] if c["kind"] == "thread"]
    assert tasks[0]["name"] == NAME, tasks[:3]
    assert NAME in [c["name"] for c in why["culprits"][:3]], why["culprits"][:3]
    assert tasks[0]["late_cycles"] >= len(spikes)


def test_b_a_sched_other_busy_task_never_causes_a_late_sleeping_cycle(tmp_path, disturber_bin, attribution):
    with Disturber(disturber_bin, "other", 0, 0) as dist:
        result = _run(tmp_path, "sleep")
        # the busy task really ran on the RT CPU during the run (its CPU time grew)
        busy_ticks = int(open(f"/proc/{dist.pid}/stat").read().rsplit(")", 1)[1].split()[11])
    assert busy_ticks > 0
    why = result.summary["why_late"]
    assert isinstance(why["tracing"], dict) and why["tracing"]["status"] == "on", why["tracing"]
    for lc in why["late_cycles"]:
        assert not any(c.get("pid") == dist.pid or c.get("name") == NAME for c in lc["causes"]), lc
    assert not any(c.get("pid") == dist.pid or c.get("name") == NAME for c in why["culprits"])


def test_c_without_a_disturber_everything_reported_carries_its_evidence(tmp_path, attribution):
    result = _run(tmp_path, "spin")
    why = result.summary["why_late"]
    assert isinstance(why["tracing"], dict) and why["tracing"]["status"] == "on", why["tracing"]
    assert why["tracing"]["lost_events"] >= 0 and why["tracing"]["events_read"] > 0
    for lc in why["late_cycles"]:
        window_us = (lc["window_end_ns"] - lc["window_start_ns"]) / 1e3
        explained = sum(c["duration_us"] for c in lc["causes"])
        # Every cause is a named source with a duration; what is not explained is stated.
        assert all(c["kind"] and c["name"] and c["duration_us"] >= 0 for c in lc["causes"]), lc
        assert explained + lc["unexplained_us"] == pytest.approx(window_us, abs=1.0 + 0.01 * window_us), lc
    for culprit in why["culprits"]:
        assert culprit["late_cycles"] >= 1 and culprit["total_us"] >= culprit["worst_us"] > 0, culprit
