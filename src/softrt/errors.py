"""softrt's exceptions (bottom layer: imports nothing from softrt).

    SoftRTError                 root; every error softrt raises on purpose
    ├── ConfigError             bad input: a value, a file, a CLI argument (exit status 2)
    │   ├── InvalidCpu          a CPU that does not exist, is offline or not allowed
    │   └── DiskFull            no space left where the user asked softrt to write (ENOSPC)
    ├── PermissionDenied        an OS operation needs root or a capability
    ├── NotSupported            this platform or kernel lacks a feature
    ├── InvalidState            an object is not in the state an operation needs
    ├── NoSuchProcess           a process or thread that exited (ESRCH)
    └── WorkerFailed            the real-time worker process died or reported an error

Every error carries a one-line message that says what is wrong and how to fix it; the CLI prints
``str(err)`` and nothing else. ``__reduce__`` keeps the fields when an error crosses a process
boundary (the worker reports errors to the supervisor).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

_E = TypeVar("_E", bound="SoftRTError")


class SoftRTError(Exception):
    """Root of every error softrt raises on purpose."""

    def __init__(self, msg: str, *, hint: str | None = None) -> None:
        self.msg = msg
        self.hint = hint
        super().__init__(msg if not hint else f"{msg} ({hint})")

    def __reduce__(self) -> tuple[Callable[..., SoftRTError], tuple[type[SoftRTError], dict[str, Any]]]:
        # keep fields across pickling (worker → supervisor)
        return (_rebuild, (type(self), self.__dict__.copy()))


def _rebuild(cls: type[_E], state: dict[str, Any]) -> _E:
    err = cls.__new__(cls)
    err.__dict__.update(state)
    Exception.__init__(err, *((state["msg"],) if not state.get("hint") else (f"{state['msg']} ({state['hint']})",)))
    return err


class ConfigError(SoftRTError):
    """Bad input: a value, a file or a command-line argument."""


class InvalidCpu(ConfigError):
    """A CPU that does not exist, is offline, or is outside this process's allowed set."""

    def __init__(self, cpu: object, eligible: object, why: str = "is not available") -> None:
        self.cpu = cpu
        self.eligible = eligible
        super().__init__(f"CPU {cpu} {why}", hint=f"choose from {eligible}")


class DiskFull(ConfigError):
    """No space left on the file or device the user named (write(2): ENOSPC): exit status 2."""


class PermissionDenied(SoftRTError):
    """An OS operation needs root or a capability."""

    def __init__(self, op: str, target: str = "", hint: str = "run as root") -> None:
        self.op = op
        self.target = target
        where = f" on {target}" if target else ""
        super().__init__(f"permission denied: {op}{where}", hint=hint)


class MissingTool(ConfigError):
    """A program softrt was asked to use (stress-ng, cyclictest, …) is not installed: bad input, exit status 2."""


class NotSupported(SoftRTError):
    """This platform or kernel lacks a feature."""


class InvalidState(SoftRTError):
    """An object is not in the state an operation needs."""

    def __init__(self, expected: object, actual: object, what: str = "state") -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(f"{what} is {actual}, expected {expected}")


class NoSuchProcess(SoftRTError):
    """A process or thread that is gone (it exited between being found and being acted on)."""


class WorkerFailed(SoftRTError):
    """The real-time worker process died or reported an error."""
