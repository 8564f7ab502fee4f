"""Running softrt in a child process: as a user without privileges, or with bounded memory and time.

:func:`in_child` forks and calls one function of softrt there, after dropping to another user
(setgroups, setgid, setuid) and/or limiting its address space (setrlimit(2) RLIMIT_AS) and its time
(alarm(2)), so that a test of a defect that would exhaust memory or block forever fails instead.
:func:`softrt_as` starts ``python -m softrt`` as another user, with an interpreter that user can
read (the test's own, or softrt's venv for every user), and skips the test with the reason when
there is none.
"""

from __future__ import annotations

import os
import pickle
import pwd
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import softrt

SRC = str(Path(softrt.__file__).resolve().parent.parent)  # the softrt under test (PYTHONPATH)
#: Interpreters a user other than root may be able to run softrt with, in order.
CANDIDATES = (sys.executable, "/opt/softrt/bin/python", "/opt/softrt-try/bin/python")
_found: dict[int, str] = {}  # the interpreter each user ran


def nobody() -> tuple[int, int]:
    """The uid and gid of the unprivileged user the tests run as ("nobody")."""
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("dropping to another user needs root")


class ChildFailed(AssertionError):
    """The child died (a signal: its time ran out, or memory) or raised; the message says which."""


def in_child(
    fn, *args, uid: int | None = None, gid: int | None = None, max_memory: int | None = None, timeout_s: int = 30
):
    """Return ``fn(*args)`` computed in a forked child (as *uid*/*gid*, with *max_memory* bytes of
    address space beyond what it has mapped, and *timeout_s* seconds); raise ChildFailed when it
    raises or dies."""
    if uid is not None:
        need_root()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no return from here
        os.close(r)
        try:
            signal.alarm(timeout_s)
            if max_memory is not None:  # on top of what is mapped already (pyarrow reserves much address space)
                limit = _mapped_bytes() + max_memory
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            if uid is not None:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
            result = (True, fn(*args))
        except BaseException as err:  # noqa: BLE001 (handed to the parent)
            result = (False, f"{type(err).__name__}: {err}")
        with os.fdopen(w, "wb") as out:
            pickle.dump(result, out)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        raise ChildFailed(
            f"the child died: {'signal ' + str(os.WTERMSIG(status)) if os.WIFSIGNALED(status) else status}"
        )
    ok, value = pickle.loads(data)
    if not ok:
        raise ChildFailed(value)
    return value


def _mapped_bytes() -> int:
    """This process's address space now (/proc/self/status VmSize, proc(5))."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))


def call_as(uid: int, gid: int, fn, *args):
    """Return ``fn(*args)`` computed in a child process running as *uid*/*gid*."""
    return in_child(fn, *args, uid=uid, gid=gid)


def python_as(uid: int, gid: int, home: Path, *args: str, env: dict | None = None, **kwargs):
    """Run ``python ARGS`` (softrt importable) as *uid* with HOME=*home* (made theirs), with the first
    interpreter of CANDIDATES that user may run with softrt's dependencies; skip when there is none."""
    need_root()
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, uid, gid)
    base = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "PYTHONPATH": SRC,
        "COLUMNS": "120",
        "LANG": "C.UTF-8",
    }
    for python in [_found[uid]] if _found.get(uid) else CANDIDATES:
        try:
            proc = subprocess.run(
                [python, *args],
                user=uid,
                group=gid,
                extra_groups=[],
                cwd=home,
                env={**base, **(env or {})},
                capture_output=True,
                text=True,
                **kwargs,
            )
        except OSError:  # not there, or not theirs to run
            continue
        if "ModuleNotFoundError" not in proc.stderr:
            _found[uid] = python
            return proc
    pytest.skip(
        f"no Python with softrt's dependencies that uid {uid} may run (tried {', '.join(CANDIDATES)}; "
        f"and {SRC} must be readable)"
    )


def softrt_as(uid: int, gid: int, home: Path, *args: str, **kwargs):
    """Run ``python -m softrt ARGS`` as *uid* (see :func:`python_as`)."""
    return python_as(uid, gid, home, "-m", "softrt", *args, **kwargs)
