"""``softrt diff RUN_A RUN_B``: what differs between two runs, and whether their figures moved beyond noise (CLI layer)."""

from __future__ import annotations

import json
import sys

import click
from rich.text import Text

from ..schema.text import printable
from ..store.fleet import RunDiff, diff, in_order, jsonable, load_runs, resolve
from ..store.history import History
from .fleet import warn_unreadable
from .history import DB_OPTION
from .render import console, emit


def _v(value: object, unit: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.3g}{unit and ' ' + unit}" if abs(value) < 10 else f"{value:,.1f}{unit and ' ' + unit}"
    return printable(value) + (unit and " " + unit)


def diff_lines(d: RunDiff) -> list[Text]:
    lines = [
        Text(
            f"{side} {printable(r.run_id)}: rig {printable(r.label)}, {printable(r.scenario)}, "
            f"{printable(r.started_at or '?')}"
        )
        for side, r in (("A", d.a), ("B", d.b))
    ]
    for title, part in (("Provenance", d.provenance), ("Configuration", d.config)):
        lines.append(Text(f"{title}: " + ("the same" if not part else f"{len(part)} difference(s)"), style="bold"))
        lines += [Text(f"  {printable(k)}: {_v(v.a)} → {_v(v.b)}") for k, v in part.items()]
    lines.append(
        Text("Headline figures (A → B, change; judged against the noise of A's rig and scenario):", style="bold")
    )
    for h in d.headline:
        change = "" if h.change is None else f", {'+' if h.change >= 0 else ''}{_v(h.change, h.unit)}"
        noise = h.noise
        band = f"; noise range {_v(noise.spread, h.unit)} over {noise.n} runs" if noise.known else ""
        lines.append(
            Text(
                f"  {h.name}: {_v(h.a, h.unit)} → {_v(h.b, h.unit)}{change}: {h.judged}{band}",
                style="red" if h.judged == "worse" else "green" if h.judged == "better" else "",
            )
        )
    lines.append(Text(printable(d.noise_how), style="dim"))
    return lines


@click.command(
    "diff",
    epilog="""\b
Examples:
  softrt diff last~1 last
  softrt diff 20261130-071502 /mnt/lab/softrt/rig=4f2a…/date=2026-12-01/20261201-080000-rig7-ab12
  softrt diff RUN_A RUN_B --db postgresql://lab@lab-db/softrt     two rigs' runs""",
)
@click.argument("run_a")
@click.argument("run_b")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def command(run_a, run_b, db, as_json):
    """Every provenance and configuration difference between RUN_A and RUN_B (run ids, last, last~N or run
    directories; any two rigs), and the change of the headline figures with whether it exceeds the
    run-to-run noise of RUN_A's rig and scenario in the history."""
    history = History(db)
    _, a = resolve(run_a, history)
    _, b = resolve(run_b, history)
    unreadable: list = []
    runs = in_order(load_runs(history, rig=a.rig, scenario=a.scenario, unreadable=unreadable), [a, b])
    warn_unreadable(unreadable)
    d = diff(a, b, runs)
    if as_json:
        sys.stdout.write(json.dumps(jsonable(d), indent=2) + "\n")
        return 0
    out = console()
    for line in diff_lines(d):
        emit(out, line, soft_wrap=True)
    return 0
