"""Chunks queued until a batch is full (store layer).

The drainer hands over a few hundred records at a time; concatenating, writing a Parquet row group
or running a statistics pass per chunk would cost a call each (numpy's and pyarrow's overheads are
per call, not per row). :class:`Batch` queues the chunks and counts their rows, so the writer
(:class:`softrt.store.rundir.RunDir`) and the run's streaming pass (session.collect) act once per
batch.
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Batch(Generic[T]):
    """Chunks queued in order, with the rows they hold."""

    def __init__(self) -> None:
        self.items: list[T] = []
        self.rows = 0

    def add(self, item: T, rows: int) -> None:
        """Queue *item*, which holds *rows* rows."""
        self.items.append(item)
        self.rows += rows

    def take(self) -> list[T]:
        """The chunks queued (oldest first), leaving the batch empty."""
        items, self.items, self.rows = self.items, [], 0
        return items
