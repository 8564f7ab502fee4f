"""Analysis of cycle records (pure numpy; no I/O)."""

from .metrics import derive, summarize

__all__ = ["derive", "summarize"]
