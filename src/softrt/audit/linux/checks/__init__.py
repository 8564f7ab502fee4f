"""The checks, one module per topic, in the order ``softrt check`` prints them (audit layer).

Each check is a function ``(Context) -> Finding`` that reads only through the context's root and
returns "n/a" with a reason when its source is missing.
"""

from __future__ import annotations

from . import cores, idle, irq, kernel, services, updates

#: Every check, grouped as model.GROUPS orders them.
ALL = (*cores.CHECKS, *idle.CHECKS, *services.CHECKS, *updates.CHECKS, *irq.CHECKS, *kernel.CHECKS)

__all__ = ["ALL"]
