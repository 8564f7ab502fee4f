"""Linux's part of the platform layer (psutil's ``_pslinux``): the backend and the readers and writers of
Linux kernel files.

:mod:`.backend` (``LinuxPlatform``) is reached only through ``softrt.platform.get_platform()``. The
other modules are public to the layers above and work on any OS, on a tree captured under a ``root``
(``softrt check --root``): :mod:`.kfacts` and :mod:`.ktasks` (kernel facts, processes and threads),
:mod:`.fairserver` (the 6.12+ fair server), :mod:`.writable` (the allow-list of kernel-file writes),
:mod:`.mounts` (tracefs) and :mod:`.threads` (every thread of this process on given CPUs).
This file imports nothing, so reading a captured Linux tree on Windows never loads libc.
"""
