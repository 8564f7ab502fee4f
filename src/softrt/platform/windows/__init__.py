"""Windows's part of the platform layer (psutil's ``_pswindows``): the backend, its Win32 bindings, and
the Windows commands, settings and buffers.

:mod:`.backend` (``WindowsPlatform``) is reached only through ``softrt.platform.get_platform()``, and
:mod:`._win32` (the ctypes declarations and the :class:`~._win32.Win32` calls) only from the backend.
The other modules are public to the layers above and import on any OS (a capture of a Windows machine
is checked on Linux, and the tests run there): :mod:`.wincmd` (commands, or their captured outputs),
:mod:`.winsettings` (what ``softrt tune`` changes), :mod:`.wincpusets` (CPU sets, hybrid cores),
:mod:`.winadapters` (Npcap adapter names), :mod:`.winsystem` (one query as SYSTEM) and
:mod:`.etwevents` (the NT kernel logger's payloads). This file imports nothing.
"""
