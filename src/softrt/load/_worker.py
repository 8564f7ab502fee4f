"""One built-in load process: ``python _worker.py '<json config>'`` (load layer, stdlib only).

Run by softrt.load.builtin through taskset (placement) and setpriv --pdeathsig TERM, as a script
rather than a module so that it needs nothing from softrt on its path. Its placement is checked
by softrt.load.builtin through the platform layer, not here (no OS calls outside ``platform``). It works until SIGTERM
or its safety timeout, then prints one JSON line: ``{"counters": {...}, "elapsed_s": …,
"cpu_s": …}`` and exits 0. Every file it makes it also removes, on SIGTERM too.

On Windows softrt asks it to stop by closing its stdin (``stop_on_eof``: a console control event
reaches only processes on the caller's console, which a softrt without one, a service or Wine with
redirected streams, does not have; measured under Wine, every built-in load was killed before it
could report), and with CTRL_BREAK_EVENT (SIGBREAK here) where a console carries it. As it cannot import
softrt's platform layer, it tests for the few POSIX calls it uses (os.fork, os.posix_fadvise,
os.pwrite/os.pread, resource) and does the same work through portable calls without them (the disk
report says whether its read-back bypassed the cache). Its placement is checked by softrt, not here.
"""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

try:
    import resource
except ImportError:  # Windows: os.times() below
    resource = None

MIB = 1 << 20
_stop = False


def _on_term(signum, frame):
    global _stop
    _stop = True


def _running(deadline: float) -> bool:
    return not _stop and time.monotonic() < deadline


# What each kind of worker counts: its report's ``counters`` object (these fields, in this order),
# which softrt sums per role as "role.counter" (load.builtin.Figure).
class SpinCounts(NamedTuple):
    ops: int


class DiskCounts(NamedTuple):
    bytes_written: int
    bytes_read: int
    fsyncs: int
    uncached_reads: int  # 1 when the read-back bypassed the page cache (posix_fadvise), else 0


class CopyCounts(NamedTuple):
    bytes_copied: int


class ServerCounts(NamedTuple):
    connections: int
    bytes_received: int


class ClientCounts(NamedTuple):
    connections: int
    bytes_sent: int
    connect_errors: int


class ChurnCounts(NamedTuple):
    ops: int
    failures: int


def spin(cfg: dict, deadline: float) -> SpinCounts:
    """Busy arithmetic; one op is 10,000 floating-point multiply-adds."""
    ops = 0
    x = 1.0
    while _running(deadline):
        for _ in range(10_000):
            x = x * 1.000001 + 1e-9
        ops += 1
    return SpinCounts(ops)


def _pwrite(fd: int, data: bytes, offset: int) -> int:
    """Write all of *data* at *offset* (pwrite(2)); without os.pwrite (Windows: Python's docs, ``os.pwrite``,
    "Availability: Unix") through lseek + write, which is the same here, where one thread owns *fd*."""
    if hasattr(os, "pwrite"):
        return os.pwrite(fd, data, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    done = 0
    view = memoryview(data)
    while done < len(view):  # the C runtime's _write may write less than asked (a full disk: 0, then ENOSPC)
        n = os.write(fd, view[done:])
        if n <= 0:
            raise OSError(errno.ENOSPC, "the disk took no more bytes")
        done += n
    return done


def _pread(fd: int, size: int, offset: int) -> bytes:
    """Read up to *size* bytes at *offset* (pread(2)); without os.pread, lseek + read."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, size)


def disk(cfg: dict, deadline: float) -> DiskCounts:
    """Sequential writes with fsync, random 4 KiB writes with fsync, then a read-back, in a loop.

    os.fsync is fsync(2) on Linux and, on Windows, the C runtime's _commit, which calls
    FlushFileBuffers (Microsoft C runtime, ``_commit``): the data reaches the device either way.
    posix_fadvise(POSIX_FADV_DONTNEED) after each fsync drops the file from the page cache, so
    the reads reach the device (posix_fadvise(2)); where there is no posix_fadvise (Windows) the
    read-back may come from the cache, and the report says ``"uncached_reads": 0``.
    """
    drop_cache = hasattr(os, "posix_fadvise")
    passes = int(cfg.get("passes", 0))  # 0: until stopped (a test's one whole pass: 1)
    path = os.path.join(cfg["dir"], f"disk-{os.getpid()}.dat")
    size = int(cfg.get("file_bytes", 16 * MIB))
    block = os.urandom(MIB)  # incompressible, so compressing/deduplicating SSDs still do the work
    small = os.urandom(4096)
    written = read = fsyncs = 0
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o600)
    try:
        done = 0
        while _running(deadline) and not (passes and done == passes):
            for off in range(0, size, MIB):  # sequential writes, fsync after each MiB
                if not _running(deadline):
                    break
                written += _pwrite(fd, block, off)
                os.fsync(fd)
                fsyncs += 1
            for i in range(256):  # random 4 KiB writes, fsync every 16
                if not _running(deadline):
                    break
                written += _pwrite(fd, small, random.randrange(size // 4096) * 4096)
                if i % 16 == 15:
                    os.fsync(fd)
                    fsyncs += 1
            os.fsync(fd)
            if drop_cache:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            off = 0
            while _running(deadline):  # sequential read-back
                chunk = _pread(fd, MIB, off)
                if not chunk:
                    break
                read += len(chunk)
                off += len(chunk)
            done += 1
    finally:
        os.close(fd)
        os.unlink(path)
    return DiskCounts(written, read, fsyncs, int(drop_cache))


def memcopy(cfg: dict, deadline: float) -> CopyCounts:
    """Copy a buffer much larger than the caches back and forth (memmove through memoryview)."""
    size = int(cfg.get("buffer_bytes", 64 * MIB))
    src = bytearray(b"\xa5") * size  # written once, so every page is really backed
    dst = bytearray(b"\x5a") * size
    copied = 0
    while _running(deadline):
        memoryview(dst)[:] = src
        src, dst = dst, src
        copied += size
    return CopyCounts(copied)


def net_server(cfg: dict, deadline: float) -> ServerCounts:
    """Accept connections on the inherited loopback socket and read each one to EOF.

    POSIX passes the socket as an inherited descriptor (``fd``); Windows as the bytes of
    socket.share() on stdin (``shared``: socket.fromshare, the documented way to hand a socket
    to another process there).
    """
    if cfg.get("shared"):
        srv = socket.fromshare(bytes.fromhex(cfg["share"]))
    else:
        srv = socket.socket(fileno=int(cfg["fd"]))
    srv.settimeout(0.2)
    buf = bytearray(256 * 1024)
    conns = received = 0
    while _running(deadline):
        try:
            conn, _ = srv.accept()
        except TimeoutError:
            continue
        with conn:
            conn.settimeout(1.0)
            try:
                while n := conn.recv_into(buf):
                    received += n
            except (TimeoutError, ConnectionError):
                pass
        conns += 1
    srv.close()
    return ServerCounts(conns, received)


def net_client(cfg: dict, deadline: float) -> ClientCounts:
    """Open a connection to the server, send a burst, close; as fast as possible."""
    payload = os.urandom(int(cfg.get("burst_bytes", 64 * 1024)))
    addr = ("127.0.0.1", int(cfg["port"]))
    conns = sent = errors = 0
    while _running(deadline):
        try:
            with socket.create_connection(addr, timeout=1.0) as c:
                c.sendall(payload)
                c.shutdown(socket.SHUT_WR)
                c.recv(1)  # wait for the server's close, so each connection completes
            conns += 1
            sent += len(payload)
        except OSError as err:
            # EADDRNOTAVAIL: local ports exhausted by TIME_WAIT; back off briefly (tcp(7)).
            errors += 1
            time.sleep(0.001 if err.errno == errno.EADDRNOTAVAIL else 0.01)
    return ClientCounts(conns, sent, errors)


def churn(cfg: dict, deadline: float) -> ChurnCounts:
    """fork + exec of a trivial program + wait, repeatedly (what a parallel build does).

    Without fork (Windows, or ``"spawn": true``) each process is created by subprocess
    (CreateProcess), which is what a build does there.
    """
    prog, args = cfg["program"], list(cfg.get("args", []))
    if cfg.get("spawn") or not hasattr(os, "fork"):
        return _churn_spawn([prog, *args], deadline)
    ops = failures = 0
    while _running(deadline):
        pid = os.fork()
        if pid == 0:
            try:
                os.execv(prog, [prog, *args])
            finally:
                os._exit(127)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) == 0:
            ops += 1
        else:
            failures += 1
    return ChurnCounts(ops, failures)


def _churn_spawn(argv: list[str], deadline: float) -> ChurnCounts:
    ops = failures = 0
    while _running(deadline):
        try:
            ok = (
                subprocess.run(
                    argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
                ).returncode
                == 0
            )
        except OSError:
            ok = False
        ops, failures = ops + ok, failures + (not ok)
    return ChurnCounts(ops, failures)


Counts = SpinCounts | DiskCounts | CopyCounts | ServerCounts | ClientCounts | ChurnCounts
KINDS: dict[str, Callable[[dict, float], Counts]] = {
    "spin": spin,
    "disk": disk,
    "memcopy": memcopy,
    "net_server": net_server,
    "net_client": net_client,
    "churn": churn,
}


def _cpu_s() -> float:
    """CPU seconds used by this process and its reaped children (getrusage(2); os.times() on Windows)."""
    if resource is None:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _stop_at_eof() -> None:
    """Stop when softrt closes this process's stdin (its end of the pipe)."""
    try:
        sys.stdin.buffer.read()
    except (OSError, ValueError):
        pass
    _on_term(None, None)


def main(argv: list[str]) -> int:
    if hasattr(signal, "SIGBREAK"):  # Windows, where a console carries CTRL_BREAK_EVENT
        signal.signal(signal.SIGBREAK, _on_term)
    cfg = json.loads(argv[1])
    if cfg.get("shared"):  # the first line on stdin: the listening socket (socket.share)
        cfg["share"] = sys.stdin.readline().strip()
    if cfg.get("stop_on_eof"):
        threading.Thread(target=_stop_at_eof, name="stop-at-eof", daemon=True).start()
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # softrt decides when loads stop, not Ctrl-C
    if hasattr(signal, "pthread_sigmask"):  # softrt started this with SIGTERM held (procs.spawn
        # term_held): one sent meanwhile is handled now, and the report below still comes
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    cpu0 = _cpu_s()
    t0 = time.monotonic()
    counters = KINDS[cfg["kind"]](cfg, t0 + float(cfg["timeout_s"]))
    elapsed = time.monotonic() - t0
    cpu_s = _cpu_s() - cpu0  # the work only, not the interpreter's start-up
    print(json.dumps({"counters": counters._asdict(), "elapsed_s": elapsed, "cpu_s": cpu_s}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
