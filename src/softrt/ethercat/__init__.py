"""EtherCAT, the master side of the wire: a pysoem-backed master device and the protocol it speaks.

The virtual slaves that test it without hardware are the other side of the wire, in
:mod:`softrt.ecatsim`; they import the protocol modules below, never the master.

Layers (each imports only those above it)::

    wire         frames and datagrams on the wire (pure encode/decode)
    al, sii, description   pure protocol models: AL states and codes, SII image, device description
    mapping      where a drive's objects sit in the process image (per CiA 402 axis)
    drives       drive descriptions (TOML): which PDOs to assign in PRE-OP
    netif        interface checks
    preop        drive configuration in PRE-OP by SDO: identity, axes, PDO assignment (pysoem)
    bringup      discovery, PDO maps, DC, INIT → OP (pysoem)
    master       the real master (pysoem) as a softrt Device (``--device ethercat:IFACE``)

``errors.EcatError`` is the one error type. Only ``preop``, ``bringup`` and ``master`` use pysoem
(imported inside their functions, so the pure modules load without it).
"""

from __future__ import annotations

from .errors import EcatError

__all__ = ["EcatError", "open_device"]


def open_device(spec: str, period_ns: int, axes: int = 1, **options):
    """Build the EtherCAT master device for *spec* (``"ethercat:IFACE"``); see :mod:`.master`."""
    from .master import open_device as _open

    return _open(spec, period_ns, axes, **options)
