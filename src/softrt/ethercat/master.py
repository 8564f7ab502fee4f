"""The EtherCAT master as a softrt :class:`~softrt.board.base.Device` (pysoem, real frames).

The seed's three steps map onto a cyclic synchronous position (CSP) exchange::

    permit()      the cycle tick: True once the host clock reaches the next edge
    write(value)  targets → outputs (0x607A = origin + value), send the frame (LRW, plus FRMW
                  for the DC reference time), receive it; statusword 0x6041 and position actual
                  0x6064 come back in the same frame. Returns the missed updates: late windows,
                  plus one if the frame was lost or its working counter was wrong
    step(seq)     the application computes the next target (not the device's business)

Lifecycle (explicit, one state at a time)::

    CLOSED ─open()▶ READY (bus in OP, drives enabled, a keep-alive thread cycles)
           ─start(t0)▶ RUNNING (the caller's loop cycles) ─stop()▶ CLOSED (drives disabled, bus INIT)

Positions are relative: ``origin`` is each drive's position actual when it was enabled (the
target is set to it before enabling, CiA 402-2 §13: a drive jumps or faults otherwise).
"""

from __future__ import annotations

import atexit
import enum
import struct
import threading
import time

import numpy as np

from ..errors import ConfigError, InvalidState
from ..ipc.layout import FLAG_DEVICE_ERROR
from . import bringup, preop
from .drives import DriveConfig
from .errors import EcatError
from .mapping import DriveMap

CW_SHUTDOWN, CW_SWITCH_ON, CW_ENABLE, CW_DISABLE_VOLTAGE, CW_FAULT_RESET = 0x0006, 0x0007, 0x000F, 0x0000, 0x0080
SW_MASK, SW_SOD, SW_RTSO, SW_SO, SW_OE, SW_FAULT_MASK, SW_FAULT = 0x6F, 0x40, 0x21, 0x23, 0x27, 0x4F, 0x08
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")
_I8 = struct.Struct("<b")
INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
MAX_EMERGENCIES = 64  #: emergencies kept for the report (a faulting drive may repeat them)


class MasterState(enum.Enum):
    """Where the device is in its lifecycle (see the module docstring)."""

    CLOSED = "closed"
    READY = "ready"
    RUNNING = "running"


class _Axis:
    """One CiA 402 axis: its slave, byte offsets, output buffer (shared by the axes of one
    slave) and last inputs."""

    __slots__ = ("slave", "name", "map", "out", "origin", "statusword", "position", "error_code", "info", "axis")

    def __init__(self, slave, name: str, drive_map: DriveMap, out: bytearray, info: bringup.SlaveInfo,
                 axis: int) -> None:
        self.slave, self.name, self.map = slave, name, drive_map
        self.info, self.axis = info, axis
        self.out = out
        self.origin = 0
        self.statusword = 0
        self.position = 0
        self.error_code = 0


class EtherCATMaster:
    """CiA 402 CSP drives on one EtherCAT segment, driven through pysoem (a softrt Device)."""

    def __init__(self, iface: str, period_ns: int, axes: int = 1, *, dc: bool = True,
                 receive_timeout_us: int | None = None, state_timeout_s: float = 3.0,
                 enable_timeout_s: float = 1.0, watchdog_ms: float | None = None,
                 log_cycles: int = 1 << 20, drives: DriveConfig | None = None) -> None:
        if period_ns <= 0:
            raise ConfigError(f"EtherCAT cycle must be positive, got {period_ns} ns")
        if axes < 1:
            raise ConfigError(f"EtherCAT needs at least one axis, got {axes}")
        self.iface, self.period_ns, self.axes, self.dc = iface, int(period_ns), axes, dc
        #: Receive timeout per cycle: 80 % of the period by default (a later frame is a lost one).
        self.receive_timeout_us = receive_timeout_us or max(50, self.period_ns * 8 // 10_000)
        self.state_timeout_s, self.enable_timeout_s = state_timeout_s, enable_timeout_s
        #: Process-data (SM) watchdog to program into every slave (None: keep the slave's default).
        self.watchdog_ms = watchdog_ms
        self.state = MasterState.CLOSED
        self.edge_ns = self.cycle = self.flags = self.t0_ns = 0
        self.last_rtt_ns = self.last_wkc = 0
        self.expected_wkc = 0
        self.dc_active = False
        #: Why the keep-alive thread stopped cycling (None while it runs or has not failed).
        self.keepalive_error: str | None = None
        #: Which PDOs to assign in PRE-OP (None: the CiA 402 CSP defaults; see .drives).
        self.drive_config = drives
        #: What bring-up recovered from (e.g. SOEM's mapping errors) and the drives' emergencies.
        self.warnings: list[str] = []
        self.emergencies: list[dict] = []
        self.slaves: list[bringup.SlaveInfo] = []
        self._m = None
        self._axes: list[_Axis] = []
        self._keeper: threading.Thread | None = None
        self._keeper_stop = threading.Event()
        # Per-cycle metrics, preallocated (a ring of log_cycles entries): round trip and WKC.
        self.rtt_ns = np.zeros(log_cycles, dtype=np.int64)
        self.wkc = np.zeros(log_cycles, dtype=np.int16)
        self.writes = self.missed_total = self.lost_frames = self.wkc_errors = self.not_enabled = 0

    # --- lifecycle ------------------------------------------------------------------------------
    def open(self) -> EtherCATMaster:
        """Bring the bus to OP and enable the drives; on failure leave it in INIT and raise EcatError."""
        if self.state is not MasterState.CLOSED:
            raise InvalidState(MasterState.CLOSED.value, self.state.value, "EtherCAT master")
        bringup.check_interface(self.iface)
        self._axes = []  # none from an earlier open(): only these can need disabling on failure
        self._m = bringup.open_master(self.iface)
        try:
            self._bring_up()
        except BaseException:
            if self._axes:  # a drive may already be enabled: the CiA 402 disable sequence first
                try:
                    self._disable()
                except BaseException:  # noqa: BLE001 - the original error is the one to raise
                    pass
            bringup.shutdown(self._m)
            self._m = None
            raise
        self.state = MasterState.READY
        self.keepalive_error = None
        atexit.register(self.stop)
        self._keeper_stop.clear()
        self._keeper = threading.Thread(target=self._keep_alive, name="ethercat-keepalive", daemon=True)
        self._keeper.start()
        return self

    def _bring_up(self) -> None:
        m, iface = self._m, self.iface
        self.warnings, self.emergencies = [], []
        self.slaves = bringup.discover(m, iface, self.dc, self.drive_config, self._on_emergency)
        self.warnings += bringup.description_warnings(self.drive_config, self.slaves)
        # Every axis of every drive, in bus order (--axes counts axes, not slaves).
        found = [(s, n) for s in self.slaves for n in range(len(s.drives))]
        if len(found) < self.axes:
            lacking = "; ".join(f"slave {s.position} '{s.name}' lacks " + ", ".join(f"0x{i:04X}" for i in s.missing)
                                for s in self.slaves if s.drive is None)
            raise EcatError("unsupported_drive", iface,
                            f"{self.axes} axis(es) asked, {len(found)} CSP drive axis(es) found"
                            + (f" ({lacking})" if lacking else ""),
                            seen={"slaves": [s.name for s in self.slaves]},
                            hint="a CSP drive maps 0x6040/0x607A (outputs) and 0x6041/0x6064 (inputs)")
        used = found[: self.axes]
        bringup.configure_csp(m, iface, used, self.period_ns)
        if self.watchdog_ms is not None:
            bringup.set_watchdog(m, iface, self.watchdog_ms)
        self.warnings += bringup.map_and_safeop(m, iface, self.state_timeout_s, self.slaves)
        self.expected_wkc = m.expected_wkc
        outputs = {s.position: bytearray(len(m.slaves[s.position].output)) for s, _n in used}
        self._axes = [_Axis(m.slaves[s.position], s.name, s.drives[n], outputs[s.position], s, n) for s, n in used]
        self.dc_active = bringup.setup_dc(m, self.slaves, self.period_ns) if self.dc else False
        # Outputs before OP: no command, target = where the drive is (inputs are valid in SAFEOP).
        for _ in range(max(1, int(0.1e9 // self.period_ns))):
            if self._exchange() > 0:
                self._read_inputs()
                break
            time.sleep(self.period_ns / 1e9)
        for ax in self._axes:
            ax.origin = ax.position
            self._put_outputs(ax, CW_DISABLE_VOLTAGE, ax.position)
        bringup.request_op(m, iface, self._exchange, self.period_ns / 1e9, self.state_timeout_s)
        self._enable()

    def start(self, t0_ns: int) -> None:
        """Hand the cycle to the caller: edge k is due at ``t0_ns + k * period_ns``."""
        if self.state is not MasterState.READY:
            raise InvalidState(MasterState.READY.value, self.state.value, "EtherCAT master")
        self._stop_keeper()
        self.t0_ns = self.edge_ns = t0_ns
        self.cycle = 0
        self.state = MasterState.RUNNING

    def stop(self) -> None:
        """Disable the drives and return the bus to INIT; safe to call twice.

        Never raises an Exception; a KeyboardInterrupt during the disable sequence still brings
        the bus to INIT and closes the master before it propagates.
        """
        if self.state is MasterState.CLOSED or self._m is None:
            return
        try:
            self._stop_keeper()
            try:
                self._disable()
                self._read_errors()
            except Exception:  # noqa: BLE001 - the bus may already be gone; INIT still follows
                pass
        finally:
            if self._keeper is not None:  # interrupted while joining it: it stops within a cycle
                self._keeper_stop.set()
                self._keeper.join(1.0)
                self._keeper = None
            bringup.shutdown(self._m)
            self._m = None
            self.state = MasterState.CLOSED
            atexit.unregister(self.stop)

    def __enter__(self) -> EtherCATMaster:
        return self if self.state is not MasterState.CLOSED else self.open()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- the cycle (hot path: no allocation beyond ints and the output bytes) --------------------
    def permit(self) -> bool:
        """Return True once the current edge has passed (the cycle tick)."""
        return time.monotonic_ns() >= self.edge_ns

    def write(self, value) -> int:
        """Write the targets, exchange one frame, read the inputs; return the missed updates."""
        now = time.monotonic_ns()
        window = (now - self.t0_ns) // self.period_ns
        missed = window - self.cycle
        if self.axes == 1:
            self._set_target(self._axes[0], value)
        else:
            for ax, v in zip(self._axes, value):
                self._set_target(ax, v)
        wkc, rtt = self._exchange_timed()
        i = self.writes % len(self.rtt_ns)
        self.rtt_ns[i] = rtt
        self.wkc[i] = wkc
        self.last_rtt_ns = rtt
        self.last_wkc = wkc
        self.writes += 1
        flags = 0
        if wkc != self.expected_wkc:
            flags = FLAG_DEVICE_ERROR
            missed += 1
            if wkc < 0:
                self.lost_frames += 1
            else:
                self.wkc_errors += 1
        else:
            for ax in self._axes:
                if ax.statusword & SW_MASK != SW_OE:
                    flags = FLAG_DEVICE_ERROR
            if flags:
                self.not_enabled += 1
        self.flags = flags
        self.missed_total += missed
        self.cycle = window + 1
        self.edge_ns = self.t0_ns + self.cycle * self.period_ns
        return missed

    def _set_target(self, ax: _Axis, value) -> None:
        target = ax.origin + int(round(value))
        _I32.pack_into(ax.out, ax.map.target_position, min(max(target, INT32_MIN), INT32_MAX))
        ax.slave.output = bytes(ax.out)

    def _exchange_timed(self) -> tuple[int, int]:
        m = self._m
        t = time.monotonic_ns()
        m.send_processdata(release_gil=True)
        wkc = m.receive_processdata(self.receive_timeout_us, release_gil=True)
        rtt = time.monotonic_ns() - t
        if wkc == self.expected_wkc:
            self._read_inputs()
        return wkc, rtt

    def _exchange(self) -> int:
        for ax in self._axes:
            ax.slave.output = bytes(ax.out)
        return self._exchange_timed()[0]

    def _read_inputs(self) -> None:
        for ax in self._axes:
            data = ax.slave.input
            mp = ax.map
            ax.statusword = _U16.unpack_from(data, mp.statusword)[0]
            ax.position = _I32.unpack_from(data, mp.position_actual)[0]
            if mp.error_code is not None:
                ax.error_code = _U16.unpack_from(data, mp.error_code)[0]

    def _put_outputs(self, ax: _Axis, controlword: int, target: int) -> None:
        _U16.pack_into(ax.out, ax.map.controlword, controlword)
        _I32.pack_into(ax.out, ax.map.target_position, target)
        if ax.map.modes_of_operation is not None:
            _I8.pack_into(ax.out, ax.map.modes_of_operation, 8)  # CSP (CiA 402-2 §6.3.2)

    def _keep_alive(self) -> None:
        # Between open() and start() the drives still need a frame every cycle (their SM
        # watchdog would fault them); outputs hold the last targets.
        period_s = self.period_ns / 1e9
        while not self._keeper_stop.is_set():
            try:
                self._exchange()
            except Exception as err:  # noqa: BLE001 - recorded, not lost with the thread
                self.keepalive_error = f"keep-alive exchange failed: {type(err).__name__}: {err}"
                self.flags = FLAG_DEVICE_ERROR
                return
            self._keeper_stop.wait(period_s)

    def _stop_keeper(self) -> None:
        if self._keeper is not None:
            self._keeper_stop.set()
            self._keeper.join()
            self._keeper = None

    # --- CiA 402 enable / disable (CiA 402-2 §6.2) -------------------------------------------------
    def _enable(self) -> None:
        for ax in self._axes:
            if ax.statusword & SW_FAULT_MASK == SW_FAULT:  # a drive in FAULT: reset it first
                self._command(CW_FAULT_RESET, SW_FAULT_MASK, SW_SOD, "fault reset")
                break
        self._command(CW_DISABLE_VOLTAGE, SW_FAULT_MASK, SW_SOD, "switch on disabled")
        for ax in self._axes:  # target = actual position before enabling
            ax.origin = ax.position
        self._command(CW_SHUTDOWN, SW_MASK, SW_RTSO, "shutdown")
        self._command(CW_SWITCH_ON, SW_MASK, SW_SO, "switch on")
        self._command(CW_ENABLE, SW_MASK, SW_OE, "enable operation")

    def _command(self, controlword: int, mask: int, want: int, what: str) -> None:
        deadline = time.monotonic() + self.enable_timeout_s
        period_s = self.period_ns / 1e9
        for ax in self._axes:
            self._put_outputs(ax, controlword, ax.origin)
        while True:
            wkc = self._exchange()
            if wkc == self.expected_wkc and all(ax.statusword & mask == want for ax in self._axes):
                return
            if time.monotonic() > deadline:
                seen = {ax.name: {"statusword": f"0x{ax.statusword:04X}", "error_code": f"0x{ax.error_code:04X}"}
                        for ax in self._axes}
                text = "; ".join(f"'{k}' statusword {v['statusword']}, error code {v['error_code']}"
                                 for k, v in seen.items())
                raise EcatError("drive_fault", self.iface,
                                f"CiA 402 '{what}' (controlword 0x{controlword:04X}) not reached: {text}"
                                + (f" (last working counter {wkc}, expected {self.expected_wkc})"
                                   if wkc != self.expected_wkc else ""), seen=seen)
            time.sleep(period_s)

    def _disable(self) -> None:
        # Disable operation, shut down, disable voltage: each held for a few cycles; the drive
        # stops at the current target (CiA 402-2 transitions 5, 6, 7).
        for controlword in (CW_SWITCH_ON, CW_SHUTDOWN, CW_DISABLE_VOLTAGE):
            for ax in self._axes:
                _U16.pack_into(ax.out, ax.map.controlword, controlword)
            for _ in range(8):
                self._exchange()
                time.sleep(self.period_ns / 1e9)

    def _on_emergency(self, emcy) -> None:
        """A pysoem emergency callback (it runs inside whichever SDO transfer received it)."""
        if len(self.emergencies) < MAX_EMERGENCIES:
            self.emergencies.append({"slave": emcy.slave_pos - 1, "error_code": emcy.error_code,
                                     "error_register": emcy.error_reg,
                                     "data": bytes([emcy.b1]).hex() + emcy.w1.to_bytes(2, "little").hex()
                                     + emcy.w2.to_bytes(2, "little").hex()})

    def _read_errors(self) -> None:
        # After the run, a drive that faulted says why by SDO: error register and error code
        # (the error code is also in the PDO when mapped). Only on a bus that still answers.
        if self.last_wkc != self.expected_wkc:
            return
        faulted = {ax.info.position: ax.info for ax in self._axes if ax.statusword & SW_FAULT_MASK == SW_FAULT}
        for info in faulted.values():
            if info.has_coe and info.identity is not None:
                register, codes = preop.read_errors(self._m.slaves[info.position], len(info.drives))
                info.identity.error_register, info.identity.error_codes = register, codes

    # --- reporting --------------------------------------------------------------------------------
    def drive_status(self) -> list[dict]:
        """Return each axis's slave and axis number, last statusword, position actual (absolute
        counts) and error code."""
        return [{"name": ax.name, "slave": ax.info.position, "axis": ax.axis, "statusword": ax.statusword,
                 "position_counts": ax.position, "origin_counts": ax.origin, "error_code": ax.error_code}
                for ax in self._axes]

    def counters(self) -> dict:
        """Return the device's counters (writes, missed updates, lost frames, WKC errors, RTT)."""
        n = min(self.writes, len(self.rtt_ns))
        rtt = self.rtt_ns[:n]
        return {"writes": self.writes, "missed_updates": self.missed_total, "lost_frames": self.lost_frames,
                "wkc_errors": self.wkc_errors, "drive_not_enabled_cycles": self.not_enabled,
                "expected_wkc": self.expected_wkc, "dc": self.dc_active,
                "rtt_us": ({"min": float(rtt.min()) / 1e3, "median": float(np.median(rtt)) / 1e3,
                            "max": float(rtt.max()) / 1e3} if n else None),
                "drives": self.drive_status(), "slaves": [s.report() for s in self.slaves],
                "warnings": list(self.warnings), "emergencies": list(self.emergencies)}


def parse_spec(spec: str) -> str:
    """Return the interface of ``"ethercat:IFACE"``; raise ConfigError otherwise."""
    kind, _, iface = spec.partition(":")
    if kind != "ethercat" or not iface:
        raise ConfigError(f"device {spec!r} is not of the form ethercat:IFACE", hint="e.g. --device ethercat:eth1")
    return iface


def open_device(spec: str, period_ns: int, axes: int = 1, **options) -> EtherCATMaster:
    """Build and open the master for ``"ethercat:IFACE"``: bus in OP, drives enabled, ready to start."""
    return EtherCATMaster(parse_spec(spec), period_ns, axes, **options).open()
