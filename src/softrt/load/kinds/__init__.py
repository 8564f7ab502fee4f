"""The load kinds, one module each (load layer): importing this package registers every module in it.

Add a load kind by adding a module here that calls :func:`softrt.load.kind.register`; nothing else
names the kinds (the registry, the scenario parser and the docs' list read the table).
"""

from __future__ import annotations

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
