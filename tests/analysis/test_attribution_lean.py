"""The lean trace's attribution (analysis.attribution, ``lean=True``): no timer interrupt and no wake-up
are recorded (trace.session.LEAN_LEFT_OUT), so the worker is taken as woken at its window's start."""

from __future__ import annotations

from .test_attribution import IDLE, US, WORKER, W, causes, edge, ev, records, run, switch

WAKE = "kernel wake-up from idle: timer interrupt, exit from idle and switch (lean trace: not split)"
GAP = "outside no guest activity on CPU 1 (or an unrecorded timer interrupt: lean trace)"
PAST = "kernel wake-up past a lower-priority task: timer interrupt and switch (lean trace: not split)"


def _slept_until(e: int, switch_in_us: int, *between) -> list:
    """The worker slept before edge *e* (idle current); it was switched in *switch_in_us* after it."""
    return [switch(e - 100 * US, W, IDLE, "S"), *between, switch(e + switch_in_us * US, IDLE, W, "R")]


def test_idle_from_the_edge_to_the_switch_is_the_wake_up_when_it_is_short():
    e = edge(3)
    out = run(records(20, late={3: 24 * US}), _slept_until(e, 22), lean=True)
    assert causes(out, 3) == {WAKE: 22.0}  # longer than gap_min_ns, shorter than LEAN_WAKE_GAP_NS
    assert out["worst"][0]["unexplained_us"] == 4.0  # the worker's own return to its clock read
    # The full trace, given the same events, has no wake-up: the worker still asleep is no cause.
    full = run(records(20, late={3: 24 * US}), _slept_until(e, 22))
    assert WAKE not in causes(full, 3)


def test_a_long_quiet_stretch_is_a_gap_that_may_be_the_unrecorded_timer():
    e = edge(3)
    got = causes(run(records(20, late={3: 160 * US}), _slept_until(e, 158), lean=True), 3)
    assert got == {GAP: 158.0}


def test_an_irq_inside_the_wake_up_is_still_named():
    e = edge(3)
    irq = [
        ev(e + 4 * US, "irq_handler_entry", task=("swapper/1", 0), irq=36, name="virtio1-req.0"),
        ev(e + 9 * US, "irq_handler_exit", task=("swapper/1", 0), irq=36, ret="handled"),
    ]
    got = causes(run(records(20, late={3: 26 * US}), _slept_until(e, 25, *irq), lean=True), 3)
    assert got == {"irq virtio1-req.0 (IRQ 36)": 5.0, WAKE: 20.0}  # 4 µs before the IRQ, 16 after it


def test_a_lower_priority_task_current_at_the_edge_is_never_blamed():
    """Without the wake-up the lean trace cannot tell the timer's path from a task that held the CPU past
    it (the full trace's blocking thread), so it blames no task: a SCHED_OTHER task that ran while the
    loop slept must never be a sleeping loop's culprit."""
    e = edge(4)
    other = ("busy", 3000, 120)
    events = [switch(e - 100 * US, W, other, "S"), switch(e + 45 * US, other, W, "R")]
    got = causes(run(records(20, late={4: 46 * US}), events, lean=True), 4)
    assert got == {PAST: 45.0}
    # the full trace, with its wake-up at +40 µs: the switch path (the task is not blamed either)
    woken = [*events[:1], ev(e + 40 * US, "sched_wakeup", task=other[:2], pid=WORKER), *events[1:]]
    got = causes(run(records(20, late={4: 46 * US}), woken), 4)
    assert got["kernel switch to the woken worker"] == 5.0 and not any(k.startswith("thread") for k in got)
    # 60 µs without an event: more than the wake-up path takes, a gap that may be the unrecorded timer
    long = [events[0], switch(e + 60 * US, other, W, "R")]
    assert causes(run(records(20, late={4: 61 * US}), long, lean=True), 4) == {GAP: 60.0}


def test_a_fifo_thread_that_ran_at_the_edge_is_named_as_in_the_full_trace():
    e = edge(3)
    hog = ("hog", 2000, 0)
    events = [switch(e - 100 * US, W, IDLE, "S"), switch(e + 2 * US, IDLE, hog, "R"), switch(e + 202 * US, hog, W, "R")]
    got = causes(run(records(20, late={3: 203 * US}), events, lean=True), 3)
    assert got["thread hog (pid 2000, FIFO/RR 99)"] == 200.0
    assert got[WAKE] == 2.0


def test_no_event_before_the_window_wakes_nothing():
    """Nothing is known of the CPU before the first event: the lean trace does not make a task up."""
    out = run(records(20, late={3: 50 * US}), [], lean=True)
    assert out["worst"][0]["causes"] == [] and out["worst"][0]["unexplained_us"] == 52.0


def test_a_lower_priority_task_switched_in_after_the_edge_is_not_blamed_either():
    """Seen in the known-answer test (b): after the edge the CPU went from one SCHED_OTHER task to
    another before the timer fired; neither delayed the loop more than the wake-up's path."""
    e = edge(4)
    kworker, busy = ("kworker/1:1", 40, 120), ("busy", 3000, 120)
    events = [
        switch(e - 100 * US, W, kworker, "S"),
        switch(e + 5 * US, kworker, busy, "S"),
        switch(e + 30 * US, busy, W, "R"),
    ]
    got = causes(run(records(20, late={4: 31 * US}), events, lean=True), 4)
    assert got == {PAST: 30.0}
