"""The real-time worker's reports to its supervisor: armed, done, failed (schema layer).

The worker (loop.worker, in its own spawned process) sends one :class:`WorkerReport` through its
pipe when it is armed (the real-time controls it applied or could not), one when its loop is done
(its own cycle count, the device's counters and failure) and one when it failed (the error: a
:class:`~softrt.errors.SoftRTError` travels whole, anything else as its text). The supervisor
(session.run) reads the same type; nothing is keyed by a string tag (issue 29). Pickled across the
spawn boundary (Python docs, "multiprocessing: Pipes and Queues"), so it holds plain values only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ARMED, DONE, FAILED = "armed", "done", "failed"


@dataclass(frozen=True)
class WorkerReport:
    """One message of the worker: ``kind`` is ARMED, DONE or FAILED, with that kind's fields set."""

    kind: str
    #: ARMED: the controls applied, ``{"what", "detail"}``, and those that could not be, with ``"why"``
    #: (the summary's ``mode.applied`` / ``mode.not_applied`` entries).
    applied: tuple[dict[str, str], ...] = ()
    not_applied: tuple[dict[str, str], ...] = ()
    pid: int | None = None
    #: DONE: the cycles the loop ran, the device's counters (the summary's ``board``) and why the
    #: device failed the run (bus lost, a drive fault), None when it did not.
    cycles: int | None = None
    board: Any = None
    device_failure: str | None = None
    #: FAILED: what went wrong (a SoftRTError, or "TypeError: ..." text).
    error: Any = None

    @classmethod
    def armed(cls, applied: list[dict[str, str]], not_applied: list[dict[str, str]], pid: int) -> WorkerReport:
        return cls(ARMED, applied=tuple(applied), not_applied=tuple(not_applied), pid=pid)

    @classmethod
    def done(cls, cycles: int, board: Any, device_failure: str | None) -> WorkerReport:
        return cls(DONE, cycles=cycles, board=board, device_failure=device_failure)

    @classmethod
    def failed(cls, error: Any) -> WorkerReport:
        return cls(FAILED, error=error)


#: What the supervisor holds before the worker said anything (it never armed, or died silently).
NOTHING = WorkerReport("none")
