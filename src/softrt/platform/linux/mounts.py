"""Mounting and unmounting a pseudo file system (platform layer).

Only tracefs needs it: trace-cmd and libtracefs mount it at /sys/kernel/tracing when it is not
mounted (libtracefs ``tracefs_tracing_dir()``, mount(2): ``mount("nodev", "/sys/kernel/tracing",
"tracefs", 0, NULL)``); softrt does the same, and unmounts it again (umount2(2)).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os

from ...errors import PermissionDenied, SoftRTError

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def mount(source: str, target: str, fstype: str) -> None:
    """mount(2) *fstype* at *target*; raise PermissionDenied or SoftRTError."""
    if _libc.mount(source.encode(), target.encode(), fstype.encode(), ctypes.c_ulong(0), None) != 0:
        err = ctypes.get_errno()
        if err in (errno.EPERM, errno.EACCES):
            raise PermissionDenied(f"mount {fstype} at {target}", hint="run as root")
        raise SoftRTError(f"cannot mount {fstype} at {target}: {os.strerror(err)}")


def umount(target: str) -> None:
    """umount2(2) *target* (not lazily: a busy mount stays and raises SoftRTError)."""
    if _libc.umount2(target.encode(), 0) != 0:
        err = ctypes.get_errno()
        raise SoftRTError(f"cannot unmount {target}: {os.strerror(err)}")
