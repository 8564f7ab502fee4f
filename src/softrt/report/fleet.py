"""``softrt report --fleet FILE.html``: each rig's trend with every provenance change marked (report layer).

One self-contained page (no scripts, no network): the fleet table (store.fleet.fleet_rows), then
per rig one plot of its runs' worst period and p99.99 period over time (matplotlib, as
:mod:`.plots`), a dashed line at each run whose provenance differs from the run before, and the
list of those changes. Every label, host name, kernel and value comes from rows other rigs wrote:
escaped for HTML (``html.escape``), and for matplotlib, whose ``$`` would start mathtext. The plots
are SVG in ``<img>`` (base64), where no script of theirs could run.
"""

from __future__ import annotations

import base64
import os
from datetime import datetime
from html import escape
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

from ..platform import softrt_version
from ..platform.outfile import write_file
from ..schema.provenance import FIELDS
from ..schema.text import printable
from ..store.fleet import FleetRow, FleetRun, by_rig, changed, fleet_rows
from ..store.history import parse_when
from .plots import RC, WIDTH_IN, color, render

#: Provenance fields not marked on the time axis: they name the rig, not what it runs.
_NOT_MARKED = {"rig_id", "rig_label", "hostname", "softrt"}
MARKED = tuple(f for f in FIELDS if f not in _NOT_MARKED)
MAX_RIGS = 200  # plots on one page; the table lists every rig


def _plain(text: object) -> str:
    """A value from another rig as matplotlib text: printable, and no mathtext."""
    return printable(str(text)).replace("$", r"\$")


def _when(run: FleetRun) -> datetime | None:
    try:
        return parse_when(run.started_at) if run.started_at else None
    except Exception:  # noqa: BLE001 - a row from another rig with a bad time: left off the time axis
        return None


def changes(runs: list[FleetRun]) -> list[tuple[FleetRun, dict]]:
    """Each run (oldest first) whose marked provenance differs from the run before, with the differences."""
    return [(b, d) for a, b in zip(runs, runs[1:]) if (d := changed(a, b, MARKED))]


def rig_figure(label: str, runs: list[FleetRun]) -> Figure:
    fig = Figure(figsize=(WIDTH_IN, 3.0), layout="constrained")
    ax = fig.subplots()
    timed = [(t, r) for r in runs if (t := _when(r)) is not None]
    for i, (key, name) in enumerate((("period_max_us", "worst period"), ("period_p99_99_us", "p99.99 period"))):
        points = [(t, v) for t, r in timed if (v := r.figures.of(key)) is not None]
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", ms=3, color=color(i), label=name)
    for run, diff in changes(runs):
        when = _when(run)
        if when is None:
            continue
        ax.axvline(when, color="#7f7f7f", ls="--", lw=1)
        ax.annotate(
            _plain(", ".join(diff))[:60],
            (when, 1),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            ha="right",
            fontsize=7,
            color="#555555",
        )
    ax.set_yscale("log")
    ax.set_ylabel("µs")
    ax.set_title(_plain(label)[:100])
    if ax.lines:
        ax.legend(loc="upper left")
    fig.autofmt_xdate()
    return fig


def _table(rows: list[FleetRow]) -> str:
    head = "".join(
        f"<th>{h}</th>" for h in ("rig", "CPU", "kernel", "runs", "last run", "verdict", "worst period (µs)", "trend")
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{escape(printable('—' if v is None else v))}</td>"
            for v in (
                r.label,
                r.cpu,
                r.kernel,
                r.runs,
                r.last_run,
                r.verdict,
                None if r.worst_period_us is None else f"{r.worst_period_us:,.1f}",
                r.trend,
            )
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _rig_section(rig: str, runs: list[FleetRun]) -> str:
    label = runs[-1].label
    with matplotlib.rc_context(RC):
        svg = render(rig_figure(label, runs), "svg")
    items = "".join(
        f"<li>{escape(printable(run.started_at or '?'))} {escape(printable(run.run_id))}: "
        + "; ".join(
            f"{escape(k)}: {escape(printable(a if a is not None else '—'))} → {escape(printable(b if b is not None else '—'))}"
            for k, (a, b) in diff.items()
        )
        + "</li>"
        for run, diff in changes(runs)
    )
    return (
        f'<h2 id="rig-{escape(printable(rig))}">{escape(printable(label))} <small>{escape(printable(rig))}, '
        f"{len(runs)} run(s)</small></h2>"
        f'<img alt="trend of {escape(printable(label))}" src="data:image/svg+xml;base64,'
        f'{base64.b64encode(svg).decode("ascii")}">'
        + (f"<ul>{items}</ul>" if items else "<p>No provenance change.</p>")
    )


def build_fleet_report(runs: list[FleetRun], out_html: str | os.PathLike) -> Path:
    """Write the fleet page for *runs* (oldest first) to *out_html* (platform.outfile); return its path."""
    out = Path(out_html)
    rigs = by_rig(runs)
    sections = "".join(
        _rig_section(rig, mine) for rig, mine in sorted(rigs.items(), key=lambda kv: kv[1][-1].label)[:MAX_RIGS]
    )
    text = (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>softrt fleet</title><style>'
        "body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%}img{max-width:100%}small{color:#777}"
        "</style></head><body>"
        f"<h1>softrt fleet: {len(rigs)} rig(s), {len(runs)} run(s)</h1>{_table(fleet_rows(runs))}{sections}"
        f"<p><small>softrt {escape(softrt_version())}. Dashed lines: a run whose kernel, build, preemption, "
        "command line, CPU, microcode, BIOS, tuning or NIC differs from the run before.</small></p></body></html>"
    )
    # The one writer of files the user names (platform.outfile): a random O_EXCL temporary renamed
    # over a regular file only, a device in place, never through a planted link.
    write_file(out, text, what="the fleet report", hint="choose another file with --fleet")
    return out
