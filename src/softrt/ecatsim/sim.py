"""The virtual EtherCAT segment: N simulated slaves answering real frames on an interface.

Always run it in its own process (``softrt ecat-sim``): pysoem keeps the GIL in ``config_map``,
``state_check`` and others, so a slave thread inside the master's interpreter cannot answer.

Transport: an ``AF_PACKET``/``SOCK_RAW`` socket bound to EtherType 0x88A4 on the interface (not
``ETH_P_ALL``: then our own replies are not looped back to us), frames read from its receive ring
(:mod:`.ring`). Each frame is processed in place (:meth:`Simulator.handle`: a layout seen before
through the segment's compiled steps, :mod:`.layouts`) and sent back with the same length; the
source MAC gets the locally-administered bit, as ESCs do (ETG.1000.4 §5.2). A control socket (UNIX
datagram, JSON) injects faults and reports state.
"""

from __future__ import annotations

import dataclasses
import errno
import gc
import json
import os
import select
import socket
import stat
import time
from dataclasses import dataclass

from ..errors import ConfigError
from ..ethercat.al import AlState
from ..ethercat.description import DeviceDescription
from ..ethercat.nsstat import NsStat
from ..ethercat.rawsock import open_raw_socket
from ..ethercat.wire import ETH_HEADER_BYTES, FrameError
from ..schema.doc import present
from .bus import Segment
from .control import Request, RequestError, parse_request
from .esc import Esc
from .faults import KINDS, FaultPlan
from .layouts import Layouts
from .replies import Refusal, SimStats, sim_stats
from .ring import RxRing
from .slave import DriveApp, make_app

POLL_MS = 1  #: wake-up period for the watchdog check when no frames arrive


@dataclass
class SimCounters:
    """What the simulator saw and did."""

    frames: int = 0
    replies: int = 0
    malformed: int = 0
    muted: int = 0  #: frames not answered because the segment fell silent (``mute``)
    #: From a process-data frame's arrival (the kernel's receive time) to its reply sent, ns: the
    #: simulator's own share of a round trip, the wait until it read the frame included.
    answer: NsStat = dataclasses.field(default_factory=NsStat)
    #: Of that, the wait: from the frame's arrival until the simulator read it, ns.
    wait: NsStat = dataclasses.field(default_factory=NsStat)


class Simulator:
    """N slaves on one segment plus the fault plan (no I/O: :func:`serve` adds the socket)."""

    def __init__(
        self,
        descriptions: list[DeviceDescription],
        clock=time.monotonic_ns,
        drift_ppm: list[float] | tuple[float, ...] = (),
        ca_abort: bool = False,
        watchdog_ns: int = 100_000_000,
    ) -> None:
        n = len(descriptions)
        self._clock = clock
        # ca_abort: CoE slaves answer complete access with an abort (coe.CoeServer).
        self.apps = [
            make_app(d, start_counts=1000 * (i + 1), ca_abort=ca_abort, serial=i + 1)
            for i, d in enumerate(descriptions)
        ]
        # DC quartz error per slave (the i-th applies to slave i; the rest run true).
        drifts = list(drift_ppm) + [0.0] * (n - len(drift_ppm))
        self.escs = [
            Esc(d, i, app, clock=clock, last=i == n - 1, drift_ppm=drifts[i], watchdog_ns=watchdog_ns)
            for i, (d, app) in enumerate(zip(descriptions, self.apps))
        ]
        for esc, app in zip(self.escs, self.apps):
            if isinstance(app, DriveApp):
                app.esc = esc
        self.segment = Segment(self.escs, clock=clock)
        self.layouts = Layouts()
        self.faults = FaultPlan()
        self.counters = SimCounters()
        #: When the whole segment falls silent (one of control.MUTE_EVENTS; "off": never).
        self.mute_at = "off"
        self.muted = False

    def _mute_due(self) -> bool:
        at, escs = self.mute_at, self.escs
        if at == "off":
            return False
        if at == "now":
            return True
        if at == "eeprom":
            return any(e.eeprom_reads for e in escs)
        if at == "sii":
            return any(e.eeprom_reads_preop for e in escs)
        if at == "mapping":
            return any(e.mapped for e in escs)
        want = {"preop": AlState.PREOP, "safeop": AlState.SAFEOP, "op": AlState.OP}[at]
        return any(e.al.state >= want and e.al.state != AlState.BOOT for e in escs)

    #: Was the last frame handled process data (a logical datagram)?
    last_was_pd = False

    def handle(self, frame: bytearray) -> tuple[int, int]:
        """Process one received frame in place; return ``(reply bytes, delay_us)`` (0 bytes: no
        reply). The slave applications of a processed frame run at :meth:`after_reply`."""
        self.counters.frames += 1
        self.last_was_pd = False
        if self.muted:
            self.counters.muted += 1
            return 0, 0
        try:
            layout = self.layouts.find(frame)
        except FrameError:
            self.counters.malformed += 1
            return 0, 0
        decision = None
        pd = layout.pd
        self.last_was_pd = pd is not None
        if pd is not None:
            decision = self.faults.decide(len(self.escs))
            if decision.drop:
                return 0, 0
        skip = decision.skip_slave if decision is not None else None
        skip_pd = None if skip is None else (lambda pos: pos == skip)
        if self.mute_at == "off":  # (a deferred write could be what the mute waits for)
            if layout.steps is None:
                layout.steps = self.segment.compile(layout.datagrams)
            self.segment.run(frame, layout.steps, skip_pd)
            return self._reply(frame, pd, decision)
        self.segment.process(frame, skip_pd, defer_apps=True, datagrams=layout.datagrams)
        if self._mute_due():  # the bus dies with this frame: it never comes back
            self.muted = True
            self.counters.muted += 1
            return 0, 0
        return self._reply(frame, pd, decision)

    @staticmethod
    def _reply(frame: bytearray, pd, decision) -> tuple[int, int]:
        frame[6] |= 0x02  # locally administered source MAC: the frame passed an ESC
        size = len(frame)
        if decision is not None and decision.corrupt is not None:
            size = _corrupt(frame, pd, decision.corrupt)
        return size, decision.delay_us if decision is not None else 0

    def control(self, raw: bytes) -> SimStats | Refusal:
        """Apply one control request (a JSON object, checked by :mod:`.control`; see :func:`serve`);
        return the JSON-able answer."""
        try:
            request = parse_request(raw, len(self.escs))
        except RequestError as err:
            return Refusal(error=str(err))
        cmd = request.cmd
        if cmd in KINDS:
            opts = present(delay_us=request.delay_us, slave=request.slave, corrupt=request.kind)
            if request.every is not None:
                self.faults.set_every(cmd, request.every, **opts)
            else:
                self.faults.arm(cmd, 1 if request.frames is None else request.frames, **opts)
        elif cmd == "drive_fault":
            slave = request.slave or 0
            app = self.apps[slave]
            if not isinstance(app, DriveApp):
                return Refusal(error="that slave is not a drive")
            axis = request.axis or 0
            if axis >= len(app.drives):
                return Refusal(error=f"that drive has {len(app.drives)} axis(es)")
            app.drives[axis].fault(0x5400 if request.code is None else request.code)  # 0x5400: power section
            self.escs[slave].refresh_inputs()
        elif cmd == "al_error":
            # A slave's own error (ETG.1000.6 §6.4.1): it drops to a lower state with the error
            # indication and an AL status code (e.g. SAFEOP, 0x001B sync manager watchdog).
            for esc in self._targets(request):
                esc.local_error(
                    AlState.SAFEOP if request.state is None else request.state,
                    0x0001 if request.code is None else request.code,
                )
        # (refuse_state, dc_drift and mute always carry their field: parse_request refuses them without)
        elif cmd == "refuse_state" and request.state is not None:
            # Make slave(s) refuse a state with an AL status code (e.g. OP with 0x001A sync error).
            for esc in self._targets(request):
                esc.refuse[request.state] = 0x0001 if request.code is None else request.code
        elif (
            cmd == "dc_drift" and request.ppm is not None
        ):  # a quartz warming up: {"cmd": "dc_drift", "slave": i, "ppm": x}
            for esc in self._targets(request):
                esc.dc.clock.set_drift(request.ppm, self._clock())
        elif cmd == "mute" and request.at is not None:
            self.mute_at = request.at
            self.muted = self._mute_due()
        return self.stats()

    def after_reply(self) -> None:
        """Run the slave applications (the drives) of the frame just answered (``Segment.finish``)."""
        self.segment.finish()

    def _targets(self, request: Request) -> list[Esc]:
        return self.escs if request.slave is None else [self.escs[request.slave]]

    def stats(self) -> SimStats:
        """Return counters and the state of every slave."""
        return sim_stats(self)


def bind_control(path: str) -> tuple[socket.socket, int]:
    """Bind the control socket at *path*; return it and its inode (to remove only our own file).

    A socket left at *path* by an earlier simulator is replaced; anything else there (a regular
    file, a directory) is never removed: :class:`ConfigError`.
    """
    ctrl = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        try:
            ctrl.bind(path)
        except OSError as err:
            if err.errno != errno.EADDRINUSE:
                raise ConfigError(
                    f"--control {path}: cannot bind a socket there ({err.strerror})",
                    hint="give a path in a directory you may write",
                ) from None
            mode = os.lstat(path).st_mode
            if not stat.S_ISSOCK(mode):
                raise ConfigError(
                    f"--control {path} exists and is not a socket; it was left alone",
                    hint="give a path that does not exist (e.g. /tmp/ecat-sim.sock)",
                ) from None
            os.unlink(path)  # a socket left by an earlier simulator
            ctrl.bind(path)
        return ctrl, os.lstat(path).st_ino
    except BaseException:
        ctrl.close()
        raise


def _remove_control(path: str, inode: int) -> None:
    try:
        st = os.lstat(path)
        if stat.S_ISSOCK(st.st_mode) and st.st_ino == inode:
            os.unlink(path)
    except OSError:
        pass


class Pacer:
    """When the master's next process-data frame is due, learned from the last ones.

    A sleeping process wakes tens of µs after its frame arrives on a virtual machine (the
    wake-up IPI, the vCPU's exit from halt): more than a real slave's whole answer. So the
    simulator sleeps until *early_ns* before the frame is due and busy-polls until it came
    (or *early_ns* after it was due). The period is a smoothed inter-arrival time; gaps far from
    it (a lost frame, a stalled master) are ignored, and after 8 of them in a row it is learned
    again.
    """

    def __init__(self, early_ns: int) -> None:
        self.early_ns = early_ns
        self.period_ns = 0
        self.last_ns = 0
        self._outliers = 0

    def frame(self, now_ns: int) -> None:
        """A process-data frame arrived at *now_ns*."""
        if self.last_ns:
            gap = now_ns - self.last_ns
            period = self.period_ns
            if period and period // 2 < gap < period * 3 // 2:
                self.period_ns = period + (gap - period) // 8
                self._outliers = 0
            else:
                self._outliers += 1
                if not period or self._outliers >= 8:
                    self.period_ns, self._outliers = gap, 0
        self.last_ns = now_ns

    def window(self) -> tuple[int, int] | None:
        """``(spin from, spin until)`` around the next frame (None: no period learned, or off)."""
        if not self.early_ns or not self.period_ns:
            return None
        due = self.last_ns + self.period_ns
        return due - self.early_ns, due + self.early_ns


def serve(
    sim: Simulator,
    iface: str,
    control_path: str | None = None,
    stop=lambda: False,
    on_ready=lambda: None,
    busy_poll_ns: int = 0,
) -> None:
    """Answer frames on *iface* until ``stop()`` is true.

    With *busy_poll_ns*, busy-poll that long either side of the moment the next process-data
    frame is due (:class:`Pacer`); sleep otherwise.

    Control requests (one JSON object per datagram on *control_path*, checked by :mod:`.control`),
    answered with the stats:
    ``{"cmd": "stats"}``; ``{"cmd": "drop"|"delay"|"bad_wkc"|"bad_frame", "frames": n}`` or
    ``"every": k`` (options ``"delay_us"``, ``"slave"``, ``"kind"``: how a bad frame is changed);
    ``{"cmd": "drive_fault", "slave": i, "code": c}`` (option ``"axis"``);
    ``{"cmd": "refuse_state", "state": "OP", "code": c}`` (optional ``"slave"``);
    ``{"cmd": "al_error", "state": "SAFEOP", "code": c}`` (optional ``"slave"``): the slave leaves
    its state on its own error, with that AL status code.
    ``{"cmd": "dc_drift", "ppm": x}`` (optional ``"slave"``): a slave's DC quartz error.
    ``{"cmd": "mute", "at": event}``: the segment falls silent at that point (control.MUTE_EVENTS).
    """
    sock = open_raw_socket(iface)
    sock.setblocking(False)
    # Frames are read from a ring shared with the kernel (.ring), each with the kernel's receive
    # time: the pacer learns the master's cycle, not this process's wake-ups.
    try:
        ring = RxRing(sock)
    except BaseException:
        sock.close()
        raise
    ctrl = None
    if control_path:
        try:
            ctrl, inode = bind_control(control_path)
        except BaseException:
            ring.close()
            sock.close()
            raise
        ctrl.setblocking(False)
    watched = [sock] if ctrl is None else [sock, ctrl]
    pacer = Pacer(busy_poll_ns)
    clock = time.monotonic_ns
    # Everything built so far (the slaves' registers, SII, object dictionaries: some 35,000 objects)
    # out of the garbage collector's sight: a full collection over them took 15 ms here, longer
    # than a master's bus timeout; what the loop makes and drops stays cheap to collect.
    gc.freeze()
    try:
        on_ready()
        last_poll = clock()
        while not stop():
            timeout_s = POLL_MS / 1000
            window = pacer.window()
            now = clock()
            if window is not None and now < window[1]:
                if now >= window[0]:  # the frame is due: poll without sleeping until it came
                    while clock() < window[1]:
                        if _drain(sim, sock, ring, pacer):
                            break
                    continue
                timeout_s = min(timeout_s, (window[0] - now) / 1e9)
            ready, _, _ = select.select(watched, [], [], timeout_s)  # µs resolution (an hrtimer)
            if sock in ready:
                _drain(sim, sock, ring, pacer)
            if ctrl is not None and ctrl in ready:
                _control(sim, ctrl)
            now = clock()
            if now - last_poll >= POLL_MS * 1_000_000:
                sim.segment.poll(now)
                last_poll = now
    finally:
        ring.close()
        sock.close()
        if ctrl is not None:
            ctrl.close()
            _remove_control(control_path, inode)


def _drain(sim: Simulator, sock: socket.socket, ring: RxRing, pacer: Pacer) -> bool:
    """Answer every frame waiting; return True if one was process data."""
    pd = False
    while True:
        taken = ring.take()
        if taken is None:
            return pd
        frame, stamp_ns, kind = taken
        if kind == socket.PACKET_OUTGOING:
            continue  # our own reply, seen by a tap
        read_ns = time.monotonic_ns()
        # The kernel stamps CLOCK_REALTIME: how long ago that was, on the monotonic clock.
        arrived_ns = read_ns - max(0, time.clock_gettime_ns(time.CLOCK_REALTIME) - stamp_ns)
        size, delay_us = sim.handle(frame)
        if size:
            if delay_us:
                time.sleep(delay_us / 1e6)
            sock.send(memoryview(frame)[:size])
            sim.counters.replies += 1
        if sim.last_was_pd:
            if size and not delay_us:
                sim.counters.answer.add(time.monotonic_ns() - arrived_ns)
                sim.counters.wait.add(read_ns - arrived_ns)
            pacer.frame(arrived_ns)
            pd = True
        sim.after_reply()


def _control(sim: Simulator, ctrl: socket.socket) -> None:
    while True:
        try:
            data, addr = ctrl.recvfrom(MAX_DATAGRAM)
        except BlockingIOError:
            return
        answer = sim.control(data)
        if addr:
            try:
                ctrl.sendto(json.dumps(answer.to_dict()).encode(), addr)
            except OSError:
                pass


#: A datagram is read whole (a longer one is cut and then refused as too long, not misread).
MAX_DATAGRAM = 65536


def _corrupt(frame: bytearray, dg, how: str) -> int:
    """Change the reply as a broken relay or slave would (faults.CORRUPTIONS); return its new length."""
    if how == "command":
        frame[dg.header_offset] = 0x0A if frame[dg.header_offset] != 0x0A else 0x0B  # LRW → LRD (or LWR)
    elif how == "length":
        lenw = frame[dg.header_offset + 6] | frame[dg.header_offset + 7] << 8
        lenw = (lenw & ~0x07FF) | ((lenw & 0x07FF) - 2 & 0x07FF)
        frame[dg.header_offset + 6 : dg.header_offset + 8] = lenw.to_bytes(2, "little")
    else:  # "short": cut inside the process data
        return min(len(frame), max(ETH_HEADER_BYTES + 16, dg.data_offset + dg.length // 2))
    return len(frame)
