"""The supervisor's hold on the machine for one run (layer 5, session): the RT-loop lock, its threads
moved off the RT CPU, RT throttling off for a spin run, the worker tied to it.

Split from :mod:`.run`, which calls these while it arms a run. Every change is registered on the
run's ``ExitStack`` (or its ``ChangeJournal``) as it is made, so it is undone whatever happens.
Sources: Documentation/scheduler/sched-rt-group.rst (RT throttling), sched_setaffinity(2).
"""

from __future__ import annotations

from contextlib import ExitStack

from ..errors import ConfigError, PermissionDenied, SoftRTError
from ..platform import lock_rt_loop as _platform_lock_rt_loop
from ..platform import lock_stop_hint
from ..platform.linux import fairserver
from ..schema.config import RunConfig
from .config import RunPlan
from .drain import Outcome


def apply_system_changes(plan: RunPlan, plat, journal, out: Outcome, cleanup: ExitStack):
    """Move the supervisor (every thread of it) off the RT CPU and, for spin runs, switch RT throttling
    off; return the supervisor's ThreadPins (None: an untuned run, which moves nothing)."""
    config = plan.config
    if config.profile != "rt":
        return None
    # Every thread, not only this one: the metrics server's, a library's (pyarrow's jemalloc_bg_thd)
    # started before; those started later inherit it from their creator (platform.threads).
    pins = plat.pin_threads(plan.housekeeping)  # resolve_plan() made sure there is one
    cleanup.callback(pins.undo)
    _say_supervisor_pins(pins, out)
    fair = fairserver.read("/", [config.cpu])
    out.fair_server = fair.mode(config.cpu) if fair.present else None
    if config.wait == "spin" and plat.caps.rt_throttling:
        # A spinning real-time task is throttled for 50 ms every second by default (Linux,
        # Documentation/scheduler/sched-rt-group.rst); the platform names the setting that stops it.
        path, value = plat.rt_throttling_off()
        try:
            journal.set(path, value, "RT throttling would stall the spinning loop 50 ms every second")
        except PermissionDenied as err:
            out.not_applied.append({"what": "rt_throttling_off", "detail": path, "why": str(err)})
    return pins


def _say_supervisor_pins(pins, out: Outcome) -> None:
    """ "applied: supervisor_affinity" only when every thread of the supervisor is off the RT CPU;
    else "not applied", naming each thread that could not be moved and why."""
    out.applied[:] = [a for a in out.applied if a["what"] != "supervisor_affinity"]
    out.not_applied[:] = [a for a in out.not_applied if a["what"] != "supervisor_affinity"]
    every = "every thread" if pins.threads is None else f"all {pins.threads} threads"
    detail = f"supervisor on CPUs {pins.cpus}, {every}"
    if pins.failed:
        out.not_applied.append({"what": "supervisor_affinity", "detail": detail, "why": "; ".join(pins.failed)})
    else:
        out.applied.insert(0, {"what": "supervisor_affinity", "detail": detail})


def repin_supervisor(plat, pins, out: Outcome, cleanup: ExitStack) -> None:
    """Walk the supervisor's threads again just before the loop goes: a thread started since by one
    that was not yet moved (the walk's race) is moved now, and the line says what holds at "go"."""
    if pins is None:
        return
    again = plat.pin_threads(pins.cpus)
    cleanup.callback(again.undo)
    _say_supervisor_pins(again, out)


def tie_worker(plat, pid: int, tie: ExitStack, out: Outcome) -> None:
    """Make the worker die with this process where the supervisor must arrange it (a job object on Windows)."""
    try:
        tie.callback(plat.adopt_worker(pid))
    except SoftRTError as err:
        out.not_applied.append(
            {"what": "worker_tied", "detail": "the worker dies with the supervisor", "why": str(err)}
        )


def lock_rt_loop(config: RunConfig) -> int | None:
    """Allow one real-time softrt run at a time on this machine.

    Two SCHED_FIFO loops would fight for the CPU, and the first to end would restore RT
    throttling under the other's feet; the second run is refused instead.
    """
    if config.profile != "rt":
        return None
    fd, holder = _platform_lock_rt_loop()
    if fd is None:
        # ConfigError: exit status 2, as tune's refusal; nothing was started or written
        raise ConfigError(
            f"another real-time softrt run or tune holds this machine: pid {holder}", hint=lock_stop_hint(holder)
        )
    return fd
