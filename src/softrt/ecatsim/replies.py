"""What the simulator's control socket answers, as documents (ecatsim layer).

Every control request (``softrt ecat-sim --control``, :mod:`.control`) is answered with one JSON
object: :class:`Refusal` (``{"ok": false, "error": ...}``) when it is refused, else the
simulator's state, :class:`SimStats` (``ok`` true, its counters and every slave). The keys are
declared here once (docs/ethercat.md, "Against the simulator", lists the requests), so a reader
keys on fields and a reply is checked as it is built (:class:`~softrt.schema.doc.Doc`). Times are
µs, rates ppm: the units of the reports. A slave's DC keys exist only on a slave with distributed clocks, its drive keys
only on a drive (:meth:`Doc.build` writes the keys given, in their order).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..ethercat.al import state_name
from ..ethercat.nsstat import NsStat
from ..schema.doc import Doc, count, many, obj, opt
from .dc import Sync0Watch
from .slave import DriveApp


class Refusal(Doc):
    """A control request refused: nothing changed."""

    ok: bool = False
    error: str | None = None


class PhaseUs(Doc):
    """Where process-data frames arrived in the SYNC0 cycle, µs."""

    min: float | None = None
    max: float | None = None
    mean: float | None = None


class Sync0Counts(Doc):
    """The process-data frames a slave saw against its SYNC0 cycle (:class:`~.dc.Sync0Watch`)."""

    frames: int | None = count()
    cycles_without_frame: int | None = count()
    frames_in_same_cycle: int | None = count()
    phase_us: PhaseUs | None = None


class SlaveClock(Doc):
    """A slave's distributed clock: its drift, the correction its control loop applies, its 0x092C."""

    drift_ppm: float | None = None
    correction_ppm: float | None = None
    diff_ns: float | None = None
    compares: int | None = count()
    sync0: Sync0Counts | None = None


class AxisState(Doc):
    """One axis of a drive (CiA 402)."""

    drive_state: str | None = None
    position_counts: int | None = None
    target_counts: int | None = None
    error_code: int | None = count()
    drive_faults: int | None = count()


class SlaveStats(Doc):
    """One slave: its AL state and counters; with DC its clock; a drive also its axes, PDOs and CoE."""

    position: int | None = count()
    name: str | None = None
    al_status: int | None = count()
    al_state: str | None = None
    al_code: int | None = count()
    watchdog_expiries: int | None = count()
    mailbox_repeats: int | None = count()
    dc: SlaveClock | None = opt()
    drive_state: str | None = opt()
    statusword: int | None = count(omit_none=True)
    position_counts: int | None = opt()
    target_counts: int | None = opt()
    error_code: int | None = count(omit_none=True)
    drive_faults: int | None = count(omit_none=True)
    following_error_counts: int | None = opt()
    cycles: int | None = count(omit_none=True)
    cycle_ns: int | None = count(omit_none=True)
    sdo_requests: int | None = count(omit_none=True)
    axes: list[AxisState] = many()
    pdo: dict[str, list[str]] = obj()  # what the master left assigned and mapped (``0x1C12``: [``0x1600``])
    coe: dict[str, int] | None = opt()  # what the CoE server was asked (:class:`~.coe.CoeCounters`)


class SimStats(Doc):
    """The simulator's counters and every slave (the answer to every request it takes)."""

    ok: bool = True
    frames: int | None = count()
    replies: int | None = count()
    pd_frames: int | None = count()
    injected: dict[str, int] = obj()  # faults injected so far, by kind
    mute_at: str | None = None  # when the segment falls silent (control.MUTE_EVENTS; "off": never)
    muted: int | None = count()
    answer_us: dict[str, float] = obj()  # min/max/mean/p50/p99; empty before any process data
    wait_us: dict[str, float] = obj()
    slaves: list[SlaveStats] = many()


def sync0_counts(watch: Sync0Watch) -> Sync0Counts:
    """A slave's :class:`~.dc.Sync0Watch` as its reply."""
    phase, n = watch.phase, watch.phase.n
    return Sync0Counts(
        frames=n,
        cycles_without_frame=watch.cycles_without_frame,
        frames_in_same_cycle=watch.frames_in_same_cycle,
        phase_us=PhaseUs(min=phase.min / 1e3, max=phase.max / 1e3, mean=round(phase.total / n / 1e3, 2)) if n else None,
    )


def sim_stats(sim: Any) -> SimStats:
    """The state of :class:`~.sim.Simulator` *sim*: its counters and every slave."""
    return SimStats.build(
        ok=True,
        frames=sim.counters.frames,
        replies=sim.counters.replies,
        pd_frames=sim.faults.pd_frames,
        injected=dict(sim.faults.injected),
        mute_at=sim.mute_at,
        muted=sim.counters.muted,
        answer_us=_in_us(sim.counters.answer),
        wait_us=_in_us(sim.counters.wait),
        slaves=[_slave(esc, app) for esc, app in zip(sim.escs, sim.apps)],
    )


def _slave(esc: Any, app: object) -> SlaveStats:
    keys: dict[str, Any] = {}
    if esc.desc.dc:
        clock = esc.dc.clock
        keys["dc"] = SlaveClock(
            drift_ppm=clock.drift_ppb / 1000,
            correction_ppm=clock.correction_ppb / 1000,
            diff_ns=round(clock.diff_mean_ns, 1),
            compares=clock.compares,
            sync0=sync0_counts(esc.dc.sync0),
        )
    if isinstance(app, DriveApp):
        d = app.drive
        keys.update(
            drive_state=d.state.name,
            statusword=d.statusword,
            position_counts=d.position_counts,
            target_counts=d.target,
            error_code=d.error_code,
            drive_faults=d.faults,
            following_error_counts=d.following_error,
            cycles=app.cycles,
            cycle_ns=app.cycle_ns(),
            sdo_requests=app.coe.requests if app.coe else 0,
            # every axis (axis 0 is also the fields above), the PDOs the master left assigned and
            # mapped, and what the CoE server was asked
            axes=[
                AxisState(
                    drive_state=a.state.name,
                    position_counts=a.position_counts,
                    target_counts=a.target,
                    error_code=a.error_code,
                    drive_faults=a.faults,
                )
                for a in app.drives
            ],
            pdo=app.pdo.report(),
            coe=dataclasses.asdict(app.coe.counters) if app.coe else None,
        )
    return SlaveStats.build(
        position=esc.position,
        name=esc.desc.name,
        al_status=esc.al.status,
        al_state=state_name(esc.al.status),
        al_code=int(esc.al.code),
        watchdog_expiries=esc.watchdog_expiries,
        mailbox_repeats=esc.mailbox_repeats,
        **keys,
    )


def _in_us(stat: NsStat) -> Mapping[str, Any]:
    """A statistic's min/max/mean/p50/p99 in µs (empty without samples)."""
    figures = stat.summary_us()
    return {} if figures is None else figures.to_dict()
