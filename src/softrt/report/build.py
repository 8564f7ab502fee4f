"""``build_report``: run directories or ids in, one self-contained HTML file (and PNGs) out (report layer).

A run that cannot be read (missing or corrupt samples, a corrupt summary) is left out with a
visible note and listed in the result; a reference that names no run at all (an unknown id, a
path that is not a run directory) and an output that cannot be written are bad input
(ConfigError), raised before anything is read. Every file is written by
:func:`softrt.platform.outfile.write_file` (random temporaries, no link followed, devices and
``-`` written in place, no space left: one line).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, SoftRTError
from ..platform import softrt_version
from ..platform.outfile import check_dir, check_target, write_file
from ..store.history import find_run_dirs, resolve_run
from ..store.rundir import SAMPLES, SUMMARY
from ..store.validate import check_path
from .html import page
from .load import RunView, load_run
from .plots import make_plots, render
from .tail_plot import return_levels


@dataclass
class ReportResult:
    """What ``build_report`` wrote."""

    path: str  # where the HTML went: the file, or "standard output" (-o - or /dev/stdout)
    runs: list[str]
    broken: list[tuple[str, str]] = field(default_factory=list)  # (run directory, one-line reason)
    pngs: list[Path] = field(default_factory=list)


def resolve_runs(refs: Iterable[str | os.PathLike], db: Path | str | None = None) -> list[Path]:
    """Run directories for *refs*: a run directory, a directory of runs, or a run id (prefix) in the history."""
    out: list[Path] = []
    for ref in refs:
        path = Path(ref)
        check_path(path, "run")  # (is_dir() raises ENAMETOOLONG)
        if path.is_dir() and not (path / SUMMARY).is_file():
            if (path / SAMPLES).is_file():
                out.append(path)  # a run that did not finish: reported as a note, not refused
            else:
                out.extend(find_run_dirs(path))  # a directory of runs
        else:
            out.append(resolve_run(ref, db))  # a run directory or a run id, as softrt show takes them
    seen: set[Path] = set()
    unique = []
    for p in out:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    if not unique:
        raise ConfigError("no run to report", hint="give one or more run directories or run ids (softrt history)")
    return unique


_PNG_HINT = "choose another --png directory"


def build_report(
    run_dirs_or_ids: Iterable[str | os.PathLike],
    out_html: str | os.PathLike,
    png_dir: str | os.PathLike | None = None,
    *,
    db: Path | str | None = None,
    comparison: list[str] | None = None,
    option: str = "-o",
) -> ReportResult:
    """Write the report of the runs *run_dirs_or_ids* to *out_html* (and every plot to *png_dir*).

    *comparison*: the verdict lines of the ``softrt compare`` that made the runs, shown under the
    side-by-side table. *option* named the output (``-o``, ``--report``), for the fix of an error.

    Raises ConfigError for an unknown run, an unwritable output, or when no run can be read.
    """
    out = Path(out_html)
    paths = resolve_runs(run_dirs_or_ids, db)
    hint = f"choose another file with {option}"
    check_target(out, "the report", hint)
    if png_dir is not None:
        check_dir(png_dir, "PNGs", _PNG_HINT)
    runs: list[RunView] = []
    broken: list[tuple[str, str]] = []
    for path in paths:
        try:
            runs.append(load_run(path))
        except SoftRTError as err:  # ConfigError included: a corrupt run is a note here, not the end
            broken.append((str(path), str(err)))
    if not runs:
        raise ConfigError(
            f"no run could be read: {broken[0][1]}"
            if len(broken) == 1
            else f"none of the {len(broken)} runs could be read; first: {broken[0][1]}",
            hint="check the run directories (samples.parquet, summary.json)",
        )
    plots = make_plots(runs)
    plots.append(return_levels(runs))  # the tail model's (issue 33): after the exceedance curves it extends
    svgs: dict[str, bytes] = {}
    pngs: list[Path] = []
    for p in plots:
        if p.figure is None:
            continue
        svgs[p.key] = render(p.figure, "svg")
        if png_dir is not None:
            target = Path(png_dir) / f"{p.key}.png"
            write_file(target, render(p.figure, "png"), what="a PNG", hint=_PNG_HINT)
            pngs.append(target)
        p.figure = None  # free the figure's artists before the next one is drawn
    text = page(runs, plots, svgs, broken, softrt_version(), comparison)
    where = write_file(out, text, what="the report", hint=hint)  # a reader never sees half a report
    return ReportResult(where, [r.run_id for r in runs], broken, pngs)
