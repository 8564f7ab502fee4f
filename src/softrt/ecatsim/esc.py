"""One EtherCAT slave controller (ESC): registers, SII interface, SyncManagers, FMMUs, DC, watchdog.

The ESC sees the bus only through :meth:`Esc.read`, :meth:`Esc.write` (physical addresses, as
the APxx/FPxx/Bxx commands use them), :meth:`Esc.spans`/:meth:`Esc.store_outputs` (the
FMMUs, for LRD/LWR/LRW) and :meth:`Esc.end_frame` (once per frame: the slave application runs).
Addressing and working counters are the bus's business (:mod:`.bus`). Register map: ETG.1000.4
§6 (and the ET1100 datasheet section II for the bit layouts)::

    0x0000-0x000F  information (read-only)        0x0500-0x050F  SII EEPROM interface
    0x0010/0x0012  station address / alias         0x0600+16n     FMMU n
    0x0100-0x0103  DL control                      0x0800+8n      SyncManager n
    0x0110         DL status (read-only)           0x0900-0x09FF  distributed clocks
    0x0120/0x0130/0x0134  AL control/status/code   0x0400-0x0443  watchdogs
    0x1000-0xFFFF  process RAM (mailboxes and process data, behind SyncManagers)

Simplifications (documented, not hidden): one buffer per process-data SyncManager (each frame is
handled atomically, so the 3-buffer mode is not observable); byte-granular FMMUs only (SOEM maps
slaves of 8 bits or more byte-wise); no SYNC0 output pin (SYNC0 is counted, :mod:`.dc`). The DC
unit (drifting clock, time control loop, SYNC0) is :mod:`.dc`; each frame passes a slave at one
instant (``pass_ns``, set by the bus), so clock comparisons are exact.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Protocol

from ..ethercat.al import AlState, AlStateMachine, AlStatusCode
from ..ethercat.description import DeviceDescription
from ..ethercat.sii import build_image
from .dc import EscDc

REG_STATION_ADDRESS, REG_ALIAS = 0x0010, 0x0012
REG_DL_STATUS, REG_AL_CONTROL, REG_AL_STATUS, REG_AL_CODE = 0x0110, 0x0120, 0x0130, 0x0134
REG_PDI_CONTROL = 0x0140
REG_WD_DIVIDER, REG_WD_TIME_PD, REG_WD_STATUS_PD, REG_WD_COUNTER_PD = 0x0400, 0x0420, 0x0440, 0x0442
REG_EEP_CONFIG, REG_EEP_CONTROL, REG_EEP_ADDRESS, REG_EEP_DATA = 0x0500, 0x0502, 0x0504, 0x0508
REG_FMMU0, REG_SM0 = 0x0600, 0x0800
REG_DC_RECV_TIME0, REG_DC_SYSTEM_TIME, REG_DC_RECV_TIME_EPU = 0x0900, 0x0910, 0x0918
REG_DC_FIRST, REG_DC_END = 0x0900, 0x0A00
REG_DC_SYNC_ACT, REG_DC_CYCLE0 = 0x0981, 0x09A0
PROCESS_RAM = 0x1000

# EEPROM control/status bits (register 0x0502, ET1100 datasheet Table 49).
EEP_WRITE_ENABLE, EEP_READ_8_BYTES, EEP_TWO_ADDRESS_BYTES = 0x0001, 0x0040, 0x0080
EEP_ERR_WRITE_ENABLE, EEP_BUSY = 0x4000, 0x8000
EEP_CMD_READ, EEP_CMD_WRITE, EEP_CMD_RELOAD = 1, 2, 3

#: Registers a master cannot write (ETG.1000.4 §6: "ECAT: r/-"). AL status, DL status, SM status
#: (+5) and PDI control (+7) of every SM, latched receive times, watchdog status.
_READ_ONLY = [
    (0x0000, 0x0010),
    (0x0110, 0x0112),
    (0x0130, 0x0136),
    (0x0140, 0x0142),
    (0x0440, 0x0442),
    (0x0900, 0x0910),
    (0x0918, 0x0920),
    (0x092C, 0x0930),
]
_READ_ONLY += [(REG_SM0 + 8 * n + 5, REG_SM0 + 8 * n + 6) for n in range(16)]
_READ_ONLY += [(REG_SM0 + 8 * n + 7, REG_SM0 + 8 * n + 8) for n in range(16)]

_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")
_FMMU = struct.Struct("<IHBBHBBB3x")
_SM = struct.Struct("<HHBBBB")


class SlaveApp(Protocol):
    """The application behind an ESC's PDI (a drive model, or nothing)."""

    def on_al_change(self, old: AlState, new: AlState, code: int) -> None:
        """React to an AL state change (*code* is non-zero for a local error such as the watchdog)."""

    def exchange(self, outputs: bytes | None, inputs: memoryview) -> None:
        """Run one cycle: consume *outputs* (None outside OP) and fill the *inputs* buffer."""

    def mailbox(self, request: bytes) -> list[bytes]:
        """Answer one mailbox request (ETG.1000.6 §5.6); return the responses to queue."""


class Esc:
    """Register-level model of one ESC (see the module docstring)."""

    def __init__(
        self,
        desc: DeviceDescription,
        position: int,
        app: SlaveApp | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
        last: bool = True,
        drift_ppm: float = 0.0,
        watchdog_ns: int = 100_000_000,
    ) -> None:
        self.desc = desc
        self.position = position
        self.app = app
        self.mem = bytearray(0x10000)
        #: The process-data watchdog after power-up (0x0420; a master may program another).
        self.watchdog_ns = watchdog_ns
        self.sii = bytearray(build_image(desc, serial=position + 1))
        self.al = AlStateMachine(self._check_transition)
        self._clock = clock
        #: Each ESC's local clock starts somewhere else (as after power-up); DC offsets fix that.
        now = clock()
        self.dc = EscDc(self.mem, now + 1_000_003_019 * (position + 1), now, drift_ppm)
        #: The instant the frame being processed passes this slave (None between frames).
        self.pass_ns: int | None = None
        self._writable = bytearray(b"\x01" * PROCESS_RAM)
        for lo, hi in _READ_ONLY:
            self._writable[lo:hi] = bytes(hi - lo)
        self._fmmus: list[tuple[int, int, int, int]] = []
        self._sms: list[tuple[int, int, int, bool]] = []
        self._pd_written = self.pd_read = False
        #: Grows with every change of FMMUs, SyncManagers, AL state or output enable: what a
        #: logical datagram reaches (:meth:`spans`) holds while it stands (the bus caches it).
        self.epoch = 0
        self._wd_kick_ns = 0
        self.watchdog_expiries = 0
        #: EEPROM read commands, and those while in PRE-OP or above (the master's own SII reading
        #: after the scan): where a dying bus may be made to fall silent (``--mute-at``).
        self.eeprom_reads = self.eeprom_reads_preop = 0
        #: The application disabled the output SyncManager (PDI side) after leaving OP on a local
        #: error, as slave stacks do (Beckhoff SSC ecatslv.c V4.01 "ECAT 1"): the master's writes
        #: then miss this slave and the working counter drops. Cleared when OP is entered again.
        self.outputs_disabled = False
        self._mbx_queue: list[bytes] = []
        self._mbx_last = b""
        self._mbx_counter = 0  #: the counter of the last mailbox request taken (0: none yet)
        #: Mailbox writes ignored as repeats of the last one (same counter): see _mailbox_request.
        self.mailbox_repeats = 0
        #: Fault injection: states this slave refuses to enter, with the AL status code it reports.
        self.refuse: dict[AlState, int] = {}
        self._reset_registers(last)

    # --- registers ---------------------------------------------------------------------------
    def _reset_registers(self, last: bool) -> None:
        m = self.mem
        # 0x0000 type, revision, build u16, FMMUs, SMs, RAM KiB, port descriptor, features
        # (bit 2 DC, bit 3 64-bit DC; ETG.1000.4 §6.1).
        features = 0x01C0 | (0x000C if self.desc.dc else 0)
        m[0:10] = struct.pack("<BBHBBBBH", 0x11, 0x02, 0x0001, 8, 8, 8, 0x0F, features)
        # DL status: PDI operational, link on port 0 (and port 1 unless last); loop open with
        # communication on port 0 (and port 1), closed on the others (ET1100 Table 30).
        ports = 0b10 | (0b01 << 2 if last else 0b10 << 2) | (0b01 << 4) | (0b01 << 6)
        _U16.pack_into(m, REG_DL_STATUS, 0x0001 | 0x0010 | (0 if last else 0x0020) | (ports << 8))
        _U16.pack_into(m, REG_PDI_CONTROL, _U16.unpack_from(self.sii, 0)[0])
        _U16.pack_into(m, REG_ALIAS, _U16.unpack_from(self.sii, 8)[0])
        _U16.pack_into(m, REG_WD_DIVIDER, 2498)  # (2498 + 2) * 40 ns = 100 µs per unit
        _U16.pack_into(m, REG_WD_TIME_PD, self.watchdog_ns // 100_000)  # 100 ms by default (ET1100: 1000 units)
        _U16.pack_into(m, REG_WD_STATUS_PD, 1)
        _U16.pack_into(m, REG_EEP_CONTROL, EEP_READ_8_BYTES | EEP_TWO_ADDRESS_BYTES)
        self._sync_al()

    @property
    def station_address(self) -> int:
        """The configured station address (0x0010), which FPxx and FRMW datagrams address."""
        return _U16.unpack_from(self.mem, REG_STATION_ADDRESS)[0]

    def _now(self) -> int:
        return self._clock() if self.pass_ns is None else self.pass_ns

    def local_time_ns(self, now_ns: int | None = None) -> int:
        """Return the ESC's local clock (64-bit DC time before the offset)."""
        return self.dc.clock.local(self._now() if now_ns is None else now_ns)

    def read(self, ado: int, length: int) -> bytes:
        """Return *length* bytes at physical address *ado* (an ECAT read)."""
        end = ado + length
        if ado < REG_DC_END and end > REG_DC_FIRST:
            self.dc.before_read(ado, end, self._now())
        data = bytes(self.mem[ado:end])
        if end > PROCESS_RAM:
            self._after_ram_read(ado, end)
        return data

    def write(self, ado: int, data: bytes) -> None:
        """Store *data* at physical address *ado* (an ECAT write) and run the register side effects."""
        end = ado + len(data)
        if ado >= PROCESS_RAM:
            self.mem[ado:end] = data
            self._after_ram_write(ado, end)
            return
        m, w = self.mem, self._writable
        if end <= PROCESS_RAM and w.find(0, ado, end) < 0:  # all writable (find: no copy)
            m[ado:end] = data
        else:
            for i, b in enumerate(data):
                a = ado + i
                if a >= PROCESS_RAM or w[a]:
                    m[a] = b
        if end > PROCESS_RAM:
            self._after_ram_write(PROCESS_RAM, end)
        if ado < REG_AL_CONTROL + 2 and end > REG_AL_CONTROL:
            self._al_control(_U16.unpack_from(m, REG_AL_CONTROL)[0])
        if ado < REG_EEP_CONTROL + 2 and end > REG_EEP_CONTROL:
            self._eeprom_command(data, REG_EEP_CONTROL - ado)
        if ado < REG_FMMU0 + 0x100 and end > REG_FMMU0:
            self._load_fmmus()
        if ado < REG_SM0 + 0x80 and end > REG_SM0:
            self._load_sms(ado, end)
        if ado < REG_DC_END and end > REG_DC_FIRST:
            self.dc.after_write(ado, end, self._now(), defer=self.pass_ns is not None)

    # --- AL state machine ----------------------------------------------------------------------
    def _sync_al(self) -> None:
        self.epoch += 1
        _U16.pack_into(self.mem, REG_AL_STATUS, self.al.status)
        _U16.pack_into(self.mem, REG_AL_CODE, int(self.al.code))

    def _al_control(self, control: int) -> None:
        old, new = self.al.request(control)
        self._sync_al()
        if new != old:
            self._entered(old, new, 0)

    def _entered(self, old: AlState, new: AlState, code: int) -> None:
        now = self._clock()
        if new is AlState.OP:
            self._wd_kick_ns = now
            self.outputs_disabled = False
            self.epoch += 1
        if new < AlState.PREOP and old >= AlState.PREOP:
            self._mbx_queue.clear()
            self._mbx_counter = 0
        if self.app is not None:
            self.app.on_al_change(old, new, code)
            self.refresh_inputs()

    def _check_transition(self, old: AlState, new: AlState) -> int:
        """Return the AL status code that refuses *old* → *new*, or 0 (ETG.1000.6 §6.4.2)."""
        if new in self.refuse:
            return self.refuse[new]
        d = self.desc
        sms = self._sms_now()
        if new >= AlState.PREOP > old and d.coe:
            want = [(d.mailbox_out_start, d.mailbox_bytes, 0x04), (d.mailbox_in_start, d.mailbox_bytes, 0x00)]
            for n, (start, length, direction) in enumerate(want):
                s_start, s_len, ctrl, on = sms[n]
                if (s_start, s_len) != (start, length) or ctrl & 0x03 != 0x02 or ctrl & 0x0C != direction or not on:
                    return AlStatusCode.INVALID_MAILBOX_CONFIG
        if new >= AlState.SAFEOP > old:
            out_bytes, in_bytes = self.pd_bytes()
            for n, start, length, direction, code in (
                (2, d.outputs_start, out_bytes, 0x04, AlStatusCode.INVALID_OUTPUT_CONFIG),
                (3, d.inputs_start, in_bytes, 0x00, AlStatusCode.INVALID_INPUT_CONFIG),
            ):
                if not length:
                    continue
                s_start, s_len, ctrl, on = sms[n]
                if (s_start, s_len) != (start, length) or ctrl & 0x0C != direction or not on:
                    return code
        if new is AlState.OP:
            if self.mem[REG_DC_SYNC_ACT] & 0x03 == 0x03 and not _U32.unpack_from(self.mem, REG_DC_CYCLE0)[0]:
                return AlStatusCode.INVALID_DC_SYNC_CONFIG
        return 0

    def pd_bytes(self) -> tuple[int, int]:
        """Output and input bytes of the current PDO layout (the application's, if it can remap)."""
        sizes = getattr(self.app, "pd_bytes", None)
        return sizes() if sizes is not None else (self.desc.output_bytes, self.desc.input_bytes)

    def local_error(self, state: AlState, code: int) -> None:
        """Drop to *state* with the error indication and *code* (the slave's own decision)."""
        old = self.al.state
        self.al.local_error(state, code)
        self.outputs_disabled = old is AlState.OP and state is not AlState.OP
        self._sync_al()
        if old != state:
            self._entered(old, state, code)

    # --- SII EEPROM interface (ETG.1000.4 §6.4) ------------------------------------------------
    def _eeprom_command(self, data: bytes, at: int) -> None:
        m = self.mem
        control = _U16.unpack_from(m, REG_EEP_CONTROL)[0]
        status = EEP_READ_8_BYTES | EEP_TWO_ADDRESS_BYTES
        cmd = (control >> 8) & 0x07
        word = _U32.unpack_from(m, REG_EEP_ADDRESS)[0]
        byte = 2 * word
        if cmd == EEP_CMD_READ:
            self.eeprom_reads += 1
            if self.al.state >= AlState.PREOP:
                self.eeprom_reads_preop += 1
            chunk = bytes(self.sii[byte : byte + 8])
            m[REG_EEP_DATA : REG_EEP_DATA + 8] = chunk + b"\xff" * (8 - len(chunk))
        elif cmd == EEP_CMD_WRITE:
            # The write-enable bit must come in the same access as the command (self-clearing).
            if at >= 0 and data[at] & EEP_WRITE_ENABLE and byte + 2 <= len(self.sii):
                self.sii[byte : byte + 2] = m[REG_EEP_DATA : REG_EEP_DATA + 2]
            else:
                status |= EEP_ERR_WRITE_ENABLE
        elif cmd == EEP_CMD_RELOAD:
            _U16.pack_into(m, REG_ALIAS, _U16.unpack_from(self.sii, 8)[0])
        # Every command completes at once: never busy, command bits read back as 0.
        _U16.pack_into(m, REG_EEP_CONTROL, status)

    # --- SyncManagers and FMMUs ----------------------------------------------------------------
    def _load_sms(self, lo: int, hi: int) -> None:
        self.epoch += 1
        self._sms = []
        for n in range(8):
            start, length, ctrl, _status, activate, _pdi = _SM.unpack_from(self.mem, REG_SM0 + 8 * n)
            self._sms.append((start, length, ctrl, bool(activate & 1)))
        mbx_in = REG_SM0 + 8 + 6
        if lo <= mbx_in < hi and self.desc.coe:
            self._repeat_request()
        for n, (_s, _l, _c, on) in enumerate(self._sms):
            if not on:
                self.mem[REG_SM0 + 8 * n + 5] = 0  # a disabled SM has an empty buffer

    def _sms_now(self) -> list[tuple[int, int, int, bool]]:
        if not self._sms:
            self._load_sms(0, 0)
        return self._sms

    def _load_fmmus(self) -> None:
        self.epoch += 1
        self._fmmus = []
        for n in range(8):
            lstart, length, _sb, _eb, phys, _pb, ftype, act = _FMMU.unpack_from(self.mem, REG_FMMU0 + 16 * n)
            if act & 1 and length:
                self._fmmus.append((lstart, length, phys, ftype))

    def _pd_allowed(self, phys: int, end: int, sm_index: int) -> bool:
        """Is physical [phys, end) reachable now? Process-data SMs open only in SAFEOP/OP."""
        start, length, _ctrl, on = self._sms_now()[sm_index]
        if phys >= start + length or end <= start:
            return True  # not behind this SyncManager: plain memory
        if sm_index == 2 and self.outputs_disabled:
            return False
        return on and self.al.state in (AlState.SAFEOP, AlState.OP)

    def spans(self, laddr: int, length: int, write: bool) -> list[tuple[int, int, int]]:
        """What a logical datagram at *laddr* of *length* bytes reaches through this slave's active
        FMMUs of one direction (*write*: outputs, master to slave), as far as its SyncManagers let
        it now: ``(lo, hi, physical)`` spans, lo/hi relative to the datagram's data. Valid while
        :attr:`epoch` is unchanged."""
        bit, sm = (2, 2) if write else (1, 3)
        out = []
        for lstart, flen, phys, ftype in self._fmmus:
            if not ftype & bit:
                continue
            lo, hi = max(laddr, lstart), min(laddr + length, lstart + flen)
            if lo >= hi:
                continue
            p = phys + (lo - lstart)
            if self._pd_allowed(p, p + hi - lo, sm):
                out.append((lo - laddr, hi - laddr, p))
        return out

    def plain_write(self, phys: int, length: int) -> bool:
        """Does a write of *length* bytes at process RAM *phys* only store them (no mailbox
        request: :meth:`_after_ram_write`)? Valid while :attr:`epoch` is unchanged."""
        if phys < PROCESS_RAM:
            return False
        start, mbx_len, _c, on = self._sms_now()[0]
        return not (self.desc.coe and on and mbx_len and phys < start + mbx_len <= phys + length)

    def store_outputs(self, phys: int, data) -> None:
        """A logical write through an FMMU: *data* into process RAM at *phys*."""
        self.mem[phys : phys + len(data)] = data
        self._after_ram_write(phys, phys + len(data))

    @property
    def mapped(self) -> bool:
        """Has the master configured an FMMU (the process-data mapping)?"""
        return bool(self._fmmus)

    def _after_ram_write(self, lo: int, hi: int) -> None:
        sms = self._sms_now()
        out_start, out_len, ctrl, on = sms[2]
        if on and lo < out_start + out_len and hi > out_start:
            self._pd_written = True
            if ctrl & 0x40:  # SM control bit 6: writes trigger the process-data watchdog
                self._wd_kick_ns = self._clock()
        if self.desc.coe:
            start, length, _c, on = sms[0]
            if on and length and lo < start + length <= hi:  # last byte written: mailbox full
                self._mailbox_request(bytes(self.mem[start : start + length]))

    def _after_ram_read(self, lo: int, hi: int) -> None:
        if self.desc.coe:
            start, length, _c, on = self._sms_now()[1]
            if on and length and lo < start + length <= hi and self.mem[REG_SM0 + 8 + 5] & 0x08:
                self.mem[REG_SM0 + 8 + 5] &= ~0x08 & 0xFF  # the master read the last byte: empty
                self._post_mailbox()

    # --- mailbox (ETG.1000.4 §6.7.3: the SM "mailbox" mode) -------------------------------------
    def _mailbox_request(self, request: bytes) -> None:
        if self.app is None or self.al.state < AlState.PREOP:
            return
        # The mailbox header's counter (byte 5 bits 4-6: 1..7, 0 = none; ETG.1000.4 mailbox header,
        # "used for detection of duplicated frames") marks a write the master sent again: SOEM
        # sends a frame again when no reply came within EC_TIMEOUTRET (2 ms; ecx_SRconfirm), and
        # the first copy may have reached the slave. Answered twice, the spare answer is read as the
        # reply to the master's next request with the same index (SOEM matches the index only): a
        # busy CI host read 0x1600:01 for 0x1600:02 ("lacks 0x607A"). A real slave ignores a repeat.
        counter = (request[5] >> 4) & 0x07
        if counter and counter == self._mbx_counter:
            self.mailbox_repeats += 1
            return
        self._mbx_counter = counter
        self._mbx_queue.extend(self.app.mailbox(request))
        self._post_mailbox()

    def send_mailbox(self, message: bytes) -> None:
        """Queue an unsolicited mailbox message (e.g. an emergency) for the master, from PRE-OP on."""
        if self.desc.coe and self.al.state >= AlState.PREOP:
            self._mbx_queue.append(message)
            self._post_mailbox()

    def _post_mailbox(self) -> None:
        start, length, _c, on = self._sms_now()[1]
        if not self._mbx_queue or not on or self.mem[REG_SM0 + 8 + 5] & 0x08:
            return
        reply = self._mbx_queue.pop(0)[:length]
        self._mbx_last = reply
        self.mem[start : start + length] = reply + bytes(length - len(reply))
        self.mem[REG_SM0 + 8 + 5] |= 0x08

    def _repeat_request(self) -> None:
        # SM1 activate bit 1 toggled: send the last reply again and mirror the bit into the PDI
        # control register's "repeat ack" (0x080F bit 1), which SOEM waits for (ecx_mbxreceive).
        want = self.mem[REG_SM0 + 8 + 6] & 0x02
        if want != self.mem[REG_SM0 + 8 + 7] & 0x02:
            if self._mbx_last:
                self._mbx_queue.insert(0, self._mbx_last)
                self.mem[REG_SM0 + 8 + 5] &= ~0x08 & 0xFF
                self._post_mailbox()
            self.mem[REG_SM0 + 8 + 7] = (self.mem[REG_SM0 + 8 + 7] & ~0x02 & 0xFF) | want

    # --- once per frame, and between frames ----------------------------------------------------
    def end_frame(self) -> None:
        """Run the DC time control loop and, if this frame touched the process data, the application."""
        self.dc.settle()
        if self._pd_written or self.pd_read:
            outputs = None
            if self._pd_written and self.al.state is AlState.OP:
                start, length, _c, _on = self._sms[2]
                outputs = bytes(self.mem[start : start + length])
                self.dc.outputs_arrived(self._now())
            self._pd_written = self.pd_read = False
            self._exchange(outputs)

    def refresh_inputs(self) -> None:
        """Let the application update its inputs now (after a state change or a fault), in SAFEOP/OP."""
        if self.al.state in (AlState.SAFEOP, AlState.OP):
            self._exchange(None)

    def _exchange(self, outputs: bytes | None) -> None:
        if self.app is not None:
            start, length, _c, _on = self._sms_now()[3]
            if not length:
                start, length = self.desc.inputs_start, self.pd_bytes()[1]
            self.app.exchange(outputs, memoryview(self.mem)[start : start + length])

    def poll(self, now_ns: int) -> None:
        """Check the process-data watchdog (ETG.1000.4 §6.6): expiry in OP → SAFEOP+ERR 0x001B."""
        _start, length, ctrl, on = self._sms_now()[2]
        if self.al.state is not AlState.OP or not (on and length and ctrl & 0x40):
            return
        units = _U16.unpack_from(self.mem, REG_WD_TIME_PD)[0]
        if not units:
            return
        unit_ns = (_U16.unpack_from(self.mem, REG_WD_DIVIDER)[0] + 2) * 40
        if now_ns - self._wd_kick_ns > units * unit_ns:
            self.watchdog_expiries += 1
            _U16.pack_into(self.mem, REG_WD_STATUS_PD, 0)
            self.mem[REG_WD_COUNTER_PD] = min(self.mem[REG_WD_COUNTER_PD] + 1, 255)
            self.local_error(AlState.SAFEOP, AlStatusCode.SM_WATCHDOG)

    def latch_receive_times(self, port0_ns: int, port1_ns: int | None) -> None:
        """Latch the DC receive times of a frame that wrote 0x0900 (ETG.1000.4 §9.1.2.2)."""
        local0 = self.local_time_ns(port0_ns)
        _U32.pack_into(self.mem, REG_DC_RECV_TIME0, local0 & 0xFFFF_FFFF)
        _U32.pack_into(self.mem, REG_DC_RECV_TIME0 + 4, self.local_time_ns(port1_ns) & 0xFFFF_FFFF if port1_ns else 0)
        _U64.pack_into(self.mem, REG_DC_RECV_TIME_EPU, local0)
