"""What softrt shows and serves while a run goes (CLI layer): a live view, progress lines, metrics.

On a terminal, a rich ``Live`` view (https://rich.readthedocs.io/en/stable/live.html) redrawn at
most ``LIVE_EVERY_S``: elapsed and remaining time, cycles, period p99/p99.99/max, missed updates,
late cycles, the worst cycle so far and when, and a small histogram of the period. Without a
terminal (CI logs, ``nohup`` soak runs) one plain line early and then every ``PLAIN_EVERY_S``;
``--quiet``: nothing. With ``--metrics-port``, a Prometheus endpoint (:mod:`softrt.metrics`)
bound before the run starts and closed when the command ends.

Everything here runs in the supervisor's main thread, from its progress callback (after every
drain of the ring, 20 times a second), and reads the streaming pass without changing it; the
view is rebuilt a few times a second only, so the supervisor keeps draining (docs/metrics.md has
the cost).
"""

from __future__ import annotations

import dataclasses
import math
import socket
import time

import click
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from .. import metrics
from ..metrics import at_or_below, snap_ns
from ..schema.summary import RunSummary
from ..session import interrupts
from ..units import format_number as num
from .options import WatchOptions
from .render import cleaned, emit, progress_line

LIVE_EVERY_S = 0.25  # the live view's redraws (4 per second)
PLAIN_FIRST_S = 1.0  # the first plain progress line, once there are figures
PLAIN_EVERY_S = 10.0
LINGER_POLL_S = 0.1  # how soon a Ctrl-C ends --metrics-linger
PUBLISH_EVERY_S = 1.0  # a new copy for the metrics endpoint: when the streaming pass moved, and at least this often
#: Rows of the live period histogram: bounds as multiples of the nominal period (250 µs: 200, 260,
#: 275, 300, 500 µs, 1 ms, 5 ms).
HIST_FACTORS = (0.8, 1.04, 1.1, 1.2, 2.0, 4.0, 20.0)
BAR_WIDTH = 32


def clock(seconds: float | None) -> str:
    """``h:mm:ss`` (a 72 h run reads 72:00:00)."""
    if seconds is None:
        return "-"
    s = max(int(seconds), 0)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{num(ns / 1e3, 1)} µs"


def period_rows(stats, period_ns: int) -> list[tuple[str, int, int | None]]:
    """(label, count, upper bound ns or None) of each row of the live period histogram (counts at
    softrt histogram edges, :func:`softrt.metrics.snap_ns`)."""
    hist = stats.hist["period"]
    bounds = [snap_ns(round(f * period_ns)) for f in HIST_FACTORS]
    cum = at_or_below(hist, tuple(bounds))
    names = [num(f * period_ns / 1e3, 0) for f in HIST_FACTORS]
    rows = [(f"≤ {names[0]} µs", cum[0], bounds[0])]
    rows += [(f"{a}–{b} µs", hi - lo, bound) for a, b, lo, hi, bound in zip(names, names[1:], cum, cum[1:], bounds[1:])]
    rows.append((f"> {names[-1]} µs", hist.n - cum[-1], None))
    return rows


def live_view(p, title: str = "softrt run", final: RunSummary | None = None) -> Group:
    """The live view of progress *p* (``session.drain.Progress``); with *final*, the run's last frame:
    the summary's own counts (cycles, missed updates as the board counted them, late cycles)."""
    stats, config, snap = p.stats, p.config, p.snapshot
    period = stats.hist["period"]
    p99, p9999 = period.percentiles((99.0, 99.99)) if period.n else (None, None)
    rule = stats.rule  # softrt's one late rule (analysis.cycles): the summary's and Prometheus' count
    cycles, missed, late = p.cycles, stats.counters["missed_updates"], stats.counters["late_cycles"]
    overflows, elapsed_s = p.ring_overflows, p.elapsed_s
    if final is not None:
        m = final.metrics
        cycles, late = m.cycles or 0, m.late_cycles
        missed = max(missed, (m.misses.missed_updates if m.misses is not None else None) or 0)
        overflows = final.ring.overflows if final.ring is not None and final.ring.overflows is not None else overflows
        elapsed_s = final.elapsed_s if final.elapsed_s is not None else elapsed_s
    where = f" · CPU {config.cpu}" if config.cpu is not None else ""
    scenario = f" · {config.scenario}" if config.scenario != "run" else ""
    state = f" · {final.state}" if final is not None else ""
    head = Text(f"{title}{scenario} · {p.run_id}{where}{state}", style="bold", no_wrap=True)
    left = max(p.duration_s - elapsed_s, 0.0)
    lines = [
        f"elapsed {clock(elapsed_s)} of {clock(p.duration_s)} ({clock(left)} left)   cycles {cycles:,}",
        f"period  p99 {_us(p99)}   p99.99 {_us(p9999)}   max {_us(period.max)}",
        f"missed updates {missed:,}   late cycles {'-' if late is None else format(late, ',')} (period > "
        f"{num(rule.bound_ns / 1e3, 1)} µs, latency > {num(rule.threshold_ns / 1e3, 1)} µs or a miss)   "
        f"ring overflows {overflows:,}",
    ]
    if snap is not None and snap.worst_seq is not None:
        lines.append(
            f"worst cycle #{snap.worst_seq:,} at {clock(snap.worst_at_s)} (period {_us(stats.worst_period_ns)})"
        )
    body = Text("\n".join(lines), no_wrap=True)
    if not period.n:  # the streaming pass takes its first batch after about a second
        return Group(head, body)
    if missed or late:
        body.stylize("yellow", body.plain.index("missed"), body.plain.index("   ring"))
    # Plain text, not a rich Table: a table costs ~10 ms to render, this 0.5 ms (4 redraws a second).
    rows = period_rows(stats, config.period_ns)
    top = max(n for _, n, _ in rows)
    label_w = max(len(label) for label, _, _ in rows)
    count_w = max(len(f"{n:,}") for _, n, _ in rows)
    late_bound_ns = snap_ns(rule.bound_ns)  # a bar is green up to the histogram edge that holds the bound
    hist = Text("period histogram", style="dim", no_wrap=True)
    for label, n, upper in rows:
        # Log-scaled bars: one late cycle among millions still shows.
        width = 0 if n == 0 else max(1, round(BAR_WIDTH * math.log10(1 + n) / math.log10(1 + top)))
        hist.append(f"\n{label:>{label_w}} ", style="dim")
        hist.append(f"{n:>{count_w},} ")
        hist.append("█" * width, style="green" if upper is not None and upper <= late_bound_ns else "red")
    return Group(head, body, hist)


class Watch:
    """The live view, progress lines and metrics endpoint of one command (``with Watch(...) as w``).

    Created before anything starts: the metrics port is bound here, so a port that is taken or an
    address that is not this machine's is bad input (ConfigError, exit 2) before a run begins.
    """

    def __init__(self, err: Console, options: WatchOptions, title: str = "softrt run") -> None:
        self.err, self.title = err, title
        self.mode = "quiet" if options.quiet else "live" if err.is_terminal else "plain"
        self.server = (
            metrics.MetricsServer(options.metrics_addr, options.metrics_port)
            if options.metrics_port is not None
            else None
        )
        self.linger_s = options.metrics_linger_ns / 1e9
        self.host = socket.gethostname()
        self.live: Live | None = None
        self._latest: dict[str, object] = {}  # run id -> its Progress (the last one seen)
        self._drawn = self._published = -math.inf
        self._published_cycles = -1
        self._next_line_s = PLAIN_FIRST_S

    def __enter__(self) -> Watch:
        if self.mode == "live":
            self.live = Live(Text("arming…", style="dim"), console=self.err, auto_refresh=False, transient=True)
            self.live.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if self.live is not None:
            self.live.stop()
        if self.server is None:
            return
        if exc_type is not None or not self.linger_s:
            self.close()
            return
        # --metrics-linger: once the command has printed its result and returned its status (click
        # closes its context then), serve the final state a while longer; outside a command the
        # caller calls linger() itself.
        ctx = click.get_current_context(silent=True)
        if ctx is not None:
            ctx.call_on_close(self.linger)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    def linger(self) -> None:
        """Keep serving the final figures for ``--metrics-linger`` (a scraper's next visits record the
        run's end state), then close; Ctrl-C (or SIGTERM) ends the wait at once."""
        if self.server is None:
            return
        try:
            if self.linger_s > 0:
                emit(
                    self.err,
                    f"softrt: serving the final metrics at {self.server.url} for {self.linger_s:g} s "
                    "(--metrics-linger; Ctrl-C stops)",
                    soft_wrap=True,
                )
                end = time.monotonic() + self.linger_s
                with interrupts.deferred(then_ignore=True):  # a Ctrl-C ends the wait, never the exit status
                    seen = interrupts.requested()
                    while time.monotonic() < end and interrupts.requested() == seen:
                        time.sleep(min(LINGER_POLL_S, max(end - time.monotonic(), 0.0)))
        finally:
            self.close()

    def say(self, message: str) -> None:
        """A line of what is happening (compare's "round 1/2: tuned"), unless quiet."""
        if self.mode != "quiet":
            emit(self.err, message, markup=False)  # (a scenario's name is no markup)

    def on_progress(self, p) -> None:
        """The run's progress callback (``session.run.run(on_progress=...)``)."""
        if p.config is None or p.stats is None:
            return
        if self.server is not None and not self._latest:
            # Said once the loop runs, not when bound: bad input found by run() stays one line.
            emit(self.err, f"softrt: serving metrics at {self.server.url}", soft_wrap=True)
        if self._latest.get(p.run_id) is not p:  # a new run (compare): show it at once, line early
            self._latest[p.run_id] = p
            self._drawn = self._published = -math.inf
            self._published_cycles = -1
            self._next_line_s = PLAIN_FIRST_S
        now = time.monotonic()
        fresh = p.stats.counters["cycles"] != self._published_cycles  # a batch came through the pass
        if self.server is not None and (fresh or now - self._published >= PUBLISH_EVERY_S):
            self._published, self._published_cycles = now, p.stats.counters["cycles"]
            self.server.publish(metrics.view_of(p, self.host))
        if self.live is not None and now - self._drawn >= LIVE_EVERY_S:
            self._drawn = now
            self.live.update(cleaned(live_view(p, self.title)), refresh=True)
        elif self.mode == "plain" and p.elapsed_s >= self._next_line_s and p.stats.hist["period"].n:
            self._next_line_s = (p.elapsed_s // PLAIN_EVERY_S + 1) * PLAIN_EVERY_S
            scenario = f"{p.config.scenario}: " if p.config.scenario != "run" else ""
            emit(self.err, f"{self.title}: {scenario}{progress_line(p)}", soft_wrap=True, markup=False)

    def finished(self, summary: RunSummary) -> None:
        """A run ended (stored, *summary* written): serve its final figures and state."""
        p = self._latest.get(summary.run_id)
        if self.server is not None and p is not None:
            why = summary.why_late
            view = metrics.view_of(
                p,
                self.host,
                state=summary.state,
                ring_overflows=summary.ring.overflows if summary.ring is not None else None,
                culprits=why.culprits if why is not None and why.on else None,
            )
            # The board's own count when the ring dropped records (session.summary.reconcile_misses): never fewer.
            misses = summary.metrics.misses
            board = (misses.missed_updates if misses is not None else None) or 0
            self.server.publish(dataclasses.replace(view, missed_updates=max(view.missed_updates, board)))
        if self.live is not None and p is not None:  # the last frame: the final figures, not the last drain's
            self.live.update(cleaned(live_view(p, self.title, final=summary)), refresh=True)
