"""The CiA 402 side of the EtherCAT master: its axes, their objects in the frame, and the state
machine that enables and disables them (ethercat layer).

CiA 402-2 (IEC 61800-7-201) §6.2: a drive goes from "switch on disabled" through "ready to switch on"
and "switched on" to "operation enabled" by its controlword (0x6040), and says where it is in its
statusword (0x6041, Table 30); in cyclic synchronous position mode (§6.3.2, mode 8) the target position
(0x607A) is written every cycle. :class:`Cia402Drives` is the half of
:class:`~softrt.ethercat.master.EtherCATMaster` that speaks it (a mixin: it drives the master's frame
and axes); the master keeps the bus, the frame's timing and the run's counters.
"""

from __future__ import annotations

import struct
import time
from typing import Any

from ..schema.device import Emergency
from . import bringup, preop
from .errors import EcatError
from .mapping import DriveMap

CW_SHUTDOWN, CW_SWITCH_ON, CW_ENABLE, CW_DISABLE_VOLTAGE, CW_FAULT_RESET = 0x0006, 0x0007, 0x000F, 0x0000, 0x0080
SW_MASK, SW_SOD, SW_RTSO, SW_SO, SW_OE, SW_FAULT_MASK, SW_FAULT = 0x6F, 0x40, 0x21, 0x23, 0x27, 0x4F, 0x08
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")
_I8 = struct.Struct("<b")
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MAX_EMERGENCIES = 64  #: emergencies kept for the report (a faulting drive may repeat them)


def cia402_state(statusword: int) -> str:
    """Name the CiA 402 state a statusword shows (CiA 402-2 §6.2, Table 30)."""
    for mask, value, name in (
        (0x4F, 0x00, "not ready to switch on"),
        (0x4F, 0x40, "switch on disabled"),
        (0x6F, 0x21, "ready to switch on"),
        (0x6F, 0x23, "switched on"),
        (0x6F, 0x27, "operation enabled"),
        (0x6F, 0x07, "quick stop active"),
        (0x4F, 0x0F, "fault reaction active"),
        (0x4F, 0x08, "fault"),
    ):
        if statusword & mask == value:
            return name
    return "unknown"


class Axis:
    """One CiA 402 axis: its slave, where its objects sit in the cyclic frame (outputs in its
    ``tx``, inputs in its ``rx``: the slave's share of the image plus the object's offset) and
    its last inputs."""

    __slots__ = (
        "axis",
        "controlword_at",
        "error_code",
        "error_code_at",
        "info",
        "mode_at",
        "name",
        "origin",
        "position",
        "position_at",
        "slave",
        "statusword",
        "statusword_at",
        "target_at",
    )

    def __init__(
        self, slave, name: str, drive_map: DriveMap, out_at: int, in_at: int, info: bringup.SlaveInfo, axis: int
    ) -> None:
        self.slave, self.name = slave, name
        self.info, self.axis = info, axis
        self.controlword_at = out_at + drive_map.controlword
        self.target_at = out_at + drive_map.target_position
        self.mode_at = None if drive_map.modes_of_operation is None else out_at + drive_map.modes_of_operation
        self.statusword_at = in_at + drive_map.statusword
        self.position_at = in_at + drive_map.position_actual
        self.error_code_at = None if drive_map.error_code is None else in_at + drive_map.error_code
        self.origin = 0
        self.statusword = 0
        self.position = 0
        self.error_code = 0

    def where(self) -> str:
        """``drive 'NAME' (slave 1)``, with the axis when the drive has several (the axes of one
        drive share its name)."""
        axis = f", axis {self.axis}" if len(self.info.drives) > 1 else ""
        return f"drive '{self.name}' (slave {self.info.position}{axis})"


class Cia402Drives:
    """The master's CiA 402 drives: targets and controlwords out, statuswords and positions in, the
    enable and disable sequences, and what a faulted drive says (its emergencies, its error code).

    Needs from the master: ``_axes``, ``_frame``, ``_exchange()``, ``expected_wkc``, ``last_wkc``,
    ``enable_timeout_s``, ``period_ns``, ``iface``, ``emergencies`` and the pysoem master ``_m``.
    """

    _axes: list[Axis]
    _frame: Any  # the cycle's frame (cyclic.Frame): its tx and rx images
    _m: Any  # pysoem.Master
    expected_wkc: int
    last_wkc: int
    enable_timeout_s: float
    period_ns: int
    iface: str
    emergencies: list[Emergency]

    def _exchange(self) -> int:  # the master's: one frame out and its reply in
        raise NotImplementedError

    def _set_target(self, ax: Axis, value) -> None:
        target = ax.origin + int(round(value))
        _I32.pack_into(self._frame.tx, ax.target_at, min(max(target, INT32_MIN), INT32_MAX))

    def _read_inputs(self) -> None:
        rx = self._frame.rx
        for ax in self._axes:
            ax.statusword = _U16.unpack_from(rx, ax.statusword_at)[0]
            ax.position = _I32.unpack_from(rx, ax.position_at)[0]
            if ax.error_code_at is not None:
                ax.error_code = _U16.unpack_from(rx, ax.error_code_at)[0]

    def _put_outputs(self, ax: Axis, controlword: int, target: int) -> None:
        tx = self._frame.tx
        _U16.pack_into(tx, ax.controlword_at, controlword)
        _I32.pack_into(tx, ax.target_at, target)
        if ax.mode_at is not None:
            _I8.pack_into(tx, ax.mode_at, 8)  # CSP (CiA 402-2 §6.3.2)

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
                # One entry per axis, named by slave and axis: identical drives share a name.
                seen = {
                    ax.where(): {"statusword": f"0x{ax.statusword:04X}", "error_code": f"0x{ax.error_code:04X}"}
                    for ax in self._axes
                }
                text = "; ".join(
                    f"{k} statusword {v['statusword']}, error code {v['error_code']}" for k, v in seen.items()
                )
                raise EcatError(
                    "drive_fault",
                    self.iface,
                    f"CiA 402 '{what}' (controlword 0x{controlword:04X}) not reached: {text}"
                    + (
                        f" (last working counter {wkc}, expected {self.expected_wkc})"
                        if wkc != self.expected_wkc
                        else ""
                    ),
                    seen=seen,
                )
            time.sleep(period_s)

    def _disable(self) -> None:
        # Disable operation, shut down, disable voltage: each held for a few cycles; the drive
        # stops at the current target (CiA 402-2 transitions 5, 6, 7).
        for controlword in (CW_SWITCH_ON, CW_SHUTDOWN, CW_DISABLE_VOLTAGE):
            for ax in self._axes:
                _U16.pack_into(self._frame.tx, ax.controlword_at, controlword)
            for _ in range(8):
                self._exchange()
                time.sleep(self.period_ns / 1e9)

    def _on_emergency(self, emcy) -> None:
        """A pysoem emergency callback (it runs inside whichever SDO transfer received it)."""
        if len(self.emergencies) < MAX_EMERGENCIES:
            self.emergencies.append(
                Emergency(
                    slave=emcy.slave_pos - 1,
                    error_code=emcy.error_code,
                    error_register=emcy.error_reg,
                    data=bytes([emcy.b1]).hex()
                    + emcy.w1.to_bytes(2, "little").hex()
                    + emcy.w2.to_bytes(2, "little").hex(),
                )
            )

    def _read_errors(self) -> None:
        # After the run, a drive that faulted says why by SDO: error register and error code
        # (the error code is also in the PDO when mapped). Only on a bus that still answers.
        if self.last_wkc != self.expected_wkc:
            return
        faulted = {ax.info.position: ax.info for ax in self._axes if ax.statusword & SW_FAULT_MASK == SW_FAULT}
        for info in faulted.values():
            if info.has_coe and info.identity is not None:
                register, codes = preop.read_errors(self._m.slaves[info.position], len(info.drives))
                info.identity = info.identity.replace(error_register=register, error_codes=list(codes))
