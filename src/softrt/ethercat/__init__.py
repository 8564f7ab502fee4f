"""EtherCAT, the master side of the wire: a pysoem-backed master device and the protocol it speaks.

The virtual slaves that test it without hardware are the other side of the wire, in
:mod:`softrt.ecatsim`; they import the protocol modules below, never the master.

Layers (each imports only those above it)::

    wire         frames and datagrams on the wire (pure encode/decode)
    al, sii, description, dc   pure protocol models: AL states and codes, SII image, device description,
                 DC registers, the host's phase and its PI lock
    mapping      where a drive's objects sit in the process image (per CiA 402 axis)
    drives       drive descriptions (TOML): which PDOs to assign in PRE-OP
    netif, rawsock   interface checks; a raw socket of our own (BPF-filtered by datagram index)
    preop        drive configuration in PRE-OP by SDO: identity, axes, PDO assignment (pysoem)
    bringup      discovery, PDO maps, DC, INIT → OP (pysoem)
    dcmonitor    DC during a run: phase against SYNC0, 0x092C probe, the phase lock
    master       the real master (pysoem) as a softrt Device (``--device ethercat:IFACE``)

``errors.EcatError`` is the error type (``EcatInputError`` for bad input). Only ``preop``,
``bringup`` and ``master`` use pysoem (imported inside their functions, so the pure modules load
without it).
"""

from __future__ import annotations

from .errors import EcatError, EcatInputError

__all__ = ["EcatError", "EcatInputError", "open_device"]


def open_device(spec: str, period_ns: int, axes: int = 1, **options):
    """Build the EtherCAT master device for *spec* (``"ethercat:IFACE"``); see :mod:`.master`."""
    from .master import open_device as _open

    return _open(spec, period_ns, axes, **options)
