"""The run summary (``summary.json``) as typed documents (store layer; docs/run-format.md, "summary.json").

:class:`RunSummary` is what ``softrt run``/``compare`` write, what an import writes for a
cyclictest/oslat result, and what every reader gets from :func:`softrt.store.rundir.read_summary`.
Its parts: identity, status and times; the configuration; host facts (a free-form dict); tuning
and system changes; the metrics of the streaming pass (:class:`Metrics`, whose keys sit at the
top of the file); misses; the motion impact; the ring; the board; what was kept on disk;
``why_late`` (schema.why_late); the check taken before the run; the checkpoint's supervisor; the
run's provenance (schema.provenance: the rig, its firmware, microcode and network card).

Schema ``softrt.summary/<major>``: fields are added without changing the major version (a reader
keeps the keys it does not know in ``extra``); a newer major version is refused by
:func:`check_version`. Files written by earlier versions lack some fields: they read as None.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..units import format_number
from .check import CheckReport
from .config import Config as Config  # re-exported: the summary's configuration document
from .device import Board
from .doc import MAX_US, Doc, count, flatten, key, many, obj, opt, within
from .provenance import Provenance
from .tail import Tail
from .text import MAX_NAME, is_safe_name, printable, show_value
from .watch import Watch
from .why_late import WhyLate

SCHEMA = "softrt.summary/1"
SUMMARY_MAJOR = 1
#: What a run's ``status`` says: "running" (a checkpoint), "complete", "partial" (stopped early or
#: lost records; ``partial_reason`` says why) or "failed" (the device was lost; ``partial_reason``).
STATUSES = ("running", "complete", "partial", "failed")
MODES = ("real-time", "not real-time", "untuned")
SOURCES = ("softrt", "cyclictest", "oslat")
_HINT = "the file is corrupt or was not written by softrt"


class Stats(Doc):
    """One series' statistics in µs (null when the run has none, e.g. an import's period).

    A long period, latency or processing time hurts, so they give their high percentiles (p99,
    p99.9, p99.99); a short slack hurts, so slack gives its low ones (p1, p0.1, p0.01; summaries
    written before that have p99… for slack too: its upper tail).
    """

    mean: float | None = within(MAX_US)
    min: float | None = within(MAX_US)
    max: float | None = within(MAX_US)
    std: float | None = within(MAX_US)
    p50: float | None = within(MAX_US)
    p99: float | None = within(MAX_US)
    p99_9: float | None = within(MAX_US)
    p99_99: float | None = within(MAX_US)
    p1: float | None = within(MAX_US, omit_none=True)
    p0_1: float | None = within(MAX_US, omit_none=True)
    p0_01: float | None = within(MAX_US, omit_none=True)

    @property
    def low_tail(self) -> bool:
        """It holds the low percentiles (slack since softrt counted its tail)."""
        return "p1" in self.order or self.p1 is not None


class Misses(Doc):
    """Missed updates and overruns; ``missed_updates`` is the board's count when the records hold fewer."""

    missed_updates: int | None = count()
    cycles_with_miss: int | None = count()
    longest_miss_run: int | None = count()
    overruns: int | None = count()
    device_errors: int | None = count()
    missed_updates_in_records: int | None = count(omit_none=True)
    source: str | None = opt()  # "board" when missed_updates is the board's count
    note: str | None = opt()


class Metrics(Doc):
    """The streaming pass's figures (analysis.stream.RunStats.summary): the top of summary.json,
    and each scenario's pooled figures in ``softrt compare``."""

    cycles: int | None = count()
    records_expected: int | None = count()
    records_missing: int | None = count()
    late_cycles: int | None = count(omit_none=True)  # softrt's one rule (analysis.cycles); None: not counted
    period_us: Stats = Stats()
    process_us: Stats = Stats()
    latency_us: Stats = Stats()
    slack_us: Stats = Stats()
    misses: Misses | None = None
    rtt_us: Stats | None = opt()  # EtherCAT frames' round trip


class Motion(Doc):
    """What the misses did to the motion (motion.impact.MotionImpact), or why it was not computed."""

    not_computed: str | None = opt()
    period_ns: int | None = opt()
    axes: int | None = opt()
    writes: int | None = opt()
    first_cycle: int | None = opt()
    last_cycle: int | None = opt()
    board_cycles: int | None = opt()
    missed_updates: int | None = opt()
    longest_miss_run_cycles: int | None = opt()
    final_lag_cycles: int | None = opt()
    lead_axis: int | None = opt()
    max_deviation_counts: float | None = opt()
    worst_deviation_cycle: int | None = opt()
    max_velocity_step_counts_per_s: float | None = opt()
    worst_velocity_step_cycle: int | None = opt()
    commanded_max_velocity_step_counts_per_s: float | None = opt()
    max_run_deviation_counts: float | None = opt()
    worst_run_cycle: int | None = opt()
    worst_axis: int | None = opt()
    worst_axis_max_deviation_counts: float | None = opt()

    @property
    def computed(self) -> bool:
        return self.not_computed is None


class VerdictCheck(Doc):
    """One part of the requirement and what the run measured (µs for times, a count otherwise)."""

    requirement: str = ""
    measured: float | None = None
    passed: bool = False


class VerdictCulprit(Doc):
    """What to fix first: the culprits of the late cycles that share one fix, named by the biggest,
    with their share of the late time (analysis.verdict.main_culprit)."""

    kind: str | None = None
    source: str = ""  # the culprit as the culprits table names it, e.g. "servo-poller (pid 812, FIFO/RR 90)"
    more: int | None = count(omit_none=True)  # other culprits with the same fix, counted in share and total
    share: float | None = None  # of the late cycles' windows (0-1) that the fix addresses
    total_us: float | None = within(MAX_US)
    fix: str | None = None  # what to do (analysis.remedy)
    checks: list[str] = many()  # the softrt check ids that find and fix it


class Verdict(Doc):
    """Does the machine meet the cycle? The requirement (``--require``, or the seed's: no missed
    update and no period over nominal + the late threshold), each part measured, and on failure
    the main culprit with its fix (analysis.verdict; docs/run-format.md, "verdict")."""

    meets: bool | None = None  # None: nothing was measured
    requirement: str = ""
    default: bool = True  # the seed's requirement, not --require
    checks: list[VerdictCheck] = many()
    period_us: float | None = within(MAX_US)  # nominal
    threshold_us: float | None = within(MAX_US)  # the late threshold (--late-threshold)
    worst_period_us: float | None = within(MAX_US)
    missed_updates: int | None = count()
    longest_miss_run: int | None = count()
    late_cycles: int | None = count(omit_none=True)
    cycles: int | None = count()  # observed: events rarer than about 1 in this many cycles are unseen
    culprit: VerdictCulprit | None = opt()
    why_unknown: str | None = opt()  # why no culprit is named (no trace, no late cycle explained)


class Tuned(Doc):
    """A control applied (``what``, ``detail``) or not applied (``what``, ``why``)."""

    what: str | None = None
    detail: str | None = opt()
    why: str | None = opt()


class SystemChange(Doc):
    """A system setting changed for the run (session.changes.Change) and whether it was restored."""

    path: str | None = None
    before: str | None = None
    during: str | None = opt()
    why: str | None = opt()
    restored: bool | None = opt()
    verified: bool | None = opt()
    note: str | None = opt()  # why it was not restored, and the fix


class FairServer(Doc):
    """The fair server (Linux 6.12+) on the RT CPU during the run (platform.fairserver)."""

    cpu: int | None = None
    in_force: bool | None = None
    runtime_ns: int | None = count()
    period_ns: int | None = count()
    unreadable: str | None = opt()  # why the runtime is not known (then the kernel's default is assumed)


class Tuning(Doc):
    applied: list[Tuned] = many()
    not_applied: list[Tuned] = many()
    system_changes: list[SystemChange] = many()
    recovered_from_earlier_runs: list[SystemChange] = many()
    fair_server: FairServer | None = opt()  # absent on kernels without one


class Ring(Doc):
    capacity: int | None = count()
    overflows: int | None = count()


class Kept(Doc):
    """What the run keeps on disk (``samples``): the mode and its rows; a late run also its late
    cycles, their context records and the seconds of aggregates."""

    mode: str | None = None
    rows: int | None = count()
    late_cycles: int | None = count(omit_none=True)
    context_records: int | None = count(omit_none=True)
    aggregate_seconds: int | None = count(omit_none=True)


class Supervisor(Doc):
    """A checkpoint's supervisor: ``BOOT_ID/PID/START`` tells whether it still runs (store.running)."""

    pid: int | None = count()
    identity: str | None = None
    checkpoint_interval_s: float | None = None


class ThreadResult(Doc):
    """One thread of an imported cyclictest/oslat result."""

    thread: str | None = None
    cpu: int | None = None
    samples: int | None = count()
    min_us: float | None = within(MAX_US)
    mean_us: float | None = within(MAX_US)
    max_us: float | None = within(MAX_US)
    overflow: int | None = count()


class Imported(Doc):
    file: str | None = None
    sha256: str | None = None
    imported_at: str | None = None


#: Parts of a load's metric names that are not work done: its workers' CPU use and its error counts (a
#: load whose workers spin or fail every attempt has still achieved nothing).
NOT_WORK = ("cpu_pct", "error", "failure")


class LoadRun(Doc):
    """A load that ran beside the loop in ``softrt compare`` (load.base.LoadResult)."""

    name: str = ""
    backend: str | None = None
    cpus: str | None = opt()
    achieved: dict[str, float] = obj()  # metric name (its unit in the name) -> value
    duration_s: float | None = opt()
    skipped_reason: str | None = None
    command: str | None = opt()
    notes: list[str] | None = opt()
    problems: list[str] | None = opt()

    @property
    def failed(self) -> bool:
        """True when the load was meant to run (not skipped) and achieved nothing: no figure of work above
        zero, as when its worker died at once (issue 34: the disk load on Windows was shown as 0.0 MB/s)."""
        if self.skipped_reason:
            return False
        return not any(
            isinstance(v, (int, float)) and v > 0
            for k, v in self.achieved.items()
            if not any(part in k for part in NOT_WORK)
        )

    def describe(self) -> str:
        """One line for people: the load's figures, FAILED when it achieved nothing, or why it was skipped
        (compare, show and the report print it, then each of its ``problems``)."""
        if self.skipped_reason:
            return f"{self.name} skipped: {self.skipped_reason}"
        head = f"{self.name} ({self.backend or '?'})"
        if self.failed:
            return f"{head}: FAILED, it achieved nothing" + (" (see its problems)" if self.problems else "")
        return f"{head}: " + ", ".join(
            f"{k} {format_number(v, 1) if isinstance(v, (int, float)) else v}" for k, v in self.achieved.items()
        )


class RunSummary(Doc):
    """A run's summary.json."""

    schema: str = SCHEMA
    source: str | None = opt()  # an imported result's tool; softrt's own runs have none
    run_id: str = ""
    scenario: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    status: str | None = None  # one of STATUSES (None: a file that predates it, read as complete)
    partial_reason: str | None = None  # why the run is partial or failed
    elapsed_s: float | None = opt()
    mode: str | None = None  # one of MODES; None for imports
    config: Config = Config()
    host: dict[str, Any] = obj()  # host facts (platform host_facts): free-form, shown as they are
    tuning: Tuning = Tuning()
    checkpoint_at: str | None = opt()
    supervisor: Supervisor | None = opt()
    samples_error: str | None = opt()
    metrics: Metrics = flatten(Metrics)
    motion: Motion | None = opt()
    ring: Ring | None = None
    board: Board | None = None
    records_unwritten: int | None = count(omit_none=True)
    samples: Kept | None = opt()
    why_late: WhyLate | None = opt()
    verdict: Verdict | None = opt()
    check: CheckReport | None = opt()  # the check taken before the run (--check): its verdict and counts
    threads: list[ThreadResult] | None = opt()
    notes: list[str] | None = opt()
    imported: Imported | None = key("import", omit_none=True)
    loads: list[LoadRun] | None = opt()  # softrt compare: each load's placement and achieved figures
    compare_round: int | None = opt()
    compare_id: str | None = opt()  # softrt compare: the run id of the comparison's first run, on each of its runs
    watch: Watch | None = opt()  # softrt watch: the thread behind the cycles (schema.watch)
    provenance: Provenance | None = opt()  # the rig, firmware, microcode, NIC (schema.provenance)
    tail: Tail | None = opt()  # the tail model of the late series (schema.tail; absent before issue 33)

    @classmethod
    def read(cls, doc: object, where: object = "summary.json") -> RunSummary:
        """Check *doc* (a parsed summary.json): its schema version, then every field."""
        if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("softrt.summary/"):
            schema = doc.get("schema") if isinstance(doc, dict) else None
            raise ConfigError(
                f"{printable(where)} is not a softrt summary (schema {printable(repr(schema))[:60]})",
                hint="give a run directory written by softrt run, compare or import",
            )
        check_version(doc, where)
        summary = cls.from_dict(doc, where)
        summary.validate(where)
        return summary

    def validate(self, where: object = "summary.json") -> None:
        """Raise ConfigError for a value outside its choices (the types are checked by from_dict)."""
        if not is_safe_name(self.run_id) or len(self.run_id) > 2 * MAX_NAME:
            raise _bad(
                where, "run_id", f"must be a name of letters, digits, '.', '_' and '-', got {show_value(self.run_id)}"
            )
        for name, value, choices in (
            ("status", self.status, STATUSES),
            ("mode", self.mode, MODES),
            ("source", self.source, SOURCES),
        ):
            if value is not None and value not in choices:
                raise _bad(where, name, f"must be one of {', '.join(choices)}, got {show_value(value)}")

    # -- what readers ask ---------------------------------------------------------------------
    @property
    def origin(self) -> str:
        """ "softrt", or the tool an imported result came from."""
        return self.source or "softrt"

    @property
    def state(self) -> str:
        """The status, "complete" for a file that predates the field."""
        return self.status or "complete"

    @property
    def running(self) -> bool:
        """A checkpoint: the summary-so-far of a run that was going when it was written."""
        return self.status == "running"

    @property
    def hostname(self) -> str | None:
        name = self.host.get("hostname")
        return name if isinstance(name, str) else None

    @property
    def period_ns(self) -> int | None:
        return self.config.period_ns

    @property
    def motion_impact(self) -> Motion | None:
        """The motion impact when it was computed."""
        return self.motion if self.motion is not None and self.motion.computed else None


def check_version(doc: dict[str, Any], where: Path | str | object) -> None:
    """Raise ConfigError for a summary of a newer major version than this softrt reads."""
    schema = str(doc.get("schema", ""))
    try:
        major = int(schema.split("/", 1)[1].split(".", 1)[0])
    except (IndexError, ValueError):
        raise ConfigError(
            f"{printable(where)}: unreadable summary schema {printable(repr(schema))[:60]}",
            hint="expected softrt.summary/<major>",
        ) from None
    if major > SUMMARY_MAJOR:
        raise ConfigError(
            f"{printable(where)} was written by a newer softrt (summary schema {printable(schema)[:60]}; "
            f"this softrt reads softrt.summary/{SUMMARY_MAJOR})",
            hint="upgrade softrt to read it",
        )


def _bad(where: object, field: str, problem: str) -> ConfigError:
    return ConfigError(f"{printable(where)}: {field} {problem}", hint=_HINT)
