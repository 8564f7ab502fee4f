"""The golden cases: what softrt shows a user for a fixed set of real inputs (tests/golden; issue 29).

Shared by ``capture.py`` (writes ``expected/``) and ``test_golden.py`` (compares with it), so both run
exactly the same code. A case is a name (``show/run-traced.txt``: a folder per command, the extension of
what it prints) and a function of the :class:`~.world.World` (world.py: the inputs, the history, the
normalisation) returning a :class:`~.world.Result`; its expected text is the file of that name under
``expected/`` (or the one :data:`ALIASES` names), and its exit status and any stderr are in
``expected/status.json``.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from .world import (
    CAPTURED,
    EXPECTED,
    HERE,
    IMPORTED,
    OLDER,
    OLDER_JSON_ONLY,
    RUNS,
    STATUS,
    SYNTHETIC,
    Result,
    World,
    model,
)

# ----------------------------------------------------------------------------------------------- cases

Case = Callable[[World], Result]
CASES: dict[str, Case] = {}


def _case(name: str, fn: Case) -> None:
    assert name not in CASES, name
    CASES[name] = fn


def _text(text: str) -> Result:
    return Result(0, text, "")


def _cli(*args: str | Callable[[World], str]) -> Case:
    """A case running ``softrt ARGS``; an argument that is a function gets the world (a path in it)."""
    return lambda w: w.cli(*(a(w) if callable(a) else a for a in args))


def _args(w: World, args) -> list[str]:
    return [a(w) if callable(a) else a for a in args]


def _joined(*results: Result) -> Result:
    """Several commands as one case: their outputs in order, each headed by its exit status and stderr."""
    text = "".join(
        f"--- exit {r.status}" + (f"; stderr: {r.err.strip()}" if r.err else "") + f"\n{r.out}" for r in results
    )
    return _text(text)


def _dir(name: str) -> Callable[[World], str]:
    return lambda w: str(w.run_dir(name))


def _src(name: str) -> Callable[[World], str]:
    return lambda w: str(w.root / "sources" / name)


def _rewrite(name: str) -> Case:
    """The summary.json that reading this run and writing it again produces (as store.rundir writes it)."""

    def run(w: World) -> Result:
        from softrt.schema.summary import RunSummary

        path = w.run_dir(name) / "summary.json"
        summary = RunSummary.read(json.loads(path.read_text()), path)
        return _text(w.normalise(json.dumps(summary.to_dict(), indent=2) + "\n"))

    return run


def _file(name: str, file: str) -> Case:
    """A file ``softrt import`` (or the synthetic writer) wrote, as written."""
    return lambda w: _text(w.normalise((w.run_dir(name) / file).read_text()))


def _set_up(key: str) -> Case:
    return lambda w: w.results[key]


ALL_RUNS = (*RUNS, *IMPORTED, SYNTHETIC)

#: Cases whose expected output is another file (relative to tests/golden): the same bytes stored once.
#: ``show --json`` prints a run's summary.json as reading and rewriting it gives it: a run of today's
#: softrt unchanged (the input itself), an older one upgraded (stored once, for both cases).
ALIASES: dict[str, str] = {}

for _name in ALL_RUNS:
    _case(f"show/{_name}.txt", _cli("show", _dir(_name)))
    _case(f"show/{_name}.json", _cli("show", _dir(_name), "--json"))
    if _name not in IMPORTED:  # (0.05 s each: their text is history/tail-last.txt's and tail/source-*-hist.txt's)
        _case(f"tail/{_name}.txt", _cli("tail", _dir(_name)))
    _case(f"tail/{_name}.json", _cli("tail", _dir(_name), "--json"))
    _case(f"rewrite/{_name}.json", _rewrite(_name))
    if _name in RUNS:
        _same = f"inputs/runs/{RUNS[_name]}/summary.json"
    elif _name in IMPORTED:
        _same = f"expected/import/{_name}-summary.json"
    else:
        _same = f"expected/synthetic/{_name}-summary.json"
    ALIASES[f"show/{_name}.json"] = ALIASES[f"rewrite/{_name}.json"] = _same

for _name in OLDER:
    if _name not in OLDER_JSON_ONLY:
        _case(f"older/show-{_name}.txt", _cli("show", _dir(f"older/{_name}")))
    _case(f"older/show-{_name}.json", _cli("show", _dir(f"older/{_name}"), "--json"))
    _case(f"older/rewrite-{_name}.json", _rewrite(f"older/{_name}"))
    if _name.startswith(("older-", "import-")):  # upgraded, or normalised (imported_at)
        ALIASES[f"older/show-{_name}.json"] = f"expected/older/rewrite-{_name}.json"
    else:  # written by today's softrt: rewritten byte for byte, so the file itself is the expected output
        ALIASES[f"older/show-{_name}.json"] = ALIASES[f"older/rewrite-{_name}.json"] = (
            f"../fixtures/summaries/{_name}.json"
        )

# softrt tail of data softrt did not record (store/tailsource.py reads them).
for _fmt in ("txt", "json"):
    _json = ("--json",) if _fmt == "json" else ()
    # (the rt-tests --json files are fitted as imported runs: tail/import-*; as a file, text only, below)
    _case(f"tail/source-cyclictest-v.{_fmt}", _cli("tail", _src("cyclictest-v.txt"), "--interval-us", "250", *_json))
    _case(
        f"tail/source-csv.{_fmt}",
        _cli("tail", _src("periods.csv"), "--column", "period_us", "--deadline-us", "270", *_json),
    )
# Declustered fits that reach the checks (and fail one): 1 s of data has too few clusters at the default gap.
for _fmt in ("txt", "json"):
    _json = ("--json",) if _fmt == "json" else ()
    _case(
        f"tail/source-csv-checks.{_fmt}",
        _cli("tail", _src("periods.csv"), "--column", "period_us", "--deadline-us", "270", "--gap-ms", "0.5", *_json),
    )
    _case(
        f"tail/source-cyclictest-v-checks.{_fmt}",
        _cli(
            "tail", _src("cyclictest-v.txt"), "--gap-ms", "0.1", "--deadline-us", "100", "--threshold-us", "40", *_json
        ),
    )
_case(
    "tail/source-parquet.json",
    _cli("tail", _src("periods.parquet"), "--column", "period_us", "--deadline-us", "270", "--json"),
)
_case("tail/source-cyclictest-hist.txt", _cli("tail", _src("cyclictest.json")))
_case("tail/source-oslat-hist.txt", _cli("tail", _src("oslat.json"), "--deadline-us", "50"))
_case(
    "tail/source-cyclictest-v-threshold.json",
    _cli("tail", _src("cyclictest-v.txt"), "--threshold-us", "15", "--deadline-us", "60", "--target", "1/h", "--json"),
)

# softrt import: its output, the files it wrote, and an import printed as text (into a history of its own).
_case("import/import.json", _set_up("import/import.json"))
for _name in IMPORTED:
    for _file_name in ("summary.json", "histogram.json", "config.json", "host.json"):
        _case(f"import/{_name}-{_file_name}", _file(_name, _file_name))
_case(
    "import/import-text.txt",
    _cli(
        "import",
        _src("cyclictest.json"),
        _src("oslat.json"),
        "--out-dir",
        lambda w: str(w.root / "imported-text"),
        "--db",
        lambda w: str(w.root / "import-text.sqlite"),
    ),
)
_case(f"synthetic/{SYNTHETIC}-summary.json", _file(SYNTHETIC, "summary.json"))
_case(f"synthetic/{SYNTHETIC}-stats.json", _file(SYNTHETIC, "stats.json"))

# The history of the runs (history add, then everything that reads it).
_case("history/add.txt", _set_up("history/add.txt"))
_case("history/list.txt", _cli("history"))
_case("history/list.json", _cli("history", "--json"))
_case("history/by-rate.txt", _cli("history", "--by-rate"))
_case("history/source-cyclictest.json", _cli("history", "--source", "cyclictest", "--json"))
_case("history/scenario-run-limit.txt", _cli("history", "--scenario", "run", "--limit", "2"))
_case("history/show-last.txt", _cli("show", "last"))
_case("history/show-last-2.txt", _cli("show", "last~2"))
_case("history/show-last-1.json", _cli("show", "last~1", "--json"))
ALIASES["history/show-last-1.json"] = "expected/import/import-cyclictest-summary.json"
_case("history/show-prefix.txt", _cli("show", "20261204-204912"))
_case("history/tail-last.txt", _cli("tail", "last"))
_case("fleet/fleet.txt", _cli("fleet"))
_case("fleet/fleet.json", _cli("fleet", "--json"))
_case("fleet/regressions.txt", _cli("fleet", "--regressions"))
_case("fleet/regressions.json", _cli("fleet", "--regressions", "--json"))
for _a, _b in (("run-traced", "compare-load"), ("run-traced", "run-trapezoid"), ("run-traced", "import-oslat")):
    _case(f"diff/{_a}--{_b}.txt", _cli("diff", _dir(_a), _dir(_b)))
    _case(f"diff/{_a}--{_b}.json", _cli("diff", _dir(_a), _dir(_b), "--json"))
_QUERY = (
    "SELECT run_id, scenario, host, period_max_us, period_p99_99_us, missed_updates, late_cycles, meets, "
    "rig_label, kernel, preemption FROM runs ORDER BY run_id"
)
_case("query/runs.json", _cli("query", _QUERY, "--json"))  # (DuckDB: 0.1 s a query; one is enough for the view)


# history add and forget in a history of their own (the world's history stays as built).
_OWN_DB = ("--db", lambda w: str(w.root / "forget.sqlite"))
_case(
    "history/add-forget.txt",
    lambda w: _joined(
        w.cli("history", "add", _dir("runs-all")(w), *_args(w, _OWN_DB)),
        w.cli("history", "forget", "20261204-20491", *_args(w, _OWN_DB)),
        w.cli("history", "forget", "20261204-204910", *_args(w, _OWN_DB)),
        w.cli("history", *_args(w, _OWN_DB)),
    ),
)


# A terminal's width (COLUMNS=80): rich wraps and squeezes the tables to it. Run in the world with paths
# relative to it: a line that names a path wraps where the path's length says (the world's is not fixed).
def _columns(width: int, *args: str) -> Case:
    def run(w: World) -> Result:
        narrow = World(w.root, {**w.env_vars, "COLUMNS": str(width)}, w.results)
        with contextlib.chdir(w.root):
            return narrow.cli(*args)

    return run


_case("show/run-traced-80-columns.txt", _columns(80, "show", f"runs/{RUNS['run-traced']}"))
_case("history/list-80-columns.txt", _columns(80, "history"))


# More of the readers' options, through the history.
_case(
    "history/since-until.json",
    _cli("history", "--since", "2026-12-04T20:49:10", "--until", "2026-12-04T20:51:56", "--json"),
)
_case("fleet/scenario-run.json", _cli("fleet", "--scenario", "run", "--json"))
_case("fleet/kernel-none.txt", _cli("fleet", "--kernel", "0.0-none"))
_case("diff/last-1--last.txt", _cli("diff", "last~1", "last"))
_case(
    "tail/run-traced-options.json",
    _cli("tail", _dir("run-traced"), "--target", "1/week", "--gap-ms", "5", "--threshold-us", "251", "--json"),
)
_case("tail/run-traced-options.txt", _cli("tail", _dir("run-traced"), "--target", "1/day", "--deadline-us", "260"))

# Bad input: one line on stderr, exit status 2 (the stored status holds both).
_case("errors/show-unknown.txt", _cli("show", "nosuchrun"))
_case("errors/tail-csv-no-column.txt", _cli("tail", _src("periods.csv")))
_case("errors/tail-bad-interval.txt", _cli("tail", _src("cyclictest-v.txt"), "--interval-us", "0"))
_case(
    "errors/import-not-rt-tests.txt",
    _cli("import", _src("periods.csv"), "--out-dir", lambda w: str(w.root / "imported-bad")),
)
_case("errors/diff-not-a-run.txt", _cli("diff", _dir("run-traced"), lambda w: str(w.root / "sources")))
_case("errors/history-bad-since.txt", _cli("history", "--since", "yesterday"))


# softrt check and softrt tune (the plan; nothing applied) of the captured machine: the audit reads the tree
# under --root, never this machine (no live sample: --sample 0; tune leaves the captured processes out).
_CAP = ("--root", lambda w: str(CAPTURED))
# (0.1 s each: the verbose text, which holds the plain one's lines and the evidence, and the JSON.)
_case("check/captured-verbose.txt", _cli("check", *_CAP, "--sample", "0", "-v"))
_case("check/captured.json", _cli("check", *_CAP, "--sample", "0", "--json"))
_case("tune/captured.txt", _cli("tune", *_CAP))
_case("tune/captured-rt-cpu-0.json", _cli("tune", *_CAP, "--rt-cpus", "0", "--json"))


# softrt compare after its loops: the scenario runs pooled, judged and printed (scenario/compare.py's
# _pool and verdict, cli/compare.py's _print), over stored runs standing for the rounds. Only this adapter
# reaches into the modules; if the refactor renames what it calls, change the adapter, not the outputs.
COMPARE = (
    ("untuned", ("run-late-untuned",)),
    ("tuned", ("run-traced", "run-trapezoid")),
    ("tuned+load", ("compare-load",)),
)


def _compare_result(w: World):
    from softrt.scenario import compare as sc
    from softrt.scenario.parse import load_scenario
    from softrt.schema.config import RunConfig
    from softrt.session.run import RunResult
    from softrt.store.history import load_run_summary

    runs, pooled = [], {}
    for name, sources in COMPARE:
        scenario = load_scenario(name)
        planned = sc.Planned(scenario=scenario, config=RunConfig(scenario=name, out_dir=w.root / "runs"), load_cpus=())
        rounds = []
        for i, source in enumerate(sources, 1):
            summary = load_run_summary(w.run_dir(source))
            rounds.append(
                sc.ScenarioRun(
                    scenario=scenario,
                    round=i,
                    result=RunResult(summary, w.run_dir(source)),
                    loads=list(summary.loads or []),
                )
            )
        pooled[name] = sc._pool(planned, rounds)
        runs += rounds
    return sc.CompareResult(runs=runs, pooled=pooled, verdict=sc.verdict(pooled), checks=[])


def _compare_json(w: World) -> Result:
    with w.env():
        result = _compare_result(w)
    return _text(w.normalise(json.dumps(result.doc().to_dict(), indent=2) + "\n"))  # as cli/compare.py prints it


def _compare_text(w: World) -> Result:
    from softrt.cli.compare import _print

    out = io.StringIO()
    with w.env(), contextlib.redirect_stdout(out):
        _print(_compare_result(w), 2, w.root / "runs")
    return _text(w.normalise(out.getvalue()))


_case("compare/compare.json", _compare_json)
_case("compare/compare.txt", _compare_text)


# The report: its page (without the SVG images) and its data model (report/load.py, report/data.py).

#: What a plot becomes in the golden report (normalisation rule 4): matplotlib is not asked to draw it.
NOT_RENDERED = b"<svg><!-- plot not rendered (tests/golden) --></svg>"


@contextlib.contextmanager
def _plots_not_rendered() -> Iterator[None]:
    """The report's figures are made (their data, captions and notes) but not drawn: ``render`` (report/plots.py,
    as report/build.py and report/fleet.py call it) returns :data:`NOT_RENDERED`. If the refactor moves render,
    point this at its new home (the outputs stay)."""
    import importlib

    targets = [importlib.import_module(m) for m in ("softrt.report.build", "softrt.report.fleet")]
    saved = [t.render for t in targets]
    for t in targets:
        t.render = lambda fig, fmt, dpi=110: NOT_RENDERED
    try:
        yield
    finally:
        for t, r in zip(targets, saved):
            t.render = r


def _report(*args: str | Callable[[World], str], html: str) -> Case:
    """``softrt report ARGS``: what it prints, and the HTML it wrote (at *html* in the world) as its own case."""

    def run(w: World) -> Result:
        with _plots_not_rendered():
            result = _cli("report", *args)(w)
        w.results[f"report/{html}"] = _text(w.normalise((w.root / html).read_text(encoding="utf-8")))
        return result

    return run


def _written(key: str, maker: str) -> Case:
    """A file a command of another case wrote (*maker* runs it first when it has not run yet)."""

    def run(w: World) -> Result:
        if key not in w.results:
            CASES[maker](w)
        return w.results[key]

    return run


def _broken_run(w: World) -> str:
    """A copy of run-traced whose samples.parquet is cut short (a disk that filled up): left out with a note."""
    path = w.root / "broken" / RUNS["run-traced"]
    if not path.is_dir():
        shutil.copytree(w.run_dir("run-traced"), path)
        with open(path / "samples.parquet", "r+b") as fh:
            fh.truncate(1000)
    return str(path)


_case(
    "report/report.txt",
    _report(
        _dir("runs-all"),
        lambda w: str(w.root / "imported"),
        _dir(SYNTHETIC),
        _broken_run,
        "-o",
        lambda w: str(w.root / "report.html"),
        html="report.html",
    ),
)
_case("report/report.html", _written("report/report.html", "report/report.txt"))
_case("report/fleet.txt", _report("--fleet", lambda w: str(w.root / "fleet.html"), html="fleet.html"))
_case("report/fleet.html", _written("report/fleet.html", "report/fleet.txt"))


def _report_model(name: str) -> Case:
    def run(w: World) -> Result:
        from softrt.report.load import load_run

        with w.env():
            view = load_run(w.run_dir(name))
        return _text(w.normalise(json.dumps(model(view), indent=1) + "\n"))

    return run


for _name in ALL_RUNS:
    _case(f"report/model-{_name}.json", _report_model(_name))


# ----------------------------------------------------------------------------------------------- files


def expected_path(name: str) -> Path:
    """Where case *name*'s expected output is: its own file, or the one ALIASES names."""
    return HERE / ALIASES[name] if name in ALIASES else EXPECTED / name


def read_status() -> dict:
    return json.loads(STATUS.read_text()) if STATUS.is_file() else {}


def status_of(result: Result) -> dict:
    return {"exit": result.status, "stderr": result.err} if result.err else {"exit": result.status}


def stored_cases() -> list[str]:
    """Every file under expected/ (status.json aside), by the name of the case that owns it."""
    return sorted(p.relative_to(EXPECTED).as_posix() for p in EXPECTED.rglob("*") if p.is_file() and p != STATUS)
