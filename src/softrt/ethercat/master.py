"""The EtherCAT master as a softrt :class:`~softrt.board.base.Device` (pysoem, real frames).

The seed's three steps map onto a cyclic synchronous position (CSP) exchange::

    permit()      the cycle tick: True once the host clock reaches the next edge
    write(value)  targets → outputs (0x607A = origin + value), send the cycle's own frame (a
                  NOP carrying its number, the LRW, an FRMW for the DC reference time) and take
                  only its own reply, by its deadline (:mod:`.cyclic`); statusword 0x6041 and
                  position actual 0x6064 come back in the same frame. Returns the missed
                  updates: late windows, plus one if no valid reply came
    step(seq)     the application computes the next target (not the device's business)

Bus health (checked in ``write``, at no cost to a good cycle): frames *sent* and not validly
answered, ``bus_timeout_ns`` worth of cycles of them in a row (a count of frames, not host time:
windows the host itself missed sent no frame and are the host's late cycles, ``host_gaps``), a
slave out of OP or with an AL status code, or a drive in FAULT makes the device *failed*:
``failure`` says why (a link that went down is named as such), ``flags`` carries
FLAG_DEVICE_FAILED and the loop stops.
AL status is read (one BRD, ``ecx_readstate``) when a frame comes back with a wrong working
counter (a slave that leaves OP disables its output SyncManager, so the counter drops; that
cycle is lost anyway), and every ``al_check_ns`` in a cycle's slack (only when more than two
round trips remain before the next edge).

Lifecycle (explicit, one state at a time)::

    CLOSED ─open()▶ READY (bus in OP, drives enabled, a keep-alive thread cycles)
           ─start(t0)▶ RUNNING (the caller's loop cycles) ─stop()▶ CLOSED (drives disabled, bus INIT)

With distributed clocks, every write also hands the frame's DC time to :mod:`.dcmonitor` (the
host's phase against SYNC0, each slave's 0x092C every 100th cycle); with ``dc_lock`` the answer
moves the next edge, so the phase lock goes through ``edge_ns`` like any board's cycle.

Positions are relative: ``origin`` is each drive's position actual when it was enabled (the
target is set to it before enabling, CiA 402-2 §13: a drive jumps or faults otherwise).
"""

from __future__ import annotations

import atexit
import functools
import threading
import time

from ..errors import ConfigError, InvalidState
from ..ipc.layout import FLAG_DEVICE_ERROR, FLAG_DEVICE_FAILED
from ..platform import get_platform
from ..schema.device import Emergency
from . import bringup, cyclic, dcmonitor
from .cia402 import CW_DISABLE_VOLTAGE, SW_FAULT, SW_FAULT_MASK, SW_MASK, SW_OE, Axis, Cia402Drives
from .drives import DriveConfig
from .errors import EcatInputError, MappingRefused
from .health import BusHealth, MasterState
from .steps import Steps, read_register
from .transport import check_interface, choose, open_cyclic


class EtherCATMaster(Cia402Drives, BusHealth):
    """CiA 402 CSP drives on one EtherCAT segment, driven through pysoem (a softrt Device)."""

    def __init__(
        self,
        iface: str,
        period_ns: int,
        axes: int = 1,
        *,
        dc: bool = True,
        receive_timeout_us: int | None = None,
        state_timeout_s: float = 3.0,
        enable_timeout_s: float = 1.0,
        watchdog_ms: float | None = None,
        bus_timeout_ns: int = 10_000_000,
        al_check_ns: int = 100_000_000,
        log_cycles: int = 1 << 20,
        dc_lock: bool = False,
        dc_shift_ns: int = 0,
        dc_sample_every: int = 100,
        drives: DriveConfig | None = None,
        transport: str | None = None,
    ) -> None:
        if period_ns <= 0:
            raise ConfigError(f"EtherCAT cycle must be positive, got {period_ns} ns")
        if axes < 1:
            raise ConfigError(f"EtherCAT needs at least one axis, got {axes}")
        if bus_timeout_ns <= 0:
            raise ConfigError(f"EtherCAT bus timeout must be positive, got {bus_timeout_ns} ns")
        self.iface, self.period_ns, self.axes = iface, int(period_ns), axes
        #: How softrt's own frames reach the wire: "af_packet" or "pcap" (Npcap on Windows; .transport).
        self.transport = choose(transport)
        #: The loop's clock, which start(t0_ns) and edge_ns are on: CLOCK_MONOTONIC on Linux, QueryPerformanceCounter
        #: on Windows (where time.monotonic_ns is GetTickCount64 before Python 3.13: 15.6 ms steps).
        self._clock_ns = get_platform().clock_ns
        #: Receive deadline per cycle, from the send: 80 % of the period by default (a later
        #: frame is a lost one); honoured to µs in the cycle (:mod:`.receive`).
        self.receive_timeout_us = receive_timeout_us or max(50, self.period_ns * 8 // 10_000)
        #: Frames sent in a row without a valid answer after which the bus counts as lost (at
        #: least 1): as many as cycles fit in the bus timeout.
        self.bus_timeout_frames = max(1, -(-bus_timeout_ns // self.period_ns))
        self._timeout_ns = self.receive_timeout_us * 1000
        self.al_check_cycles = max(1, al_check_ns // self.period_ns)
        #: Why the device can no longer run (bus lost, slave out of OP, drive fault); None while healthy.
        self.failure: str | None = None
        self.state_timeout_s, self.enable_timeout_s = state_timeout_s, enable_timeout_s
        #: Process-data (SM) watchdog to program into every slave (None: keep the slave's default).
        self.watchdog_ms = watchdog_ms
        self.state = MasterState.CLOSED
        self.edge_ns = self.cycle = self.flags = self.t0_ns = self.start_ns = 0
        self.last_rtt_ns = self.last_wkc = 0
        self.expected_wkc = 0
        self.dc_active = False
        # Distributed clocks during the run (ethercat.dcmonitor): figures, and the phase lock that
        # moves the cycle's origin t0_ns a bounded step per cycle (--dc-lock, --dc-shift).
        self.dc_options = dcmonitor.DcOptions(dc, dc_lock, int(dc_shift_ns), dc_sample_every)
        self._dc: dcmonitor.DcMonitor | None = None
        self.dc_absent: str | None = None
        #: Why the keep-alive thread stopped cycling (None while it runs or has not failed).
        self.keepalive_error: str | None = None
        #: Which PDOs to assign in PRE-OP (None: the CiA 402 CSP defaults; see .drives).
        self.drive_config = drives
        #: What bring-up recovered from (e.g. SOEM's mapping errors) and the drives' emergencies.
        self.warnings: list[str] = []
        self.emergencies: list[Emergency] = []
        self.slaves: list[bringup.SlaveInfo] = []
        self._m = None
        self._sock = None  # the cyclic frame's link (.transport: a duplicate of SOEM's socket, or pcap)
        self._frame: cyclic.CyclicFrame | None = None
        self._axes: list[Axis] = []
        self._keeper: threading.Thread | None = None
        self._keeper_stop = threading.Event()
        self._init_counters(log_cycles)

    # --- lifecycle ------------------------------------------------------------------------------
    def open(self) -> EtherCATMaster:
        """Bring the bus to OP and enable the drives; on failure leave it in INIT and raise EcatError."""
        if self.state is not MasterState.CLOSED:
            raise InvalidState(MasterState.CLOSED.value, self.state.value, "EtherCAT master")
        check_interface(self.iface, self.transport)
        try:
            self._open_once()
        except MappingRefused as err:  # SOEM's SyncManagers refused by a slave (see MappingRefused): once more
            self._open_once()
            self.warnings.append(f"bring-up was tried twice: {err.msg.removeprefix(f'EtherCAT on {self.iface}: ')}")
        self.state = MasterState.READY
        self.keepalive_error = None
        atexit.register(self.stop)
        self._keeper_stop.clear()
        self._keeper = threading.Thread(target=self._keep_alive, name="ethercat-keepalive", daemon=True)
        self._keeper.start()
        return self

    def _open_once(self) -> None:
        """One bring-up from a new SOEM context; on failure the bus is left in INIT, SOEM closed."""
        self._axes = []  # none from an earlier open(): only these can need disabling on failure
        self._final_drives = None
        self._dc = None
        self._m = bringup.open_master(self.iface)
        try:
            self._sock = open_cyclic(self.iface, self.transport)  # the cyclic frame's link (.transport)
            self._bring_up()
        except BaseException:
            if self._axes:  # a drive may already be enabled: the CiA 402 disable sequence first
                try:
                    self._disable()
                except BaseException:  # noqa: BLE001 - the original error is the one to raise
                    pass
            if self._dc is not None:
                self._dc.close()
            self._close_frame()
            bringup.shutdown(self._m)
            self._m = None
            raise

    def _bring_up(self) -> None:
        m, iface = self._m, self.iface
        self.warnings, self.emergencies = [], []
        steps = Steps(m, iface, self.bus_timeout_frames * self.period_ns)
        read = functools.partial(read_register, steps)
        self.slaves = bringup.discover(
            m, iface, self.dc_options.wanted, self.drive_config, self._on_emergency, steps, self.state_timeout_s
        )
        self.warnings += bringup.description_warnings(self.drive_config, self.slaves)
        # Every axis of every drive, in bus order (--axes counts axes, not slaves).
        found = [(s, n) for s in self.slaves for n in range(len(s.drives))]
        if len(found) < self.axes:
            raise self._too_few_axes(len(found))
        used = found[: self.axes]
        n = len(self.slaves)
        with steps.step("CSP configuration", "CSP mode and the cycle by SDO, the watchdog", bringup.PREOP_CONFIG_S * n):
            bringup.configure_csp(m, iface, used, self.period_ns)
            if self.watchdog_ms is not None:
                bringup.set_watchdog(m, iface, self.watchdog_ms, steps)
        self.warnings += bringup.map_and_safeop(m, iface, self.state_timeout_s, self.slaves, steps)
        self.expected_wkc = m.expected_wkc
        with steps.step("process image", "each slave's FMMUs as the mapping set them", bringup.MAPPING_S * n):
            layout = cyclic.read_layout(m, iface, read)
        with steps.step("DC", "distributed clocks: delays, offsets, SYNC0", bringup.MAPPING_S * n):
            self.dc_active = bringup.setup_dc(m, self.slaves, self.period_ns) if self.dc_options.wanted else False
            drives = sorted({s.position for s, _n in used})
            self._dc, self.dc_absent = dcmonitor.attach(
                m, iface, self.slaves, drives, self.period_ns, self.dc_options, self.dc_active, read, self.transport
            )
        frame = self._frame = cyclic.CyclicFrame(
            self._sock, layout, None if self._dc is None else self._dc.reference_address, clock=self._clock_ns
        )
        self._axes = [
            Axis(
                m.slaves[s.position],
                s.name,
                s.drives[n],
                frame.data_at + layout.outputs[s.position],
                frame.data_at + layout.inputs[s.position],
                s,
                n,
            )
            for s, n in used
        ]
        # Outputs before OP: no command, target = where the drive is (inputs are valid in SAFEOP).
        for _ in range(max(1, int(0.1e9 // self.period_ns))):
            if self._exchange() > 0:
                self._read_inputs()
                break
            time.sleep(self.period_ns / 1e9)
        for ax in self._axes:
            ax.origin = ax.position
            self._put_outputs(ax, CW_DISABLE_VOLTAGE, ax.position)
        bringup.request_op(m, iface, self._exchange, self.period_ns / 1e9, self.state_timeout_s, steps)
        with steps.step("drive enable", "each drive through the CiA 402 enable sequence", 5 * self.enable_timeout_s):
            self._enable()

    def _too_few_axes(self, found: int) -> EcatInputError:
        """The error when the bus has fewer CSP drive axes than asked: which slaves lack which objects."""
        lacking = "; ".join(
            f"slave {s.position} '{s.name}' lacks "
            + ", ".join(f"0x{i:04X}" for i in s.missing)
            + f" in its PDOs ({s.pdo_source})"
            for s in self.slaves
            if s.drive is None
        )
        return EcatInputError(
            "unsupported_drive",
            self.iface,
            f"{self.axes} axis(es) asked, {found} CSP drive axis(es) found" + (f" ({lacking})" if lacking else ""),
            seen={"slaves": [s.name for s in self.slaves]},
            hint="a CSP drive maps 0x6040/0x607A (outputs) and 0x6041/0x6064 (inputs)",
        )

    def start(self, t0_ns: int) -> None:
        """Hand the cycle to the caller: edge k is due at ``t0_ns + k * period_ns``."""
        if self.state is not MasterState.READY:
            raise InvalidState(MasterState.READY.value, self.state.value, "EtherCAT master")
        self._stop_keeper()
        # t0_ns moves with the phase lock; the run's start stays where it was (confirmed_at_s).
        self.t0_ns = self.edge_ns = self.start_ns = t0_ns
        self.cycle = 0
        self.confirmed_cycle, self.confirmed_ns, self._answered_since_valid = -1, 0, False
        self._unanswered = 0
        # AL status may be read from the first cycle: a slave that leaves OP early in the run is
        # named as the cause, not reported as a lost bus once the bus timeout runs out.
        self._next_al_read = 0
        self._final_drives = None
        # A keep-alive that failed before the run: the first cycle reports it and the loop stops.
        self.failure = None if self.keepalive_error is None else f"bus lost before the run: {self.keepalive_error}"
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
            if self.state is MasterState.RUNNING:  # what the run confirmed, before the disable
                self._final_drives = self.drive_status()
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
            if self._dc is not None:
                self._dc.close()
            self._close_frame()
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
        return self._clock_ns() >= self.edge_ns

    def write(self, value) -> int:
        """Write the targets, exchange the cycle's frame, read the inputs; return the missed updates."""
        now = self._clock_ns()
        window = (now - self.t0_ns) // self.period_ns
        missed = window - self.cycle
        if missed:  # the host came late by whole windows: no frame went out in them
            self.host_gaps += 1
            self.host_gap_cycles += missed
        if self.axes == 1:
            self._set_target(self._axes[0], value)
        else:
            for ax, v in zip(self._axes, value):
                self._set_target(ax, v)
        wkc = self._exchange()
        rtt = self._frame.rtt_ns  # 0 unless this frame's own reply came by the deadline
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
                self._answered_since_valid = True
                if window >= self._next_al_read:  # the bus answers, a slave did not: is it out of OP?
                    self._check_al(window, max(1, self.bus_timeout_frames // 4))
            if not self._unanswered:
                self._unanswered_since, self._late_before = window, self._frame.late.n
            self._unanswered += 1
            if self._unanswered >= self.bus_timeout_frames:
                self._fail(self._lost_reason(wkc))
        else:
            self.confirmed_cycle, self.confirmed_ns = window, now
            self._answered_since_valid = False
            self._unanswered = 0
            for ax in self._axes:
                if ax.statusword & SW_MASK != SW_OE:
                    flags = FLAG_DEVICE_ERROR
                    if ax.statusword & SW_FAULT_MASK == SW_FAULT:
                        self._fail(
                            f"{ax.where()} faulted: statusword 0x{ax.statusword:04X}, error code 0x{ax.error_code:04X}"
                        )
            if flags:
                self.not_enabled += 1
            elif (
                window >= self._next_al_read and self.t0_ns + (window + 1) * self.period_ns - self._clock_ns() > 2 * rtt
            ):
                self._check_al(window, self.al_check_cycles)  # in the slack: two round trips are left
        if self.failure is not None:
            flags |= FLAG_DEVICE_ERROR | FLAG_DEVICE_FAILED
        self.flags = flags
        self.missed_total += missed
        if self._dc is not None:  # the phase lock moves the cycle's origin (0 without --dc-lock)
            self.t0_ns += self._dc.cycle(now, self._frame.dc_time if wkc == self.expected_wkc else None)
        self.cycle = window + 1
        self.edge_ns = self.t0_ns + self.cycle * self.period_ns
        return missed

    def _exchange(self) -> int:
        """Exchange the cycle's frame (outputs as they stand); read the inputs of a valid reply."""
        wkc = self._frame.exchange(self._timeout_ns)
        if wkc == self.expected_wkc:
            self._read_inputs()
        return wkc

    def _close_frame(self) -> None:
        if self._sock is not None:
            self._sock.close()  # ours only (a duplicate or a pcap handle): SOEM's closes with the master
            self._sock = None

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


def parse_spec(spec: str) -> str:
    """Return the interface of ``"ethercat:IFACE"``; raise ConfigError otherwise."""
    kind, _, iface = spec.partition(":")
    if kind != "ethercat" or not iface:
        raise ConfigError(f"device {spec!r} is not of the form ethercat:IFACE", hint="e.g. --device ethercat:eth1")
    return iface


def open_device(spec: str, period_ns: int, axes: int = 1, **options) -> EtherCATMaster:
    """Build and open the master for ``"ethercat:IFACE"``: bus in OP, drives enabled, ready to start."""
    return EtherCATMaster(parse_spec(spec), period_ns, axes, **options).open()
