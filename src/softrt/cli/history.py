"""``softrt history``: list the stored runs; ``history add`` stores run directories (CLI layer)."""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import click
from rich import box
from rich.table import Table
from rich.text import Text

from ..schema.text import printable
from ..store.history import History, RunRecord
from ..store.lab import Lab, forward
from ..store.running import RunState, run_state
from ..units import format_number as num
from .render import console, emit

DB_OPTION = click.option(
    "--db",
    metavar="PATH|URL",
    default=None,
    help="History database: a SQLite file, or a lab's postgresql://user@host/dbname (password in ~/.pgpass) "
    "[default: $SOFTRT_DB, else $SOFTRT_HOME/history.sqlite, else ~/.local/share/softrt/history.sqlite].",
)


ARCHIVE_OPTION = click.option(
    "--archive",
    metavar="PATH",
    default=None,
    help="Lab archive (a shared directory): each run folder is copied there once, immutable, as "
    "rig=<id>/date=<YYYY-MM-DD>/<run id>/ [default: $SOFTRT_ARCHIVE, else none].",
)
RIG_LABEL_OPTION = click.option(
    "--rig-label",
    metavar="TEXT",
    default=None,
    help="This rig's name in the lab (softrt fleet shows it), recorded in each run's provenance "
    "[default: $SOFTRT_RIG_LABEL].",
)
_LAB = "softrt.lab"  # click context meta: the command's lab, and whether it was refused as bad input


def lab_options(f):
    """``--db``, ``--archive``, ``--rig-label`` on the commands that make runs (run, compare, watch): each run is kept
    in this rig's history, then forwarded to the lab's database and archive (store.lab)."""

    @functools.wraps(f)
    def command(*args, db, archive, rig_label, **kwargs):
        from ..platform.provenance import RIG_LABEL_ENV
        from ..store.dbtarget import DB_ENV

        if rig_label is not None:
            os.environ[RIG_LABEL_ENV] = rig_label  # read with the host facts, also by a spawned supervisor

        lab = Lab(db, archive)
        lab.check()  # a malformed URL or archive: exit 2 before anything runs
        if db is not None and not isinstance(lab.index(), str):
            os.environ[DB_ENV] = str(lab.index())  # a file: the run's own checkpoints go there too
        meta = click.get_current_context().meta
        meta[_LAB] = {"lab": lab, "refused": False, "down": False}
        status = f(*args, **kwargs)
        return 2 if meta[_LAB]["refused"] and status in (0, 1, None) else status

    return DB_OPTION(ARCHIVE_OPTION(RIG_LABEL_OPTION(command)))


def remember(run_paths) -> None:
    """Add finished runs to this rig's history, then hand them to the lab (--db URL, --archive).

    A history problem never costs the user the run: a lab that cannot be reached leaves it in this
    rig's history, said in one line (softrt push sends it later); a lab refused as bad input (a
    wrong password, a newer layout) makes the command exit 2 once it is done.
    """
    from ..errors import ConfigError, SoftRTError

    ctx = click.get_current_context(silent=True)
    meta = (ctx.meta.get(_LAB) if ctx is not None else None) or {"lab": Lab(), "refused": False}
    lab = meta["lab"]
    err = console(stderr=True)
    history = None
    try:
        history = History(lab.local())
        for path in run_paths:
            history.add_run(path)
    except SoftRTError as error:
        # The run entered the history at its first checkpoint; when this last update fails, its row
        # still says running until the next command that reads the history brings it up to date
        # from the run's summary.json (store.upkeep.catch_up). Name what exists: SOFTRT_HOME and
        # softrt history add, never an option the command lacks.
        where = printable(run_paths[0])
        held = printable(history.path) if history is not None else "this rig's history"
        emit(
            err,
            Text(
                f"softrt: warning: the history {held} could not be updated with the run in {where}: "
                f"{printable(error.msg)}. The next softrt command that reads the history brings its entry up to "
                f"date from {where} (or: softrt history add {where}). The history lives in $SOFTRT_HOME (default "
                "~/.local/share/softrt): free space there, or set SOFTRT_HOME to another directory."
            ),
            soft_wrap=True,
        )
        history = None
    where = f"this rig's history ({history.path})" if history is not None else str(run_paths[0])
    what = "run" if len(run_paths) == 1 else f"{len(run_paths)} runs"
    try:
        if not lab.forwards():
            return
        if meta.get("down"):  # said once: the next scenarios of a compare do not wait for it again
            emit(err, Text(f"softrt: the {what} stays in {where} too (the lab is still unreachable)"), soft_wrap=True)
            return
        for path in run_paths:
            forward(path, lab)
    except SoftRTError as error:
        if isinstance(error, ConfigError):
            meta["refused"] = True
            emit(
                err,
                Text(f"softrt: error: {error}; the {what} stays in {where}: softrt push sends it once this is fixed"),
                soft_wrap=True,
            )
        else:
            meta["down"] = True
            emit(
                err,
                Text(
                    f"softrt: the lab has not got the {what} yet, kept in {where}: {error.msg}; softrt push "
                    "sends it later"
                ),
                soft_wrap=True,
            )


_MODES = {"real-time": "RT", "not real-time": "not RT"}  # "untuned" stays


def _num(value: float | None) -> str:
    """A headline figure in µs: one decimal below 1,000 µs, whole microseconds above (the exact
    figures are in softrt show)."""
    if value is None:
        return "-"
    return num(value, 1) if abs(round(value, 1)) < 1000 else num(value, 0)


def _count(n: int | None) -> str:
    """Cycles: exact up to 10 million, then in millions ("345.6M", 24 h at 250 µs; exact in --json)."""
    if n is None:
        return "-"
    return f"{n:,}" if n < 10_000_000 else f"{num(n / 1e6, 1)}M"


def _rate(per_h: float | None) -> str:
    """The tail model's 95 % upper bound of late cycles per hour (issue 33)."""
    if per_h is None:
        return "-"
    return f"{per_h:,.0f}" if per_h >= 100 else f"{per_h:.2g}"


def _state(r: RunRecord) -> str:
    """The status cell: empty for a complete run, else partial / running 12m / died 3h05m."""
    if r.status in (None, "complete"):
        return ""
    return run_state(r.summary, run_dir=r.path).label() if r.status == "running" else r.status


def _run_state(r: RunRecord) -> RunState | None:
    """A run marked running: whether it still goes (store.running), which --json says."""
    return run_state(r.summary, run_dir=r.path) if r.status == "running" else None


_HEADERS = (
    "run",
    "host",
    "scenario",
    "mode",
    "status",
    "cycles",
    "period\nmax",
    "period\np99.99",
    "latency\nmax",
    "missed",
    "late/h\n≤ 95 %",
)
_HOST, _SCENARIO, _STATUS, _LATENCY, _RATE = 1, 2, 4, 8, 10
_TEXT_MIN_WIDTH = 4  # host and scenario give way down to this (with an ellipsis)


def history_table(
    runs: list[RunRecord], short_ids: dict[str, str] | None = None, width: int = 80, by_rate: bool = False
) -> Table:
    """One line per run within *width* columns: identity, then the seed's headline figures.

    Run ids are abbreviated to *short_ids* (their unique prefixes, which softrt show takes). The
    id and the numbers are never cut or wrapped; to fit, the host column is left out when every
    run is from one host (it is in the title then), the status column when every run is complete,
    then host and scenario give way (an ellipsis), and last the latency column and the late-rate
    bound go (they are in softrt show and ``softrt history --json``, with everything else). The
    late-rate column (the tail block's 95 % upper bound per hour) is shown when a run has one.
    """
    short_ids = short_ids or {}
    hosts = {r.host for r in runs}
    one_host = len(hosts) == 1
    rows = _rows(runs, short_ids)
    widths = [
        max([len(row[k]) for row in rows] + [len(line) for line in _HEADERS[k].split("\n")])
        for k in range(len(_HEADERS))
    ]
    keep = [
        k
        for k in range(len(_HEADERS))
        if not (k == _HOST and one_host)
        and not (k == _STATUS and not any(row[_STATUS] for row in rows))
        and not (k == _RATE and all(r.late_rate_high_per_h is None for r in runs))
    ]
    text = [k for k in (_HOST, _SCENARIO) if k in keep]

    # Two spaces between columns when everything fits so, else one.
    gap = 2 if sum(widths[k] for k in keep) + 2 * (len(keep) - 1) <= width else 1

    def room() -> int:  # what the host and scenario columns can have
        return width - sum(widths[k] for k in keep if k not in text) - gap * (len(keep) - 1)

    for k in (_LATENCY, _RATE):  # (the late rate's bound is in softrt show and --json too)
        if room() < _TEXT_MIN_WIDTH * len(text) and k in keep:
            keep.remove(k)
    limit = {}
    if sum(widths[k] for k in text) > room():
        spare = max(room(), _TEXT_MIN_WIDTH * len(text))
        for i, k in enumerate(sorted(text, key=lambda k: widths[k])):  # the narrower one keeps its width
            limit[k] = max(_TEXT_MIN_WIDTH, min(widths[k], spare // (len(text) - i)))
            spare -= limit[k]
    table = Table(
        title=Text(printable(_title(runs, one_host, by_rate))),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, gap - 1, 0, 0),
    )  # the box puts one space between columns
    for k in keep:
        if k in text:
            w = limit.get(k, widths[k])
            table.add_column(_HEADERS[k], overflow="ellipsis", no_wrap=True, width=w)
        else:
            table.add_column(
                _HEADERS[k], no_wrap=True, min_width=widths[k], justify="left" if k in (0, 3, 4) else "right"
            )
    groups = [r.compare_id for r in runs]
    for i, row in enumerate(rows):
        # Text cells: a host or scenario read from a file is shown as it is, never as rich markup
        # (a nodename "[/x]" would be a markup error), and without control characters.
        # The runs of one softrt compare are set apart by a blank line (the box's section) before and after.
        nxt = groups[i + 1] if i + 1 < len(groups) else None
        table.add_row(*(Text(row[k]) for k in keep), end_section=nxt != groups[i] and (nxt or groups[i]) is not None)
    return table


def _rows(runs: list[RunRecord], short_ids: dict[str, str]) -> list[list[str]]:
    """:func:`history_table`'s cells, one row per run in ``_HEADERS``' order, control characters made visible."""
    rows = []
    for r in runs:
        scenario = r.scenario or "-"
        if r.source != "softrt" and r.source != scenario:
            scenario += f" [{r.source}]"
        rows.append(
            [
                short_ids.get(r.run_id, r.run_id),
                r.host or "-",
                scenario,
                _MODES.get(r.mode or "-", r.mode or "-"),
                _state(r),
                _count(r.cycles),
                _num(r.period_max_us),
                _num(r.period_p99_99_us),
                _num(r.latency_max_us),
                "-" if r.missed_updates is None else f"{r.missed_updates:,}",
                _rate(r.late_rate_high_per_h),
            ]
        )
    return [[printable(cell) for cell in row] for row in rows]


def _title(runs: list[RunRecord], one_host: bool, by_rate: bool) -> str:
    """:func:`history_table`'s title: the order, the one host, the units, and the compare groups if any."""
    title = "Runs, lowest late-rate bound first" if by_rate else "Runs, oldest first"
    if one_host and runs and runs[0].host:
        title += f", on {runs[0].host}"
    title += " (µs; RT: real-time)"
    if any(r.compare_id for r in runs):
        title += "; blank lines group a compare"
    return title


@click.group(
    "history",
    invoke_without_command=True,
    epilog="""\b
Examples:
  softrt history --host rig-7 --since 2026-11-01
  softrt history --limit 5 --json
  softrt history --by-rate                    rank by the late rate's 95 % upper bound""",
)
@DB_OPTION
@click.option("--host", default=None, help="Only runs on this host.")
@click.option("--scenario", default=None, help="Only this scenario (imported results: the tool's name).")
@click.option(
    "--source",
    type=click.Choice(["softrt", "cyclictest", "oslat"]),
    default=None,
    help="Only runs measured by softrt, or imported from this tool.",
)
@click.option("--since", default=None, help="Only runs started at or after this date/time (UTC), e.g. 2026-11-01.")
@click.option("--until", default=None, help="Only runs started up to this date (inclusive) or time (UTC).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the newest N runs.")
@click.option(
    "--by-rate",
    is_flag=True,
    help="Rank by the late rate's 95 % upper bound, lowest first (runs without a tail block last).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the runs as a JSON list.")
@click.pass_context
def command(ctx, db, host, scenario, source, since, until, limit, by_rate, as_json):
    """List the stored runs, oldest first (softrt run, compare and import store theirs).

    \b
    softrt history add DIR...   store run directories, e.g. copied from another PC
    softrt history forget RUN   drop a run from the history (its directory stays)
    softrt history init         make the tables now (a lab's database, as its owner)
    """
    ctx.obj = {"db": db}
    if ctx.invoked_subcommand is not None:
        return None
    history = History(db)
    runs = history.list_runs(host=host, scenario=scenario, source=source, since=since, until=until, limit=limit)
    if by_rate:  # a fleet ranked by how often it will be late, not by its worst sample (issue 33)
        runs.sort(key=lambda r: (r.late_rate_high_per_h is None, r.late_rate_high_per_h or 0.0))
    if as_json:
        sys.stdout.write(json.dumps([r.entry(_run_state(r)).to_dict() for r in runs], indent=2) + "\n")
    elif runs:
        out = console()
        emit(out, history_table(runs, history.short_ids(), width=out.width, by_rate=by_rate))
    else:
        emit(
            console(stderr=True),
            f"No runs in {history.path} match. Runs are stored by softrt run, compare and "
            "import, or with softrt history add DIR.",
            soft_wrap=True,
            markup=False,
        )
    return 0


@command.command(
    "add",
    epilog="""\b
Example:
  softrt history add /mnt/rig-7/softrt-runs   the runs another PC made""",
)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@DB_OPTION
@click.pass_context
def add(ctx, paths, db):
    """Store run directories (a run, or a directory of runs such as softrt-runs/ from another PC).

    Every good run is stored; each one that cannot be (a corrupt summary.json, a run directory
    without one) is named with the reason, and the exit status is then 1.
    """
    from ..store.upkeep import add_each

    history = History(db or (ctx.obj or {}).get("db"))
    ids, bad = add_each(history, paths)
    out, err = console(), console(stderr=True)
    for run_id in ids:
        emit(out, Text(f"stored {printable(run_id)}"), soft_wrap=True)
    for path, why in bad:
        emit(err, Text(f"softrt: not stored: {printable(path)}: {printable(why)}"), soft_wrap=True)
    tail = f"; {len(bad)} not stored (above)" if bad else ""
    emit(err, Text(f"{len(ids)} run(s) stored in {printable(history.path)}{tail}", style="dim"), soft_wrap=True)
    return 1 if bad else 0


@command.command(
    "init",
    epilog="""\b
Example:
  softrt history init --db postgresql://softrt@lab-db/softrt   once, as the role that owns the lab's database""",
)
@DB_OPTION
@click.pass_context
def init(ctx, db):
    """Make (or upgrade) the history's tables now, so the rigs' roles need no right to create them."""
    history = History(db or (ctx.obj or {}).get("db"))
    version = history.init()
    emit(console(), Text(f"{printable(history.path)}: history tables ready (layout {version})"), soft_wrap=True)
    return 0


@command.command(
    "forget",
    epilog="""\b
Example:
  softrt history forget last                  the newest run leaves the history; its directory stays""",
)
@click.argument("run")
@DB_OPTION
@click.pass_context
def forget(ctx, run, db):
    """Drop RUN (an id or a unique prefix) from the history; its run directory is left alone."""
    run_id = History(db or (ctx.obj or {}).get("db")).remove(run)
    emit(console(), Text(f"forgot {printable(run_id)}"), soft_wrap=True)
    return 0
