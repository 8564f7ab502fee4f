"""The virtual EtherCAT segment: N simulated slaves answering real frames on an interface.

Always run it in its own process (``softrt ecat-sim``): pysoem keeps the GIL in ``config_map``,
``state_check`` and others, so a slave thread inside the master's interpreter cannot answer.

Transport: an ``AF_PACKET``/``SOCK_RAW`` socket bound to EtherType 0x88A4 on the interface (not
``ETH_P_ALL``: then our own replies are not looped back to us). Each frame is processed in place
and sent back with the same length; the source MAC gets the locally-administered bit, as ESCs do
(ETG.1000.4 §5.2). A control socket (UNIX datagram, JSON) injects faults and reports state.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import socket
import time
from dataclasses import dataclass

from ..ethercat.al import AlState, state_name
from .bus import Segment
from ..ethercat.description import DeviceDescription
from .esc import Esc
from .faults import FaultPlan
from ..ethercat.rawsock import open_raw_socket
from .slave import DriveApp, make_app
from ..ethercat.wire import LOGICAL, FrameError, parse_frame

POLL_MS = 1  #: wake-up period for the watchdog check when no frames arrive


@dataclass
class SimCounters:
    """What the simulator saw and did."""

    frames: int = 0
    replies: int = 0
    malformed: int = 0


class Simulator:
    """N slaves on one segment plus the fault plan (no I/O: :func:`serve` adds the socket)."""

    def __init__(self, descriptions: list[DeviceDescription], clock=time.monotonic_ns,
                 drift_ppm: list[float] | tuple[float, ...] = (), ca_abort: bool = False) -> None:
        n = len(descriptions)
        self._clock = clock
        # ca_abort: CoE slaves answer complete access with an abort (coe.CoeServer).
        self.apps = [make_app(d, start_counts=1000 * (i + 1), ca_abort=ca_abort, serial=i + 1)
                     for i, d in enumerate(descriptions)]
        # DC quartz error per slave (the i-th applies to slave i; the rest run true).
        drifts = list(drift_ppm) + [0.0] * (n - len(drift_ppm))
        self.escs = [Esc(d, i, app, clock=clock, last=i == n - 1, drift_ppm=drifts[i])
                     for i, (d, app) in enumerate(zip(descriptions, self.apps))]
        for esc, app in zip(self.escs, self.apps):
            if isinstance(app, DriveApp):
                app.esc = esc
        self.segment = Segment(self.escs, clock=clock)
        self.faults = FaultPlan()
        self.counters = SimCounters()

    def handle(self, frame: bytearray) -> tuple[bool, int]:
        """Process one received frame in place; return ``(reply?, delay_us)``."""
        self.counters.frames += 1
        try:
            datagrams = parse_frame(frame)
        except FrameError:
            self.counters.malformed += 1
            return False, 0
        decision = None
        if any(dg.cmd in LOGICAL for dg in datagrams):
            decision = self.faults.decide(len(self.escs))
            if decision.drop:
                return False, 0
        skip = decision.skip_slave if decision is not None else None
        self.segment.process(frame, None if skip is None else (lambda pos: pos == skip))
        frame[6] |= 0x02  # locally administered source MAC: the frame passed an ESC
        return True, decision.delay_us if decision is not None else 0

    def control(self, request: dict) -> dict:
        """Apply one control request (see :func:`serve`); return the JSON-able answer."""
        cmd = request.get("cmd")
        if cmd in ("drop", "delay", "bad_wkc"):
            opts = {k: int(request[k]) for k in ("delay_us", "slave") if k in request}
            if "every" in request:
                self.faults.set_every(cmd, int(request["every"]), **opts)
            else:
                self.faults.arm(cmd, int(request.get("frames", 1)), **opts)
        elif cmd == "drive_fault":
            app = self.apps[int(request.get("slave", 0))]
            if not isinstance(app, DriveApp):
                return {"ok": False, "error": "that slave is not a drive"}
            app.drives[int(request.get("axis", 0))].fault(int(request.get("code", 0x5400)))  # 0x5400: power section
            self.escs[int(request.get("slave", 0))].refresh_inputs()
        elif cmd == "al_error":
            # A slave's own error (ETG.1000.6 §6.4.1): it drops to a lower state with the error
            # indication and an AL status code (e.g. SAFEOP, 0x001B sync manager watchdog).
            state = AlState[str(request.get("state", "SAFEOP")).upper()]
            for esc in self._targets(request):
                esc.local_error(state, int(request.get("code", 0x0001)))
        elif cmd == "refuse_state":
            # Make slave(s) refuse a state with an AL status code (e.g. OP with 0x001A sync error).
            state = AlState[str(request["state"]).upper()]
            for esc in self._targets(request):
                esc.refuse[state] = int(request.get("code", 0x0001))
        elif cmd == "dc_drift":  # a quartz warming up: {"cmd": "dc_drift", "slave": i, "ppm": x}
            for esc in self._targets(request):
                esc.dc.clock.set_drift(float(request["ppm"]), self._clock())
        elif cmd != "stats":
            return {"ok": False, "error": f"unknown command {cmd!r}"}
        return {"ok": True, **self.stats()}

    def _targets(self, request: dict) -> list[Esc]:
        return self.escs if "slave" not in request else [self.escs[int(request["slave"])]]

    def stats(self) -> dict:
        """Return counters and the state of every slave."""
        slaves = []
        for esc, app in zip(self.escs, self.apps):
            s = {"position": esc.position, "name": esc.desc.name, "al_status": esc.al.status,
                 "al_state": state_name(esc.al.status), "al_code": int(esc.al.code),
                 "watchdog_expiries": esc.watchdog_expiries}
            if esc.desc.dc:
                clock = esc.dc.clock
                s["dc"] = {"drift_ppm": clock.drift_ppb / 1000, "correction_ppm": clock.correction_ppb / 1000,
                           "diff_ns": round(clock.diff_mean_ns, 1), "compares": clock.compares,
                           "sync0": esc.dc.sync0.to_dict()}
            if isinstance(app, DriveApp):
                d = app.drive
                s.update(drive_state=d.state.name, statusword=d.statusword, position_counts=d.position_counts,
                         target_counts=d.target, error_code=d.error_code, drive_faults=d.faults,
                         following_error_counts=d.following_error, cycles=app.cycles, cycle_ns=app.cycle_ns(),
                         sdo_requests=app.coe.requests if app.coe else 0,
                         # every axis (axis 0 is also the fields above), the PDOs the master left
                         # assigned and mapped, and what the CoE server was asked
                         axes=[{"drive_state": a.state.name, "position_counts": a.position_counts,
                                "target_counts": a.target, "error_code": a.error_code, "drive_faults": a.faults}
                               for a in app.drives],
                         pdo=app.pdo.report(), coe=dataclasses.asdict(app.coe.counters) if app.coe else None)
            slaves.append(s)
        return {"frames": self.counters.frames, "replies": self.counters.replies,
                "pd_frames": self.faults.pd_frames, "injected": dict(self.faults.injected), "slaves": slaves}


def serve(sim: Simulator, iface: str, control_path: str | None = None, stop=lambda: False,
          on_ready=lambda: None) -> None:
    """Answer frames on *iface* until ``stop()`` is true.

    Control requests (one JSON object per datagram on *control_path*), answered with the stats:
    ``{"cmd": "stats"}``; ``{"cmd": "drop"|"delay"|"bad_wkc", "frames": n}`` or ``"every": k``
    (options ``"delay_us"``, ``"slave"``); ``{"cmd": "drive_fault", "slave": i, "code": c}``
    (option ``"axis"``);
    ``{"cmd": "refuse_state", "state": "OP", "code": c}`` (optional ``"slave"``);
    ``{"cmd": "al_error", "state": "SAFEOP", "code": c}`` (optional ``"slave"``): the slave leaves
    its state on its own error, with that AL status code.
    ``{"cmd": "dc_drift", "ppm": x}`` (optional ``"slave"``): a slave's DC quartz error.
    """
    sock = open_raw_socket(iface)
    sock.setblocking(False)
    ctrl = None
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    if control_path:
        if os.path.exists(control_path):
            os.unlink(control_path)
        ctrl = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        ctrl.bind(control_path)
        ctrl.setblocking(False)
        poller.register(ctrl.fileno(), select.POLLIN)
    buf = bytearray(2048)
    view = memoryview(buf)
    try:
        on_ready()
        last_poll = time.monotonic_ns()
        while not stop():
            events = poller.poll(POLL_MS)
            for fd, _ev in events:
                if fd == sock.fileno():
                    _drain(sim, sock, buf, view)
                elif ctrl is not None:
                    _control(sim, ctrl)
            now = time.monotonic_ns()
            if now - last_poll >= POLL_MS * 1_000_000:
                sim.segment.poll(now)
                last_poll = now
    finally:
        sock.close()
        if ctrl is not None:
            ctrl.close()
            try:
                os.unlink(control_path)
            except OSError:
                pass


def _drain(sim: Simulator, sock: socket.socket, buf: bytearray, view: memoryview) -> None:
    while True:
        try:
            n, addr = sock.recvfrom_into(buf)
        except BlockingIOError:
            return
        if addr[2] == socket.PACKET_OUTGOING:
            continue  # our own reply, seen by a tap
        frame = bytearray(view[:n])
        reply, delay_us = sim.handle(frame)
        if not reply:
            continue
        if delay_us:
            time.sleep(delay_us / 1e6)
        sock.send(frame)
        sim.counters.replies += 1


def _control(sim: Simulator, ctrl: socket.socket) -> None:
    while True:
        try:
            data, addr = ctrl.recvfrom(65536)
        except BlockingIOError:
            return
        try:
            answer = sim.control(json.loads(data))
        except (ValueError, KeyError, IndexError, TypeError) as err:
            answer = {"ok": False, "error": str(err)}
        if addr:
            try:
                ctrl.sendto(json.dumps(answer).encode(), addr)
            except OSError:
                pass
