"""Analysis of cycle records (pure numpy; no I/O)."""

from .metrics import derive
from .stream import RunStats, Snapshot, summarize

__all__ = ["RunStats", "Snapshot", "derive", "summarize"]
