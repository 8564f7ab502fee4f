"""EtherCAT test harness: a network namespace with a veth pair, the simulator, the real master.

``ecat_ns`` creates ``softrt-ecat-<pid>-<n>`` with ``ecm0`` (master side) and ``ecs0`` (slave
side) and always deletes it (which deletes the veth pair too). ``ecat_sim`` starts
``softrt ecat-sim`` inside it as a separate process (pysoem holds the GIL in several calls, so
the slaves cannot live in the test's interpreter) and always stops it. The master runs in the
test process: :meth:`NetNs.inside` switches the calling thread into the namespace just while
pysoem opens its raw socket (a socket stays bound to its namespace afterwards).

Needs root (``ip netns``). As an unprivileged user, run ``unshare -rn pytest tests/ethercat``:
the fixture then builds the veth pair in that private namespace instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pysoem = pytest.importorskip("pysoem")

CLONE_NEWNET = 0x40000000
HOUSEKEEPING_CPU = min(os.sched_getaffinity(0))  # the run's RT CPU is the last one
_counter = itertools.count()
#: ``softrt run`` options of the tests' EtherCAT runs: the worker sleeps between cycles. Spinning,
#: it leaves SCHED_OTHER work queued on the RT CPU (the suite's other worker) only the fair
#: server's windows (Linux >= 6.12: 50 ms a second, up to 100 ms at a stretch across a period
#: boundary; a 101 ms host gap was seen), past the slaves' 100 ms SM watchdog. These tests are
#: about the bus, not the wait.
RUN_WAIT = ("--wait", "sleep")
#: The simulated slaves' SM watchdog: 1 s, not a real slave's 100 ms, because this VM stalls a
#: process for 100 ms now and then (a 100.4 ms period with the worker sleeping, so no fair-server
#: window); the test of the watchdog programs its own through the master (test_master.py).
SIM_WATCHDOG = ("--sm-watchdog", "1s")
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@dataclass
class NetNs:
    """A network namespace (``name`` None: the current one) with ``ecm0``/``ecs0``."""

    name: str | None
    master_iface: str = "ecm0"
    slave_iface: str = "ecs0"

    def cmd(self, *args: str) -> list[str]:
        """Return *args* prefixed to run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *args] if self.name else list(args)

    def ip(self, *args: str) -> None:
        subprocess.run(
            ["ip", *(["-n", self.name] if self.name else []), *args], check=True, capture_output=True, text=True
        )

    @contextlib.contextmanager
    def inside(self):
        """Run the block with this thread in the namespace (for opening raw sockets)."""
        if self.name is None:
            yield
            return
        here = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        there = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            _setns(there)
            try:
                yield
            finally:
                _setns(here)
        finally:
            os.close(here)
            os.close(there)


def _can_use_ip_netns() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None and os.access("/run", os.W_OK)


@pytest.fixture(autouse=True)
def patient_soem():
    """Give SOEM's per-datagram timeouts room for a Python slave on a busy machine.

    SOEM waits 2 ms for most configuration replies (``EC_TIMEOUTRET``) and often does not retry;
    a scheduling hiccup of the simulator would then look like a missing slave. Tests assert data
    and states, not timing, so they use 10x the defaults.
    """
    t = pysoem.settings.timeouts
    saved = (t.ret, t.safe, t.eeprom, t.tx_mailbox)
    t.ret, t.safe, t.eeprom, t.tx_mailbox = 20_000, 200_000, 200_000, 200_000
    yield
    t.ret, t.safe, t.eeprom, t.tx_mailbox = saved


@pytest.fixture
def ecat_ns():
    """A fresh namespace with an up veth pair ecm0 <-> ecs0; deleted afterwards, also on failure."""
    if shutil.which("ip") is None:
        pytest.skip("needs iproute2 ('ip')")
    if _can_use_ip_netns():
        ns = NetNs(f"softrt-ecat-{os.getpid()}-{next(_counter)}")
        subprocess.run(["ip", "netns", "add", ns.name], check=True, capture_output=True)
    else:  # e.g. under `unshare -rn`: use the private namespace we are already in
        ns = NetNs(None, f"ecm{os.getpid() % 1000}", f"ecs{os.getpid() % 1000}")
        try:
            subprocess.run(
                ["ip", "link", "add", ns.master_iface, "type", "veth", "peer", "name", ns.slave_iface],
                check=True,
                capture_output=True,
            )
        except subprocess.CalledProcessError:
            pytest.skip("needs root, or run under `unshare -rn` (CAP_NET_ADMIN in a private netns)")
    try:
        if ns.name:
            ns.ip("link", "add", ns.master_iface, "type", "veth", "peer", "name", ns.slave_iface)
            ns.ip("link", "set", "lo", "up")
        ns.ip("link", "set", ns.master_iface, "up")
        ns.ip("link", "set", ns.slave_iface, "up")
        yield ns
    finally:
        if ns.name:
            subprocess.run(["ip", "netns", "del", ns.name], capture_output=True)
        else:
            subprocess.run(["ip", "link", "del", ns.master_iface], capture_output=True)


class SimProcess:
    """A running ``softrt ecat-sim`` and its control socket."""

    def __init__(self, proc: subprocess.Popen, control: Path) -> None:
        self.proc = proc
        self.control_path = control
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(str(control) + ".client")
        self._sock.settimeout(5)

    def control(self, **request) -> dict:
        """Send one control request; return the simulator's answer (its stats)."""
        self._sock.sendto(json.dumps(request).encode(), str(self.control_path))
        answer = json.loads(self._sock.recv(1 << 20))
        assert answer.get("ok"), answer
        return answer

    def stats(self) -> dict:
        return self.control(cmd="stats")

    def stop(self) -> str:
        self._sock.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.stdout.read() if self.proc.stdout else ""


@pytest.fixture
def start_sim(ecat_ns, tmp_path):
    """Return ``start(*args, fifo=False)``: run ``softrt ecat-sim --iface ecs0 ARGS`` in the namespace.

    With *fifo*, the simulator runs SCHED_FIFO (priority 10) on the first CPU: it stands for hardware
    that answers in microseconds, and a busy housekeeping CPU must not hold its replies past the
    master's receive deadline (tests that count lost frames exactly). Pinned there because, free to
    run on the RT CPU under the run's worker (SCHED_FIFO 80), it left a run's bring-up unanswered
    (SDO reads, "no answer") in 7 of 8 runs while the housekeeping CPU was loaded; pinned, in none.
    """
    started: list[SimProcess] = []

    def start(*args: str, fifo: bool = False) -> SimProcess:
        control = tmp_path / f"sim{len(started)}.sock"
        proc = subprocess.Popen(
            ecat_ns.cmd(
                *(["taskset", "-c", str(HOUSEKEEPING_CPU), "chrt", "-f", "10"] if fifo else []),
                sys.executable,
                "-m",
                "softrt",
                "ecat-sim",
                "--iface",
                ecat_ns.slave_iface,
                "--control",
                str(control),
                *SIM_WATCHDOG,
                *args,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        line = proc.stdout.readline()  # "ecat-sim: N slave(s) answering on ecs0" once bound
        while line.startswith("softrt: "):  # what the start of every softrt command cleaned up first
            line = proc.stdout.readline()
        if "answering" not in line:
            proc.kill()
            raise RuntimeError(f"ecat-sim did not start: {line}{proc.stdout.read()}")
        for _ in range(100):
            if control.exists():
                break
            time.sleep(0.01)
        sim = SimProcess(proc, control)
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.stop()


@pytest.fixture
def soem_master(ecat_ns):
    """Return ``open()``: a ``pysoem.Master`` opened on ecm0 inside the namespace; closed afterwards."""
    masters = []

    def open_master():
        m = pysoem.Master()
        with ecat_ns.inside():
            m.open(ecat_ns.master_iface)
        masters.append(m)
        return m

    yield open_master
    for m in masters:
        with contextlib.suppress(Exception):
            m.close()
