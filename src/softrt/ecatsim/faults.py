"""Fault injection for the virtual slaves (pure decisions; the simulator applies them).

Faults apply to process-data frames only (frames with an LRD/LWR/LRW datagram), so bus set-up
stays reliable and every injected fault is counted exactly:

* ``drop``: the frame is lost before it reaches the slaves (no reply; the master times out);
* ``delay``: the reply is held back by ``delay_us`` (a late frame: the master may time out);
* ``bad_wkc``: one slave misses the process data (its FMMUs are skipped), so the working counter
  comes back short and that slave's data is not exchanged, as when a slave loses a frame;
* ``bad_frame``: the reply comes back changed, as from a broken relay or slave (``corrupt``: its
  process-data datagram's command becomes another, its length field another, or the frame is
  cut short);
* drive faults are injected into the drive model directly (:meth:`.cia402.Drive.fault`).

Each kind can be armed for the next *n* frames (``arm``) or every *k*-th frame (``every``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("drop", "delay", "bad_wkc", "bad_frame")
#: How a ``bad_frame`` reply is changed.
CORRUPTIONS = ("command", "length", "short")


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one process-data frame."""

    drop: bool = False
    delay_us: int = 0
    skip_slave: int | None = None  #: position of the slave that misses the frame
    corrupt: str | None = None  #: how the reply is changed (one of CORRUPTIONS)


NO_FAULT = Decision()


@dataclass
class FaultPlan:
    """Armed and periodic faults, with counters of what was injected."""

    every: dict[str, int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    delay_us: int = 2000
    bad_wkc_slave: int = -1  #: -1 = the last slave
    corrupt: str = "command"
    pd_frames: int = 0
    injected: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})

    def arm(self, kind: str, frames: int = 1, **options) -> None:
        """Inject *kind* into the next *frames* process-data frames."""
        self._check(kind)
        self.pending[kind] = self.pending.get(kind, 0) + frames
        self._options(options)

    def set_every(self, kind: str, period_frames: int, **options) -> None:
        """Inject *kind* into every *period_frames*-th process-data frame (0 = never)."""
        self._check(kind)
        self.every[kind] = period_frames
        self._options(options)

    def decide(self, slaves: int) -> Decision:
        """Return the decision for the next process-data frame and count it."""
        self.pd_frames += 1
        if not any(self.pending.values()) and not any(self.every.values()):
            return NO_FAULT  # nothing armed: the common case, cheap
        hit = {k for k in KINDS if self._take(k)}
        if not hit:
            return NO_FAULT
        for k in hit:
            self.injected[k] += 1
        if "drop" in hit:
            return Decision(drop=True)
        skip = None
        if "bad_wkc" in hit:
            skip = self.bad_wkc_slave if self.bad_wkc_slave >= 0 else slaves - 1
        return Decision(
            delay_us=self.delay_us if "delay" in hit else 0,
            skip_slave=skip,
            corrupt=self.corrupt if "bad_frame" in hit else None,
        )

    def _take(self, kind: str) -> bool:
        if self.pending.get(kind, 0) > 0:
            self.pending[kind] -= 1
            return True
        period = self.every.get(kind, 0)
        return bool(period) and self.pd_frames % period == 0

    def _options(self, options: dict) -> None:
        if "delay_us" in options:
            self.delay_us = int(options["delay_us"])
        if "slave" in options:
            self.bad_wkc_slave = int(options["slave"])
        if "corrupt" in options:
            self.corrupt = str(options["corrupt"])

    @staticmethod
    def _check(kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}; known: {', '.join(KINDS)}")
