"""Devices the cyclic loop talks to: the virtual board (default) and, later, EtherCAT masters."""

from .base import Device
from .virtual import VirtualBoard

__all__ = ["Device", "VirtualBoard"]
