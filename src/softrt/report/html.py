"""The report page: one self-contained HTML file (report layer; pure string building).

No JavaScript, no external resource: figures are inline ``data:`` images and the page carries a
Content-Security-Policy that forbids fetching anything, so it opens offline, from a mail
attachment, years later. Every value from a run is escaped.
"""

from __future__ import annotations

import base64
from datetime import datetime, timezone
from html import escape

from ..analysis.verdict import verdict_lines, verdict_of
from ..schema.check import Status
from ..schema.summary import RunSummary
from ..schema.why_late import TraceInfo
from ..units import format_number as num
from ..units import format_time_ns
from .compare import fmt_us as _us
from .compare import side_by_side
from .compare import swatch as _swatch
from .load import TOOL_MEANING, RunView
from .plots import Plot

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
#: Rows shown of the long tables (the rest: "… and N more", with where to find them).
CULPRIT_ROWS = 15
WORST_ROWS = 10
CAUSES_SHOWN = 4
FINDING_ROWS = 10

_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 0 auto;
       max-width: 1100px; padding: 0 16px 48px; }
h1 { margin: 24px 0 4px; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 36px; }
h3 { margin: 18px 0 6px; } .meta { color: #666; margin: 0 0 12px; }
table { border-collapse: collapse; margin: 6px 0 10px; } td, th { padding: 2px 10px; text-align: right; }
th { border-bottom: 1px solid #999; font-weight: 600; } td:first-child, th:first-child { text-align: left; }
table.facts td { text-align: left; vertical-align: top; }
table.facts td:first-child { color: #666; white-space: nowrap; }
table.facts td:last-child { word-break: break-word; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 6px;
          vertical-align: -1px; }
.note { background: #fff8e1; border-left: 4px solid #f0b400; padding: 6px 10px; margin: 8px 0; }
.broken { background: #fdecea; border-left-color: #d62728; }
.na { color: #666; font-size: 13px; }
.bad { color: #b71c1c; font-weight: 600; } .good { color: #1b5e20; font-weight: 600; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 8px 28px; }
figure { margin: 18px 0 28px; } figure img { width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #444; font-size: 13px; margin-top: 4px; } code { font-size: 12px; }
#side-table { table-layout: fixed; width: 100%; } #side-table th:first-child { width: 190px; }
#side-table th, #side-table td { overflow-wrap: anywhere; vertical-align: top; }
#side-table td.text { font-size: 12px; } .more { color: #666; font-size: 13px; }
"""


def _when(iso: object) -> str:
    """ISO 8601 UTC as 'YYYY-MM-DD HH:MM:SS' (the table says UTC once)."""
    text = str(iso or "–")
    return text.replace("T", " ").removesuffix("+00:00")


def _runs_table(runs: list[RunView]) -> str:
    rows = []
    for i, r in enumerate(runs):
        s = r.summary
        period = f"{s.period_ns / 1e3:g} µs" if s.period_ns else "–"
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{c}</td>"
                for c in (
                    _swatch(i) + f'<a href="#run-{escape(r.run_id)}">{escape(r.run_id)}</a>',
                    escape(r.source),
                    escape(s.hostname or "–"),
                    escape(s.scenario or "–"),
                    escape(_when(s.started_at)),
                    escape(s.mode or "–"),
                    escape(s.status or "–"),
                    f"{s.metrics.cycles or 0:,}",
                    period,
                )
            )
            + "</tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("run", "source", "host", "scenario", "started (UTC)", "mode", "status", "cycles / samples", "period")
    )
    return f'<table id="runs-table"><tr>{head}</tr>{"".join(rows)}</table>'


def _seed_table(s: RunSummary) -> str:
    if s.origin != "softrt":
        return (
            f'<p class="na">The seed\'s period/process table does not apply: {escape(s.origin)} measures no '
            "control cycle.</p>"
        )
    m = s.metrics
    rows = "".join(
        f"<tr><td>{label}</td>" + "".join(f"<td>{_us(x)}</td>" for x in (st.mean, st.max, st.min)) + "</tr>"
        for label, st in (("Timer int. period", m.period_us), ("Timer int. process", m.process_us))
    )
    return f'<table class="seed"><tr><th>cycle (µs)</th><th>mean</th><th>max</th><th>min</th></tr>{rows}</table>'


def _percentile_table(s: RunSummary) -> str:
    """Each series' bad tail: the high percentiles and max of period, latency and process; the low
    percentiles and min of slack (negative: an overrun), under a header of its own."""
    rows = []
    m = s.metrics
    for label, st in (("period", m.period_us), ("latency", m.latency_us), ("process", m.process_us)):
        values = (st.p50, st.p99, st.p99_9, st.p99_99, st.max)
        if any(v is not None for v in values):
            rows.append(f"<tr><td>{label}</td>" + "".join(f"<td>{_us(v)}</td>" for v in values) + "</tr>")
    st = m.slack_us
    low = (st.p1, st.p0_1, st.p0_01) if st.low_tail else (None, None, None)  # older summaries: unknown
    if st.min is not None:
        rows.append(
            "<tr><th>slack (µs)</th><th>p50</th><th>p1</th><th>p0.1</th><th>p0.01</th><th>min</th></tr>"
            "<tr><td>slack</td>" + "".join(f"<td{_neg(v)}>{_us(v)}</td>" for v in (st.p50, *low, st.min)) + "</tr>"
        )
    if not rows:
        return '<p class="na">No distribution recorded.</p>'
    head = "".join(f"<th>{c}</th>" for c in ("p50", "p99", "p99.9", "p99.99", "max"))
    return f'<table class="pct"><tr><th>distribution (µs)</th>{head}</tr>{"".join(rows)}</table>'


def _neg(v: float | None) -> str:
    return ' class="bad"' if v is not None and v < 0 else ""


def _banner(runs: list[RunView]) -> str:
    """The verdict of each run first (the summary's ``verdict`` block; judged now for a run stored
    before softrt wrote one): meets or fails the cycle, the main culprit and its fix."""
    out = []
    for i, r in enumerate(runs):
        v = verdict_of(r.summary)
        if v is None:
            continue
        head, *rest = verdict_lines(v, state=r.summary.state, tail=r.summary.tail)
        cls = {True: "good", False: "bad"}.get(v.meets, "na")
        more = "".join(f"<br>{escape(line.strip())}" for line in rest)
        out.append(
            f'<p class="verdict" data-meets="{str(v.meets).lower()}">{_swatch(i)}{escape(r.label)}: '
            f'<span class="{cls}">{escape(head)}</span>{more}</p>'
        )
    return f'<div id="verdict">{"".join(out)}</div>' if out else ""


def _misses(s: RunSummary) -> str:
    out = []
    m = s.metrics.misses
    if m is not None:
        cls = "bad" if m.missed_updates else "good"
        out.append(
            f'<p><span class="{cls}">Missed updates: {m.missed_updates or 0:,}</span> '
            f"(in {m.cycles_with_miss or 0:,} cycles; longest run {m.longest_miss_run or 0}); "
            f"overruns: {m.overruns or 0:,}; device errors: {m.device_errors or 0:,}; "
            f"records missing: {s.metrics.records_missing or 0:,}</p>"
        )
    motion = s.motion_impact
    if motion is not None and motion.max_deviation_counts is not None:
        out.append(
            f"<p>Motion impact (axis 0): max deviation {num(motion.max_deviation_counts, 1)} counts "
            f"(one miss run alone: {num(motion.max_run_deviation_counts or 0, 1)}); max velocity step "
            f"{num(motion.max_velocity_step_counts_per_s or 0, 0)} counts/s, the profile itself "
            f"{num(motion.commanded_max_velocity_step_counts_per_s or 0, 0)}; final lag "
            f"{motion.final_lag_cycles or 0:,} cycles</p>"
        )
    if s.state != "complete":
        reason = s.partial_reason or ("a checkpoint, the figures so far" if s.running else "no reason recorded")
        out.append(f'<p class="bad">{s.state.upper()}: {escape(reason)}</p>')
    return "".join(out)


def _result_card(i: int, r: RunView) -> str:
    s = r.summary
    notes = "".join(f"<li>{escape(n)}</li>" for n in [*(s.notes or []), *r.notes])
    meaning = r.meaning
    return (
        f'<div class="card" id="result-{escape(r.run_id)}"><h3>{_swatch(i)}{escape(r.label)}</h3>'
        f"{_seed_table(s)}{_percentile_table(s)}{_misses(s)}"
        f'<p class="na">{escape(meaning)}</p>' + (f'<ul class="na">{notes}</ul>' if notes else "") + "</div>"
    )


def _why_late(i: int, r: RunView) -> str:
    """ "Why cycles were late" of one run: culprits over the run and the worst cycles (issue 9)."""
    head = f"<h3>{_swatch(i)}{escape(r.label)}</h3>"
    why = r.summary.why_late
    if why is None:
        return head + '<p class="na">No trace was recorded with this run.</p>'
    if not why.on:
        return head + f'<p class="note">Tracing {escape(str(why.tracing))}: the late cycles are not explained.</p>'
    trace = why.trace or TraceInfo()
    cost = (
        f" The trace reader used {num(trace.consumer_cpu_s, 2)} s CPU over {num(trace.traced_s, 1)} s."
        if trace.consumer_cpu_s is not None and trace.traced_s
        else ""
    )
    out = [
        head,
        f'<p class="na">Trace of CPU {why.rt_cpu}: {why.late_cycles or 0:,} late cycles of '
        f"{why.cycles or 0:,} (threshold {why.threshold_us or 0:g} µs); {num(why.explained_us or 0, 1)} of "
        f"{num(why.window_us or 0, 1)} µs of their windows explained; {why.events or 0:,} events, "
        f"{why.lost_events or 0:,} lost.{cost}</p>",
    ]
    if why.culprits:
        rows = "".join(
            f"<tr><td>{escape(str(c.kind))}</td><td>{escape(c.source)}</td><td>{c.cycles or 0:,}</td>"
            f"<td>{num(c.total_us or 0, 1)}</td><td>{num(c.worst_us or 0, 1)}</td></tr>"
            for c in why.culprits[:CULPRIT_ROWS]
        )
        out.append(
            '<table class="culprits"><tr><th>kind</th><th>source</th><th>late cycles</th><th>total µs</th>'
            f"<th>worst µs</th></tr>{rows}</table>"
            + _more(len(why.culprits), CULPRIT_ROWS, "sources", f"softrt show {r.run_id} --json")
        )
    rows = []
    for cyc in (why.worst or [])[:WORST_ROWS]:
        causes = "; ".join(
            f"{escape(c.label)} {num(c.duration_us, 1)} µs ({num(c.share * 100, 0, grouping=False)} %)"
            + (f", steal +{num(c.steal.steal_ms or 0, 1)} ms" if c.steal is not None else "")
            for c in cyc.causes[:CAUSES_SHOWN]
        )
        if len(cyc.causes) > CAUSES_SHOWN:
            causes += f"; and {len(cyc.causes) - CAUSES_SHOWN} more"
        period = "–" if cyc.period_us is None else num(cyc.period_us, 1)
        latency = "–" if cyc.latency_us is None else num(cyc.latency_us, 1)
        rows.append(
            f"<tr><td>{cyc.seq:,}</td><td>{period}</td><td>{latency}</td>"
            f"<td>{cyc.missed}</td><td>{num(cyc.window.duration_us, 1)}</td>"
            f'<td style="text-align:left">{causes or "–"}; unexplained {num(cyc.unexplained_us, 1)} µs'
            "</td></tr>"
        )
    if rows:
        out.append(
            '<table class="worst"><tr><th>cycle</th><th>period µs</th><th>latency µs</th><th>missed</th>'
            f'<th>window µs</th><th style="text-align:left">causes</th></tr>{"".join(rows)}</table>'
            + _more(
                len(why.worst or []), WORST_ROWS, "late cycles kept with their causes", f"softrt show {r.run_id} --json"
            )
        )
    return "".join(out)


def _more(total: int, shown: int, what: str, where: str) -> str:
    """ "… and N more" under a table cut at *shown* rows (nothing when it was not cut)."""
    if total <= shown:
        return ""
    return (
        f'<p class="more">… and {total - shown:,} more {escape(what)} ({shown:,} of {total:,} shown; all in '
        f"<code>{escape(where)}</code>)</p>"
    )


def config_rows(config: dict) -> list[tuple[str, str]]:
    """The run's configuration for people: times in their unit (``max_duration`` 7 d, not
    ``max_duration_ns`` 604800000000000), the motion profile and empty values left out."""
    out = []
    for k, v in config.items():
        if k in ("motion", "extra") or v in (None, {}, []):
            continue
        if k.endswith("_ns") and isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append((k[:-3], format_time_ns(v)))
        else:
            out.append((str(k), str(v)))
    return out


def _facts(i: int, r: RunView) -> str:
    s = r.summary
    rows = "".join(f"<tr><td>{escape(str(k))}</td><td>{escape(str(v))}</td></tr>" for k, v in s.host.items())
    rows += "".join(
        f"<tr><td>config.{escape(name)}</td><td>{escape(value)}</td></tr>"
        for name, value in config_rows(s.config.to_dict())
    )
    check = r.check
    if check:
        c = check.report
        if c is not None:
            verdict = c.verdict or ("ready" if c.ready else "not ready")
            check_html = f'<p>softrt check: <span class="{"good" if c.ready else "bad"}">{escape(verdict)}</span></p>'
            if c.counts:
                check_html += '<p class="na">' + escape(", ".join(f"{k}: {v}" for k, v in c.counts.items())) + "</p>"
        else:
            check_html = ""
        if check.unreadable:
            check_html += f'<p class="bad">{escape(check.unreadable)}</p>'
        # The full report (check.json) has the findings: list what failed or warned, worst first.
        order = {Status.FAIL: 0, Status.WARN: 1}
        findings = c.findings if c is not None else []
        found = sorted((f for f in findings if f.status in order), key=lambda f: order[f.status])
        items_check = [
            f"<li><b>{escape(f.status.value)}</b> ({escape(f.severity.value)}) "
            f"{escape(f.title)}: {escape(f.summary)}"
            + (f" — fix: <code>{escape(f.fix)}</code>" if f.fix else "")
            + "</li>"
            for f in found[:FINDING_ROWS]
        ]
        if items_check:
            check_html += f"<ul>{''.join(items_check)}</ul>" + _more(
                len(found), FINDING_ROWS, "findings", f"{r.path}/check.json"
            )
    else:
        check_html = '<p class="na">softrt check: no check was taken with this run.</p>'
    t = s.tuning
    items = [f"<li>applied: {escape(str(a.what))} — {escape(str(a.detail))}</li>" for a in t.applied]
    items += [f'<li class="bad">not applied: {escape(str(a.what))} — {escape(str(a.why))}</li>' for a in t.not_applied]
    items += [
        f"<li>system change: {escape(str(c.path))} {escape(str(c.before))} → "
        f"{escape(str(c.during))} ({'restored' if c.restored else 'NOT RESTORED'})</li>"
        for c in t.system_changes
    ]
    items += [f"<li>restored after an earlier run: {escape(str(c.path))}</li>" for c in t.recovered_from_earlier_runs]
    tuning = f"<ul>{''.join(items)}</ul>" if items else '<p class="na">No tuning was applied.</p>'
    loads = []
    for load in s.loads or []:  # softrt compare records what each load achieved, and what went wrong
        problems = "".join(f'<li class="bad">problem: {escape(p)}</li>' for p in load.problems or [])
        failed = ' class="bad" data-load-failed="1"' if load.failed else ""
        loads.append(f"<li{failed}>{escape(load.describe())}" + (f"<ul>{problems}</ul>" if problems else "") + "</li>")
    if loads:
        tuning += f"<h4>Loads</h4><ul>{''.join(loads)}</ul>"
    return (
        f'<div class="card" id="run-{escape(r.run_id)}"><h3>{_swatch(i)}{escape(r.label)}</h3>'
        f'<table class="facts">{rows}</table>{check_html}<h4>Tunings</h4>{tuning}</div>'
    )


def _figure(p: Plot, svg: bytes | None) -> str:
    na = "".join(f"<li>{escape(x)}</li>" for x in p.not_applicable)
    na_html = f'<div class="na">Not shown:<ul>{na}</ul></div>' if na else ""
    if svg is None:
        return (
            f'<figure id="plot-{p.key}" data-plot="{p.key}" data-empty="1"><h3>{escape(p.title)}</h3>'
            f'<p class="na">Does not apply to any run in this report.</p>{na_html}</figure>'
        )
    data = base64.b64encode(svg).decode("ascii")
    return (
        f'<figure id="plot-{p.key}" data-plot="{p.key}"><img alt="{escape(p.title)}" '
        f'src="data:image/svg+xml;base64,{data}"><figcaption>{escape(p.caption)}</figcaption>{na_html}</figure>'
    )


def page(
    runs: list[RunView],
    plots: list[Plot],
    svgs: dict[str, bytes],
    broken: list[tuple[str, str]],
    version: str,
    comparison: list[str] | None = None,
) -> str:
    """The whole report page."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    broken_html = "".join(
        f'<div class="note broken" data-broken="{escape(ref)}">Run <code>{escape(ref)}</code> '
        f"could not be read and is left out: {escape(msg)}</div>"
        for ref, msg in broken
    )
    title = "softrt report: " + ", ".join(r.run_id for r in runs[:3]) + (" …" if len(runs) > 3 else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="softrt {escape(version)}">
<title>{escape(title)}</title><style>{_STYLE}</style></head>
<body>
<h1>softrt report</h1>
<p class="meta">{len(runs)} run(s); generated {now} by softrt {escape(version)}. Can this PC run a cyclic control loop
(the seed: a 250 µs EtherCAT cycle), and if not, why not?</p>
{_banner(runs)}
{_runs_table(runs)}
{broken_html}
{side_by_side(runs, comparison)}
<h2 id="results">Results</h2>
<div class="cards">{"".join(_result_card(i, r) for i, r in enumerate(runs))}</div>
<h2 id="why-late">Why cycles were late</h2>
<p class="na">For every late cycle, what held the real-time CPU between the moment the loop should have seen the
permit and the moment it did, from the kernel's trace events: threads, IRQs, softirqs, kernel work, and stretches
with no guest event at all (time the guest did not run). The unexplained rest is shown.</p>
{"".join(_why_late(i, r) for i, r in enumerate(runs) if r.source == "softrt")}
<h2 id="plots">Plots</h2>
{"".join(_figure(p, svgs.get(p.key)) for p in plots)}
<h2 id="hosts">Hosts, checks and tunings</h2>
<div class="cards">{"".join(_facts(i, r) for i, r in enumerate(runs))}</div>
<h2 id="terms">Terms</h2>
<ul class="na">
<li>Period: time from one update permit detected to the next (the seed's "Timer int. period");
a cycle is late when it exceeds the nominal period.</li>
<li>Process: write to the board plus the next-target computation ("Timer int. process").</li>
<li>Missed update: a board cycle that repeated the previous target because the host's write came too late.</li>
<li>Slack: the next board edge minus the end of the cycle's work (negative: an overrun); short slack hurts,
so its low percentiles are shown (p1: 1 % of cycles had less).</li>
<li>{escape(TOOL_MEANING["cyclictest"])}; {escape(TOOL_MEANING["oslat"])}.</li>
</ul>
</body></html>
"""
