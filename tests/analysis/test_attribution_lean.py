"""The lean trace's attribution (analysis.attribution, ``lean=True``): no timer interrupt and no wake-up
are recorded (trace.session.LEAN_LEFT_OUT), so the worker is taken as woken at its window's start."""

from __future__ import annotations

from .test_attribution import IDLE, US, W, causes, edge, ev, records, run, switch

WAKE = "kernel wake-up from idle: timer interrupt, exit from idle and switch (lean trace: not split)"
GAP = "outside no guest activity on CPU 1 (or an unrecorded timer interrupt: lean trace)"


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


def test_a_task_current_at_the_edge_is_the_switch_then_the_blocking_thread():
    e = edge(4)
    other = ("busy", 3000, 120)
    events = [switch(e - 100 * US, W, other, "S"), switch(e + 45 * US, other, W, "R")]
    got = causes(run(records(20, late={4: 46 * US}), events, gap_min_ns=50_000, lean=True), 4)
    # woken at the edge: the scheduler's switch path for SWITCH_GRACE_NS, then the task that held on
    assert got == {"thread busy (pid 3000, OTHER nice 0)": 45.0}
    short = [switch(e - 100 * US, W, other, "S"), switch(e + 25 * US, other, W, "R")]
    assert causes(run(records(20, late={4: 26 * US}), short, lean=True), 4) == {
        "kernel switch to the woken worker": 25.0
    }


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
