"""The documents a watched thread's summary holds (layer 5, session): its configuration and its
``watch`` block (schema.watch), built from what :mod:`.watch` measured (docs/watch.md).

Split from :mod:`.watch`; *w* is its ``_Watched`` thread, *session* its ``_Session``.
"""

from __future__ import annotations

from ..analysis.timeline import policy
from ..schema.summary import Config
from ..schema.text import printable
from ..schema.watch import Preemptor, Watch, WatchedThread

#: The configuration keys a watch's own options set, in config.json's order (the rest of a
#: RunConfig, the loop's and the device's, does not apply to a thread softrt did not start).
WATCH_CONFIG_KEYS = (
    "period_ns",
    "duration_ns",
    "cpu",
    "priority",
    "scenario",
    "trace",
    "trace_mode",
    "late_threshold_ns",
    "keep_late",
    "samples",
    "out_dir",
)


def config_doc(w) -> Config:
    """The summary's configuration (and config.json): the watch's run configuration, its own keys only."""
    full = w.run_config.document()
    return Config.build(**{name: getattr(full, name) for name in WATCH_CONFIG_KEYS})


def watch_block(session, w) -> Watch:
    """The summary's ``watch`` block: the thread, how it waits, its period, what preempted it."""
    c, t = w.cycles, w.task
    expected = session.config.period_ns
    observed = w.observed_ns
    agrees = None
    if expected is not None and observed is not None:
        agrees = abs(observed - expected) <= max(expected // 100, 1_000)
    preemptors = sorted(c.preemptors.values(), key=lambda p: (-p.total_ns, p.pid))
    return Watch.build(
        thread=WatchedThread.build(
            pid=t.pid,
            tid=t.tid,
            comm=printable(t.comm),
            policy=t.policy_name,
            priority=t.rt_priority,
            cpus_allowed=str(t.allowed),
        ),
        waits=c.kind,
        timers=dict(c.timers),
        timer_slack_us=round(c.timer_slack_ns / 1e3, 3),
        returns_seen_by=c.back,
        sleeps=c.sleeps,
        woken_early=c.woken_early,
        period_expected_us=None if expected is None else expected / 1e3,
        period_observed_us=None if observed is None else observed / 1e3,
        period_agrees=agrees,
        cpus=sorted(c.cpus),
        migrations=c.migrations,
        preemptions=c.preemptions,
        preempted_us=round(c.preempted_ns / 1e3, 3),
        longest_preemption_us=round(c.longest_preemption_ns / 1e3, 3),
        preemptors=[
            Preemptor.build(
                comm=printable(p.comm),
                pid=p.pid,
                detail=policy(p.prio) or None,
                times=p.times,
                total_us=round(p.total_ns / 1e3, 3),
                worst_us=round(p.worst_ns / 1e3, 3),
            )
            for p in preemptors[:20]
        ],
        exited_at_s=None if w.exited_ns is None else round(max(w.exited_ns - session.t0_ns, 0) / 1e9, 3),
    )
