"""What a load kind is, and the table the kinds fill (load layer).

Each kind is one module in :mod:`softrt.load.kinds` that calls :func:`register` with a
:class:`LoadKind`: its name, where it is listed, and how it is made for a backend. The registry
(:mod:`.registry`), the scenario files' ``[[load]] name`` (scenario.parse), ``softrt compare``
and the error naming the known loads all read this table, so adding a load kind is adding one
module (issue 29; before, a kind was spelled in four files).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: (cpus, the backend chosen, timeout_s=..., workdir=...) -> a LoadGenerator (not started)
Make = Callable[..., Any]


@dataclass(frozen=True)
class LoadKind:
    """One kind of background load.

    ``rank`` orders the kinds where they are listed (``known loads: disk, cpu, …``). ``backends``
    maps a backend (``stress-ng``, ``builtin``) to the function that makes the load with it; a kind
    that picks its own tools whatever the backend (GPU, video) gives ``make`` instead, which also
    receives the backend chosen.
    """

    name: str
    rank: int
    backends: dict[str, Make] | None = None
    make: Make | None = None

    def build(self, cpus: Any, backend: str, **kw: Any) -> Any:
        """Make this load on *cpus* with *backend* (already resolved: stress-ng or builtin)."""
        if self.make is not None:
            return self.make(cpus, backend, **kw)
        return self.backends[backend](cpus, **kw)


KINDS: dict[str, LoadKind] = {}


def register(kind: LoadKind) -> LoadKind:
    """Add *kind* to the table (a kind module calls it once, when imported)."""
    if kind.name in KINDS:
        raise ValueError(f"load kind {kind.name!r} is registered twice")  # a bug in a kind module
    if (kind.backends is None) == (kind.make is None):
        raise ValueError(f"load kind {kind.name!r} needs either backends or make")
    KINDS[kind.name] = kind
    return kind
