"""Known-answer tests of the late-cycle attribution (issues 9 and 17): real runs with injected disturbers.

A C disturber (``disturber.c``, compiled here) runs on the RT CPU with a known interference: a
SCHED_FIFO thread above the loop that spins a known time at a known pace must be named as the
cause of every late cycle it made, with its duration, and top the culprits, never credited with
more than the CPU time it ran; a SCHED_OTHER busy task under a sleeping loop must never be what made
a cycle late; the same busy task under a spinning loop, on a kernel with the fair server, must be
named by comm and pid with its stalls; and every traced spin run (the disturber one source among the
machine's own) must report only what it can show. They assert attribution and accounting, never a
latency bound.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from softrt.platform.linux import fairserver
from softrt.schema.config import RunConfig
from softrt.session.run import run
from softrt.store.rundir import read_samples

pytestmark = [
    pytest.mark.rt,
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="tracing and SCHED_FIFO need root"),
    pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler for the disturber"),
]

NAME = "softrt-disturb"
# 500 µs every 100 ms. The disturber held the CPU at least for its spin less the stretches its
# own clock shows it did not spin, and at most from its timer's deadline to the end of the spin
# (its timer IRQ, switch and system-call exit take ~25-40 µs on a loaded VM, seen in the trace):
# the attributed time must lie in that range, with the tolerance (10 % or 10 µs) on either side.
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
        # (deadline, start, end, CPU time, time in the spin it did not spin) ns
        self.spikes: list[tuple[int, int, int, int, int]] = []

    def __enter__(self):
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr.readline().strip() == "ready", self.proc.stderr.read()
        self.pid = self.proc.pid
        return self

    def cpu_ns(self) -> int:
        """The CPU time the kernel counted for it so far (proc(5), /proc/PID/schedstat: sum_exec_runtime)."""
        return int(open(f"/proc/{self.pid}/schedstat").read().split()[0])

    def __exit__(self, *exc):
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        self.spikes = [tuple(map(int, line.split())) for line in out.splitlines()]


def _run(tmp_path, wait: str, keep_late: int = 1000, trace_mode: str = "full"):
    config = RunConfig(
        trace_mode=trace_mode,
        duration_ns=2_500_000_000,
        wait=wait,
        cpu=_last_cpu(),
        priority=LOOP_PRIORITY,
        out_dir=tmp_path,
        keep_late=keep_late,
    )
    for _ in range(30):  # another real-time test (of another checkout) may hold the machine lock
        try:
            return run(config)
        except Exception as err:
            if "another real-time softrt run" not in str(err):
                raise
            time.sleep(2)
    pytest.skip("another real-time softrt run kept the machine busy")


def _window(cycle: dict) -> tuple[int, int]:
    return cycle["window"]["start_ns"], cycle["window"]["end_ns"]


def _overlap_us(start: int, end: int, cycle: dict) -> float:
    a, b = _window(cycle)
    return max(0, min(end, b) - max(start, a)) / 1e3


def _traced(why: dict) -> None:
    assert why["tracing"] == "on", why["tracing"]
    assert why["trace"]["events_read"] > 0 and why["trace"]["events_missing"] == [], why["trace"]


def _causes(late_cycle: dict, name: str) -> list[dict]:
    return [c for c in late_cycle["causes"] if c.get("name") == name]


def test_a_higher_priority_fifo_spinner_is_named_for_every_spike_it_caused(tmp_path, disturber_bin):
    with Disturber(disturber_bin, "fifo", SPIN_US, EVERY_US) as dist:
        result = _run(tmp_path, "spin")
    why = result.summary.to_dict()["why_late"]
    _traced(why)
    _every_cause_carries_its_evidence(why)
    records = read_samples(result.path)
    first, last = int(records["detect_ns"][0]), int(records["detect_ns"][-1])
    spikes = [s for s in dist.spikes if first < s[0] and s[2] < last]
    assert len(spikes) >= 10, f"the disturber spiked {len(spikes)} times during the loop"
    # keep_late 1000 > the run's late cycles: every late cycle is in "worst" with its detail
    late = why["worst"]
    assert len(late) == why["late_cycles"], (len(late), why["late_cycles"])
    off, over = [], []
    for deadline, start, end, cpu_ns, gaps_ns in spikes:
        hit = [lc for lc in late if _window(lc)[0] < end and start < _window(lc)[1]]
        assert hit, f"the spike at {start} ({(end - start) / 1e3:.0f} µs) made no reported late cycle"
        named = [(lc, c) for lc in hit for c in _causes(lc, NAME)]
        assert named, f"the spike at {start} is not attributed to {NAME}: {[lc['causes'] for lc in hit]}"
        for lc, cause in named:
            assert cause["kind"] == "thread" and cause["id"] == dist.pid and cause["detail"] == "FIFO/RR 90", cause
            # The part of the spike inside the late cycle's window is what the cycle lost to it, less
            # what the spinner's clock shows it did not spin: an interrupt, or the hypervisor, held the
            # CPU meanwhile, which the attribution credits to them (the innermost holder; steal from the
            # scheduler's run time, spread over its stretch). In CI four spikes of one run were credited
            # 34-317 µs below the spin's overlap (their causes not kept); on the benchmark VM such a
            # spike held a 202 µs local timer IRQ, in the trace (local_timer_entry/exit, credited to
            # "local timer") and as a jump of the spinner's clock at the same moment.
            least_us = max(0.0, _overlap_us(start, end, lc) - gaps_ns / 1e3)
            most_us = _overlap_us(deadline, end, lc)
            low, high = least_us - max(10.0, 0.1 * least_us), most_us + max(10.0, 0.1 * most_us)
            if not low <= cause["duration_us"] <= high:
                off.append((round(least_us, 1), round(most_us, 1), round(gaps_ns / 1e3, 1), cause["duration_us"]))
        # No more than it ran: the CPU time the scheduler counted for the spike, its wake-up path
        # included (in CI three spikes were credited 100-135 µs above a count from the spin alone,
        # their timers' wake-ups 60-90 µs late), plus its way back to sleep (~10-20 µs). Before
        # the fix a 300 µs spin was credited 524 and 726 µs: the hypervisor had stopped the vCPU
        # while it was current.
        credited_us = sum(c["duration_us"] for _lc, c in named)
        if credited_us > cpu_ns / 1e3 + max(30.0, 0.1 * cpu_ns / 1e3):
            over.append((round(cpu_ns / 1e3, 1), credited_us))
    # Every spike is named. Its duration may be stretched by what a guest cannot see: a hypervisor
    # that deschedules the vCPU while the disturber holds it (milliseconds on a busy host) makes
    # the disturber look longer; so on a VM one spike in ten may fall outside the tolerance.
    assert len(off) <= len(spikes) // 10, f"durations off (least µs, most µs, not spun µs, attributed µs): {off}"
    # Time the scheduler counted as the disturber's but that it did not spend in its spin (a host
    # exit the guest sees as neither steal nor an event) is possible; more than one spike in ten is not.
    assert len(over) <= len(spikes) // 10, f"credited more than it ran (CPU µs, credited µs): {over}"
    credited = sum(c["duration_us"] for lc in late for c in _causes(lc, NAME))
    ran = sum(s[3] for s in dist.spikes) / 1e3
    assert credited <= ran + 30.0 * len(dist.spikes), (credited, ran, len(dist.spikes))
    # It tops the tasks that took the CPU from the loop themselves. Not necessarily the whole table:
    # other tenants of a shared VM stall the CPU for milliseconds (outside-the-guest time), and a
    # SCHED_OTHER task queued on the RT CPU gets its 50 ms a second through the fair server.
    tasks = [c for c in why["culprits"] if c["kind"] == "thread" and not c.get("via")]
    assert tasks[0]["name"] == NAME, tasks[:3]
    assert tasks[0]["id"] == dist.pid and tasks[0]["cycles"] >= len(spikes), tasks[0]


@pytest.mark.parametrize("trace_mode", ["full", "lean"])  # lean: a sleeping run's default (auto)
def test_b_a_sched_other_busy_task_never_makes_a_sleeping_cycle_late(tmp_path, disturber_bin, trace_mode):
    with Disturber(disturber_bin, "other", 0, 0) as dist:
        result = _run(tmp_path, "sleep", trace_mode=trace_mode)
        # the busy task really ran on the RT CPU during the run (its CPU time grew)
        busy_ticks = int(open(f"/proc/{dist.pid}/stat").read().rsplit(")", 1)[1].split()[11])
    assert busy_ticks > 0
    why = result.summary.to_dict()["why_late"]
    _traced(why)

    # the busy task was on the RT CPU in the trace (switched to while the loop slept)
    def blamed(c: dict) -> bool:
        return (c["kind"] == "thread" and c["id"] == dist.pid) or NAME in c["name"]

    # It ran only while the loop slept, so it is never what made a cycle late: never a cycle's
    # main cause and never more than a few µs of a window. (Seen in about one run in ten on this
    # VM: 4-12.5 µs of a window that a hypervisor stall filled, credited to the task around the
    # switch to the woken loop; the text trace places events to 1 µs.) Blaming it for the time it
    # ran while the loop slept would be hundreds of µs a cycle.
    most_us = 50.0
    for lc in why["worst"]:
        for cause in filter(blamed, lc["causes"]):
            assert cause["duration_us"] <= most_us and lc["main_cause"] != cause["label"], lc
    mine = [c for c in why["culprits"] if blamed(c)]
    assert all(c["worst_us"] <= most_us for c in mine), mine
    assert not mine or why["culprits"][0] not in mine, why["culprits"][:3]


def test_d_a_sched_other_task_on_the_rt_cpu_is_named_through_the_fair_server(tmp_path, disturber_bin):
    """A spin run switches RT throttling off, but since Linux 6.12 the fair server still runs a
    SCHED_OTHER task queued on the RT CPU up to 50 ms a second: the task is the culprit, by name."""
    fair = fairserver.read("/", [_last_cpu()])
    if not fair.in_force(_last_cpu()):
        pytest.skip("no fair server on the RT CPU (Linux < 6.12, or runtime 0): a SCHED_OTHER task there never runs")
    with Disturber(disturber_bin, "other", 0, 0) as busy:
        cpu_before = busy.cpu_ns()
        result = _run(tmp_path, "spin")
        ran_us = (busy.cpu_ns() - cpu_before) / 1e3
    why = result.summary.to_dict()["why_late"]
    _traced(why)
    _every_cause_carries_its_evidence(why)
    assert why["rt_throttling"] is False
    mode = result.summary.tuning.fair_server  # the Mode block's line
    assert mode is not None and mode.cpu == _last_cpu() and mode.in_force, mode
    rows = [c for c in why["culprits"] if c["kind"] == "thread" and c["id"] == busy.pid]
    assert rows, f"{NAME} (pid {busy.pid}) is not among the culprits: {why['culprits'][:6]}"
    (row,) = rows  # only through the fair server: it never held a woken worker
    assert row["name"] == NAME and row["via"] == "fair_server", row
    assert row["detail"] == "OTHER nice 0, through the fair server", row
    # its stalls: the fair server's runtime comes in slices of milliseconds (50 ms a second by default)
    assert row["cycles"] >= 1 and row["worst_us"] >= 1_000, row
    # never credited with more than the CPU time the kernel counted for it over the run
    assert row["total_us"] <= ran_us, (row, ran_us)
    stalls = [c for lc in why["worst"] for c in lc["causes"] if c["kind"] == "thread" and c["id"] == busy.pid]
    assert stalls and all(
        c["label"] == f"thread {NAME} (pid {busy.pid}, OTHER nice 0, through the fair server)" for c in stalls
    ), stalls[:3]


def _every_cause_carries_its_evidence(why: dict) -> None:
    """What every traced spin run reports (test_a's and test_d's: the disturber is one source among
    the machine's own): every late cycle's causes are named sources with their evidence, and the
    culprits table adds up exactly what the cycles show."""
    assert why["trace"]["lost_events"] == why["lost_events"] >= 0
    assert why["rt_throttling"] is not True  # a spin run turns it off
    assert len(why["worst"]) == why["late_cycles"]
    kinds = {"thread", "irq", "softirq", "kernel", "outside", "loop"}
    for lc in why["worst"]:
        a, b = _window(lc)
        window_us = (b - a) / 1e3
        assert lc["window"]["duration_us"] == pytest.approx(window_us, abs=0.01)
        explained = sum(c["duration_us"] for c in lc["causes"])
        # Every cause is a named source with a positive duration and its share; the rest is stated.
        for c in lc["causes"]:
            assert c["kind"] in kinds and c["name"] and c["duration_us"] > 0, c
            assert c["share"] == pytest.approx(c["duration_us"] / window_us, abs=0.001), c
            if c["kind"] == "thread":  # a pid, and its policy from sched_switch (a workqueue item: its function)
                assert c["id"] > 0 and (c["detail"] or c["name"].endswith("]")), c
            if c["kind"] == "outside" and c["name"].startswith("hypervisor steal"):
                assert "gaps_ns" not in c  # its evidence is the scheduler's clock, not a stretch
            elif c["kind"] == "outside":  # its evidence: the event-free stretches inside the window
                assert all(a <= g0 < g1 <= b and g1 - g0 >= why["gap_min_us"] * 1e3 for g0, g1 in c["gaps_ns"]), c
                assert c["duration_us"] == pytest.approx(sum(g1 - g0 for g0, g1 in c["gaps_ns"]) / 1e3, abs=0.01)
            # with RT throttling off, nothing is called RT throttling
            assert "RT throttling" not in c["name"] or why["rt_throttling"] is not False, c
        assert explained + lc["unexplained_us"] == pytest.approx(window_us, abs=0.01 + 1e-6 * window_us), lc
        assert lc["main_cause"] == (lc["causes"][0]["label"] if lc["causes"] else "unexplained")
    per_source = {}
    for lc in why["worst"]:
        for c in lc["causes"]:
            # a culprit is a source and how it got the CPU: a task may take it directly and, in the
            # same cycle, through the fair server (two causes, two culprits)
            per_source.setdefault((c["kind"], c["name"], c["id"], c.get("via")), []).append(c["duration_us"])
    for culprit in why["culprits"]:  # the table adds up exactly what the cycles show
        assert culprit["cycles"] >= 1 and culprit["total_us"] >= culprit["worst_us"] > 0, culprit
        mine = per_source[(culprit["kind"], culprit["name"], culprit["id"], culprit.get("via"))]
        assert culprit["cycles"] == len(mine) and culprit["total_us"] == pytest.approx(sum(mine), abs=0.01 * len(mine))


def test_e_the_lean_trace_names_the_fifo_spinner_of_every_spike_of_a_sleeping_loop(tmp_path, disturber_bin):
    """The lean trace (--trace-mode lean: no timer interrupt, no wake-up) still names the thread that
    made each late cycle of a sleeping loop, and records none of the events it leaves out."""
    from softrt.trace.session import LEAN_LEFT_OUT

    with Disturber(disturber_bin, "fifo", SPIN_US, EVERY_US) as dist:
        result = _run(tmp_path, "sleep", trace_mode="lean")
    why = result.summary.to_dict()["why_late"]
    _traced(why)
    assert why["trace"]["mode"] == "lean" and not LEAN_LEFT_OUT & set(why["trace"]["events"]), why["trace"]
    records = read_samples(result.path)
    first, last = int(records["detect_ns"][0]), int(records["detect_ns"][-1])
    spikes = [s for s in dist.spikes if first < s[0] and s[2] < last]
    assert len(spikes) >= 10, f"the disturber spiked {len(spikes)} times during the loop"
    late = why["worst"]
    for _deadline, start, end, _cpu_ns, gaps_ns in spikes:
        hit = [lc for lc in late if _window(lc)[0] < end and start < _window(lc)[1]]
        assert hit, f"the spike at {start} ({(end - start) / 1e3:.0f} µs) made no reported late cycle"
        # As in test (a): what its own clock shows it did not spin (the hypervisor held the vCPU: seen
        # here as a 764 µs stall filling a window) is not the spinner's to be named for.
        if max(_overlap_us(start, end, lc) for lc in hit) - gaps_ns / 1e3 > 10.0:
            assert any(_causes(lc, NAME) for lc in hit), f"the spike at {start} is not named: {hit[0]['causes']}"
    tasks = [c for c in why["culprits"] if c["kind"] == "thread" and not c.get("via")]
    assert tasks[0]["name"] == NAME and tasks[0]["id"] == dist.pid, tasks[:3]
