"""Devices the cyclic loop talks to: the virtual board (default) and, later, EtherCAT masters."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..platform import ethercat_adapter
from .base import Device
from .virtual import VirtualBoard

if TYPE_CHECKING:
    from ..ethercat.drives import DriveConfig

__all__ = ["Device", "DeviceOptions", "VirtualBoard", "check_device_spec", "open_device"]


@dataclass(frozen=True)
class DeviceOptions:
    """How an EtherCAT master is opened (ethercat.master.EcatMaster's parameters of the same names),
    resolved once per run by the session (session.config.device_options); the virtual board takes none."""

    bus_timeout_ns: int
    dc_lock: bool
    dc_shift_ns: int
    drives: DriveConfig | None = None  # the drive description (--ecat-drives; None: CiA 402 CSP defaults)


def check_device_spec(spec: str) -> str:
    """Return *spec* ("virtual" or "ethercat:IFACE") if it names a device kind softrt has."""
    if spec == "virtual" or (spec.startswith("ethercat:") and len(spec) > len("ethercat:")):
        return spec
    raise ConfigError(f"unknown device {spec!r}", hint="use virtual or ethercat:IFACE (e.g. ethercat:eth1)")


def open_device(
    spec: str,
    period_ns: int,
    axes: int,
    clock: Callable[[], int] = time.monotonic_ns,
    options: DeviceOptions | None = None,
) -> Device:
    """Open the device *spec*, ready for ``start()`` (an EtherCAT bus is brought to OP).

    *clock* is the loop's clock (the platform's ``clock_ns``): the virtual board's edges are on it.
    *options* go to an EtherCAT master (the bus timeout, the DC phase lock, the drive description).
    """
    check_device_spec(spec)
    if spec == "virtual":
        return VirtualBoard(period_ns, axes, clock=clock)
    # On Windows a friendly name or GUID becomes Npcap's \\Device\\NPF_{GUID}; missing Npcap is one line with the fix.
    spec = "ethercat:" + ethercat_adapter(spec[len("ethercat:") :])
    try:
        from ..ethercat import open_device as open_ethercat
    except ImportError as err:  # pragma: no cover - the extra is not installed, or a module this OS lacks
        raise ConfigError(
            f"{spec} cannot load the EtherCAT master: {err}",
            hint="pip install 'softrt[ethercat]' (pysoem); on Windows the master's receive path "
            "(AF_PACKET) is still Linux-only",
        ) from None
    # DeviceOptions' fields are the master's parameters of the same names (a shallow copy: the drives stay
    # one object); without options the master's own defaults hold.
    return open_ethercat(spec, period_ns, axes, **(vars(options) if options is not None else {}))
