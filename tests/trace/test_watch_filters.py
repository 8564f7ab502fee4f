"""The watch's kernel filters (trace.watch), without a kernel: what each event is filtered on, and
the fallback where a kernel refuses a filter on ``clockid``."""

from __future__ import annotations

import errno

import pytest

from softrt.trace.watch import CLOCK_MONOTONIC_ID, enable


class _Instance:
    """An instance that refuses filters naming *refused* (as a kernel refuses an unknown field: EINVAL)."""

    def __init__(self, refused: str | None = None) -> None:
        self.refused = refused
        self.enabled: dict[str, str | None] = {}

    def enable(self, event: str, event_filter: str | None) -> None:
        if self.refused and event_filter and self.refused in event_filter:
            raise OSError(errno.EINVAL, "Invalid argument")
        self.enabled[event] = event_filter


def test_a_timer_setup_is_recorded_only_for_another_clock_and_falls_back_to_every_setup():
    threads = "common_pid == 7 || common_pid == 12"
    clock = f"({threads}) && clockid != {CLOCK_MONOTONIC_ID}"
    instance = _Instance()
    enable(instance, "timer:hrtimer_setup", clock, threads)
    assert instance.enabled == {"timer:hrtimer_setup": clock}
    instance = _Instance(refused="clockid")  # a kernel whose setup event has no clockid
    enable(instance, "timer:hrtimer_setup", clock, threads)
    assert instance.enabled == {"timer:hrtimer_setup": threads}
    instance = _Instance(refused="common_pid")  # no fallback for the other events: the error is said
    with pytest.raises(OSError) as err:
        enable(instance, "sched:sched_switch", threads, None)
    assert err.value.errno == errno.EINVAL and instance.enabled == {}
