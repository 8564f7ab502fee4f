"""The world the golden cases run in: the inputs copied, a history of them, the normalisation (tests/golden).

The world (built once per process, in a temporary directory, never in the source tree):

* ``inputs/runs/*``: real run directories (``make_inputs.py`` says how they were made), copied;
* ``history add`` of all of them into a fresh SQLite history (its output is a case);
* ``softrt import --json`` of ``inputs/sources/cyclictest.json`` and ``oslat.json`` (its output and the
  files it writes are cases);
* the older summaries of ``tests/fixtures/summaries`` (written by earlier softrt versions), each in a run
  directory of its own (summary.json only);
* one run directory of the synthetic writer (report/synthetic.py), itself one of the things compared;
* tests/fixtures/sysfs/debian12-vm-2cpu (a captured /proc and /sys), read in place by check and tune --root.

Every command runs in this process through ``softrt.cli.main`` (the entry point ``softrt`` runs), with
``--color never``, ``NO_COLOR=1``, no ``COLUMNS`` (so the width of a pipe: every line as long as its
content), ``TZ=UTC`` and softrt's state, home and history in the world.

Normalisation (:func:`normalise`), applied to every output before it is stored or compared:

1. the world's temporary directory (as given and resolved) becomes ``<tmp>``: where the copies are; the
   captured machine's tree (tests/fixtures/sysfs/debian12-vm-2cpu, read in place) becomes ``<captured>``;
2. the values of ``added_at`` and ``imported_at`` (JSON) become ``<clock>``: when ``history add`` or
   ``import`` ran;
3. the report's ``generated <ISO time>`` becomes ``generated <clock>``: when the report was built;
4. the report's plots are made (their data, captions, notes) but not drawn: each SVG is the placeholder
   ``NOT_RENDERED`` of cases.py (matplotlib takes 3 s to draw the seven figures; their data is in the report/model-*
   cases, and matplotlib's own drawing is not softrt's output);
5. stderr lines about leftovers of *other* softrt processes that were killed (``softrt: removed ...``,
   ``softrt: restored ...``) are dropped: they depend on the machine, not on the input;
6. Python warnings are not shown (a library's, e.g. matplotlib's "No artists with labels found to put in
   legend" from the fleet report: shown once per process, so on stderr or not depending on what ran before,
   and with the path of the library's file).

Nothing else is touched: a figure, a word or a space that changes is a failure.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import math
import os
import re
import shutil
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path

import numpy as np

from softrt.motion import MotionTrace

HERE = Path(__file__).resolve().parent
INPUTS = HERE / "inputs"
EXPECTED = HERE / "expected"
STATUS = EXPECTED / "status.json"
OLDER_SUMMARIES = HERE.parent / "fixtures" / "summaries"
#: The /proc and /sys of the development VM as the audit reads them (tests/fixtures/sysfs/README.md).
CAPTURED = HERE.parent / "fixtures" / "sysfs" / "debian12-vm-2cpu"

#: The input run directories, by the short name the cases use (make_inputs.py made them).
RUNS = {
    "run-traced": "20261204-204907-vm-0573",  # softrt run --duration 1s: traced, S-curve motion
    "run-trapezoid": "20261204-204909-vm-f528",  # --motion trapezoid --axes 2 --wait sleep --no-trace
    "run-late-untuned": "20261204-204910-vm-ec3d",  # --samples late --profile none
    "compare-load": "20261204-204912-vm-c311",  # softrt compare tuned+load (loads with their figures)
    "watch": "20261204-205016-vm-9eb4",  # softrt watch of cyclictest's SCHED_FIFO thread
}
#: The runs softrt import writes in the world (their ids come from the files: start time and digest).
IMPORTED = {
    "import-cyclictest": "20261204-205155-vm-cyclictest-2d8b",
    "import-oslat": "20261204-205157-vm-oslat-dd6e",
}
#: Summaries written by earlier versions and by today's (tests/fixtures/summaries/README.md says which).
OLDER = (
    "older-885c5b1",
    "older-daa3854",
    "older-f14a215",
    "older-2233afd",
    "older-c8ee4e4",
    "older-53f075b",
    "older-6b13447",
    "older-4e8d169",
    "older-337eb10",
    "older-compare-round-7ce7",
    "run",
    "checkpoint",
    "compare-round",
    "import-cyclictest",
    "import-oslat",
)
#: A checkpoint's plain rendering says whether its process still runs (a pid on this machine): JSON only.
OLDER_JSON_ONLY = ("checkpoint",)
SYNTHETIC = "synthetic"
#: Where the synthetic writer may live (issue 29 moves it out of src/ to the tests' helpers).
SYNTHETIC_MODULES = ("softrt.report.synthetic", "..synthetic")  # (relative: tests/synthetic.py, from tests/golden)

RERUN = "if this change is intended, re-run tests/golden/capture.py and review the diff"
CLOCK = "<clock>"


# ----------------------------------------------------------------------------------------------- world


@dataclass
class Result:
    """What a command did: exit status, stdout, stderr (both normalised)."""

    status: int
    out: str
    err: str


@dataclass
class World:
    """The inputs copied into *root*, a history of them, and the runs ``softrt import`` wrote."""

    root: Path
    env_vars: dict[str, str | None] = field(default_factory=dict)
    results: dict[str, Result] = field(default_factory=dict)  # what the set-up commands printed

    def run_dir(self, name: str) -> Path:
        if name in RUNS:
            return self.root / "runs" / RUNS[name]
        if name in IMPORTED:
            return self.root / "imported" / IMPORTED[name]
        if name == SYNTHETIC:
            return self.root / "synthetic" / SYNTHETIC_RUN_ID
        if name == "runs-all":
            return self.root / "runs"
        if name.startswith("older/"):  # (an older summary's name may be a run's too: import-cyclictest)
            return self.root / name
        raise KeyError(name)

    @contextlib.contextmanager
    def env(self) -> Iterator[None]:
        """The world's environment (restored after, so other tests in this process see theirs)."""
        saved = {k: os.environ.get(k) for k in self.env_vars}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # normalisation rule 6
            try:
                for k, v in self.env_vars.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
                if hasattr(time, "tzset"):
                    time.tzset()
                yield
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
                if hasattr(time, "tzset"):
                    time.tzset()

    def cli(self, *args: str) -> Result:
        """``softrt ARGS`` in this process, as the ``softrt`` entry point runs it; normalised."""
        from softrt.cli import main, output

        out, err = io.StringIO(), io.StringIO()
        status = 0
        state = getattr(output, "_color", {})  # (--color is process state: the tests that run after see theirs)
        color = dict(state)
        with self.env(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(["--color", "never", *args])
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            finally:
                state.update(color)
        return Result(status, self.normalise(out.getvalue()), _drop_leftovers(self.normalise(err.getvalue())))

    def normalise(self, text: str) -> str:
        return normalise(text, self.root)


def normalise(text: str, root: Path) -> str:
    """The normalisation of the module docstring (rules 1-3)."""
    for where in sorted({str(root), str(root.resolve())}, key=len, reverse=True):
        text = text.replace(where, "<tmp>")
    text = text.replace(str(CAPTURED), "<captured>")
    text = re.sub(r'("(?:added_at|imported_at)": )"[^"]*"', rf'\1"{CLOCK}"', text)
    return re.sub(r"generated \d{4}-\d\d-\d\dT[0-9:+.Z-]+", f"generated {CLOCK}", text)


def _drop_leftovers(err: str) -> str:
    return "".join(
        line for line in err.splitlines(keepends=True) if not line.startswith(("softrt: removed ", "softrt: restored "))
    )


SYNTHETIC_RUN_ID = "20261130-071502-synthhost-0007"


def _synthetic_writer():
    import importlib

    for name in SYNTHETIC_MODULES:
        try:
            return importlib.import_module(name, package=__package__).write_synthetic_run
        except (ImportError, AttributeError):
            continue
    raise AssertionError(
        f"the synthetic writer (write_synthetic_run) is in none of {SYNTHETIC_MODULES}: "
        "add where it moved to SYNTHETIC_MODULES in tests/golden/cases.py"
    )


def _parquet_of_csv(csv_path: Path, parquet_path: Path) -> None:
    """The CSV's period column as a Parquet file (``softrt tail FILE --column``'s other format)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    values = [float(line.split(",")[1]) for line in csv_path.read_text().splitlines()[1:]]
    pq.write_table(pa.table({"period_us": pa.array(values, pa.float64())}), parquet_path)


def build_world(root: Path) -> World:
    """Copy the inputs into *root* and make the history and the imported runs (see the docstring)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(INPUTS / "runs", root / "runs")
    shutil.copytree(INPUTS / "sources", root / "sources")
    for name in OLDER:
        (root / "older" / name).mkdir(parents=True)
        shutil.copyfile(OLDER_SUMMARIES / f"{name}.json", root / "older" / name / "summary.json")
    (root / "state").mkdir()
    world = World(
        root,
        env_vars={
            "SOFTRT_HOME": str(root / "home"),
            "SOFTRT_STATE_DIR": str(root / "state"),
            "SOFTRT_DB": str(root / "history.sqlite"),
            "NO_COLOR": "1",
            "TZ": "UTC",
            "COLUMNS": None,
            "LINES": None,
            "FORCE_COLOR": None,
            "SOFTRT_ARCHIVE": None,
            "SOFTRT_RIG_LABEL": None,
        },
    )
    world.results["history/add.txt"] = world.cli("history", "add", str(root / "runs"))
    world.results["import/import.json"] = world.cli(
        "import",
        "--json",
        "--out-dir",
        str(root / "imported"),
        str(root / "sources" / "cyclictest.json"),
        str(root / "sources" / "oslat.json"),
    )
    _parquet_of_csv(root / "sources" / "periods.csv", root / "sources" / "periods.parquet")
    with world.env():
        _synthetic_writer()(
            root / "synthetic",
            cycles=4000,
            misses=[(1000, 2), (2500, 1), (3000, 5)],
            seed=7,
            run_id=SYNTHETIC_RUN_ID,
            why_late=True,
        )
    return world


# ------------------------------------------------------------------------------------ the report's model


def model(obj: object) -> object:
    """A JSON picture of the report's data model: every field; an array by dtype, shape, sum and a
    SHA-256 of its bytes (its first values when it is short); a summary by its run id (the show --json
    cases hold it whole)."""
    from softrt.schema.summary import RunSummary

    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else repr(obj)
    if isinstance(obj, np.generic):
        return model(obj.item())
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, RunSummary):
        return {"summary of": obj.run_id}
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        out: dict = {
            "dtype": str(arr.dtype),
            "shape": list(arr.shape),
            "sha256": hashlib.sha256(arr.tobytes()).hexdigest()[:16],
        }
        if arr.dtype.kind in "biuf" and arr.size:
            out["nansum"] = model(np.nansum(arr.astype(np.float64)))
        if arr.size <= 12:
            out["values"] = model(arr.tolist())
        return out
    if isinstance(obj, dict):
        return {str(k): model(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [model(v) for v in obj]
    if isinstance(obj, MotionTrace):  # every number of the trace (NaN as None), as the goldens hold it
        out = {"type": "MotionTrace", "axis": int(obj.axis), "center_cycle": int(obj.center_cycle)}
        for f in fields(obj):
            if isinstance(v := getattr(obj, f.name), np.ndarray):
                out[f.name] = model([None if isinstance(x, float) and math.isnan(x) else x for x in v.tolist()])
        return out
    if callable(document := getattr(obj, "document", None)):  # a producer: pictured by its document
        return {"type": type(obj).__name__, **model(document().to_dict())}
    if hasattr(obj, "to_dict"):
        return {"type": type(obj).__name__, **model(obj.to_dict())}
    if is_dataclass(obj):
        out = {"type": type(obj).__name__}
        out.update({f.name: model(getattr(obj, f.name)) for f in fields(obj)})
        for prop in ("run_id", "source", "meaning", "label", "period_ns", "has_motion", "total"):
            if isinstance(getattr(type(obj), prop, None), property):
                out[prop] = model(getattr(obj, prop))
        return out
    if hasattr(obj, "__dict__"):
        return {"type": type(obj).__name__, **{k: model(v) for k, v in sorted(vars(obj).items())}}
    return repr(obj)
