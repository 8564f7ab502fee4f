"""Chunks queued until a batch is full (store layer).

The drainer hands over a few hundred records at a time; concatenating, writing a Parquet row group
or running a statistics pass per chunk would cost a call each (numpy's and pyarrow's overheads are
per call, not per row). :class:`Batch` queues the chunks and counts their rows, so the writer
(:class:`softrt.store.rundir.RunDir`) and the run's streaming pass (session.collect) act once per
batch, on the chunks joined into one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Batch(Generic[T]):
    """Chunks queued in order, with the rows they hold; *join* makes one of a list of them
    (``numpy.concatenate``, ``analysis.cycles.concat``)."""

    def __init__(self, join: Callable[[list[T]], T]) -> None:
        self._join = join
        self._items: list[T] = []
        self.rows = 0

    def add(self, item: T, rows: int) -> int:
        """Queue *item*, which holds *rows* rows; return the rows queued."""
        self._items.append(item)
        self.rows += rows
        return self.rows

    def take(self) -> T | None:
        """The chunks queued joined into one (None: nothing queued), leaving the batch empty."""
        if not self._items:
            return None
        items, self._items, self.rows = self._items, [], 0
        return self._join(items)
