"""EtherCAT: a pysoem-backed master device and a virtual slave segment to test it without hardware.

Layers (each imports only those above it)::

    wire         frames and datagrams on the wire (pure encode/decode)
    al, sii, description, coe, cia402, faults   pure models: AL state machine, SII image,
                 device description, CoE SDO server, CiA 402 drive, fault plan
    esc, slave   one slave controller (registers, SII, SM, FMMU, DC, watchdog) and its application
    bus          a chain of ESCs: addressing and working counters
    sim          the simulator process: a raw socket on an interface (``softrt ecat-sim``)
    master       the real master (pysoem) as a softrt Device (``--device ethercat:IFACE``)

``errors.EcatError`` is the one error type. Nothing here imports pysoem except ``master``.
"""

from __future__ import annotations

from .errors import EcatError

__all__ = ["EcatError", "open_device"]


def open_device(spec: str, period_ns: int, axes: int = 1, **options):
    """Build the EtherCAT master device for *spec* (``"ethercat:IFACE"``); see :mod:`.master`."""
    from .master import open_device as _open

    return _open(spec, period_ns, axes, **options)
