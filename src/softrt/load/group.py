"""Running several loads together around a measurement (load layer).

rteval's order, kept: prepare every load, start them all, let them settle and check each is still alive, measure,
and stop every load in ``finally`` whatever happened (rteval ``__RunMeasurementProfile``)::

    with LoadGroup(loads, settle_s=1.0) as group:   # start + settle; a dead load raises
        measure()                                   # group.check_alive() may be called here
    group.results                                   # one LoadRun per load, in order
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from types import TracebackType

from ..cpus import CpuSet
from ..errors import ConfigError
from ..platform import get_platform
from ..schema.summary import LoadRun
from .base import LoadFailed, LoadGenerator, LoadState

DEFAULT_SETTLE_S = 1.0
_POLL_S = 0.05


def check_placement(loads: Iterable[LoadGenerator], rt_cpus: CpuSet, allow_rt: bool) -> None:
    """Raise ConfigError if a load would run on a real-time CPU and the scenario did not say so.

    The seed's finding: a multi-processor build on the real-time cores breaks determinism, so
    loads belong on the housekeeping CPUs unless a scenario tests exactly that, on purpose.
    """
    if allow_rt:
        return
    for load in loads:
        clash = load.cpus & rt_cpus
        if len(clash):
            plat = get_platform()
            housekeeping = (plat.online_cpus() & plat.allowed_cpus()) - rt_cpus  # as cpus.choose_cpus
            msg = f"load {load.name!r} is placed on real-time CPU {clash}"
            hint = (
                f"place loads on housekeeping CPUs {housekeeping or 'none left'}, "
                "or declare in the scenario that loads may use the real-time CPUs"
            )
            raise ConfigError(msg, hint=hint)


class LoadGroup:
    """Start loads, settle, hand over to the measurement, and always stop them."""

    def __init__(self, loads: Sequence[LoadGenerator], *, settle_s: float = DEFAULT_SETTLE_S) -> None:
        names = [load.name for load in loads]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"load {dupes[0]!r} is listed more than once")
        if settle_s < 0:
            raise ConfigError(f"settle time cannot be negative: {settle_s}")
        self.loads = list(loads)
        self.settle_s = float(settle_s)
        self.results: list[LoadRun] = []
        self.stop_errors: list[str] = []

    def __enter__(self) -> LoadGroup:
        try:
            for load in self.loads:  # slow set-up first, so no load's set-up runs under the others
                load.prepare()
            for load in self.loads:
                load.start()
            self._settle()
        except _Died as died:
            self._stop_all()
            result = next(r for r in self.results if r.name == died.name)
            detail = "; ".join(result.problems) or "no message"
            raise LoadFailed(died.name, f"stopped running while the loads settled: {detail}") from None
        except BaseException:  # includes KeyboardInterrupt: nothing may keep running
            self._stop_all()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop_all()
        if exc_type is None and self.stop_errors:
            name, _, msg = self.stop_errors[0].partition(": ")
            raise LoadFailed(name, f"could not be stopped cleanly: {msg}")

    def dead(self) -> list[LoadGenerator]:
        """Return the started loads whose processes are no longer all running."""
        return [load for load in self.loads if load.state is LoadState.RUNNING and not load.alive()]

    def check_alive(self) -> None:
        """Raise LoadFailed naming the first load that died (call it during the measurement)."""
        for load in self.dead():
            raise LoadFailed(load.name, "stopped running during the measurement")

    def _settle(self) -> None:
        deadline = time.monotonic() + self.settle_s
        while True:
            for load in self.dead():
                raise _Died(load.name)
            if time.monotonic() >= deadline:
                return
            time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))

    def _stop_all(self) -> None:
        # Every load gets its own thread, so they wind down in parallel (stress-ng may take a
        # second or more to stop its workers) and one slow or failing load cannot keep another
        # running. A second Ctrl-C while waiting does not abandon them: the joins are retried.
        started = [load for load in self.loads if load.state is LoadState.RUNNING]
        errors: dict[str, str] = {}

        def stop(load: LoadGenerator) -> None:
            try:
                load.stop()
            except Exception as err:  # noqa: BLE001 - one load failing to stop must not stop the others
                errors[load.name] = str(err)

        threads = [threading.Thread(target=stop, args=(load,), name=f"stop-{load.name}") for load in self.loads]
        for t in threads:
            t.start()
        interrupted: BaseException | None = None
        for t in threads:
            while t.is_alive():
                try:
                    t.join()
                except KeyboardInterrupt as err:
                    interrupted = err
        self.stop_errors = [f"{name}: {msg}" for name, msg in errors.items()]
        self.results = [load.result() for load in started if load.state is LoadState.STOPPED]
        if interrupted is not None:
            raise interrupted


class _Died(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name
