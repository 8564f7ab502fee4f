"""Names a package hands out on first use (bottom layer; PEP 562, a module ``__getattr__``).

Importing any softrt module imports the packages above it first, so a package ``__init__`` that
re-exported its heavy modules would load them into every process below it: each command's
start-up, each spawned real-time worker, each load process and the EtherCAT simulator. Such a
package says ``__getattr__ = lazy(__name__, {"Name": ".module"})`` instead, and ``.module`` is
imported when ``Name`` is first asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of *package* for the names in *where* (name -> module, relative to
    *package* as ``import_module`` takes it)."""

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(importlib.import_module(where[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
