"""``softrt check``: is this machine ready for a 250 µs loop, and if not, why not? (CLI layer)"""

from __future__ import annotations

import json
import sys

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..audit import GROUPS, Report, Status, default_rt_cpu, run_checks
from ..cpus import CpuSet
from ..errors import ConfigError
from ..units import NS_PER_S
from .options import root_option, rt_cpus_option, time_option
from .output import make_console, unbounded
from .render import emit

STATUS_STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.NA: "dim"}
EVIDENCE_LINES = 4


def render_report(report: Report, verbose: bool = False, expand: bool = True) -> Group:
    """The check tables, one per group, then the verdict and what to fix first; the tables fill the
    width (*expand*) unless it is a pipe's, where they are as wide as their content (cli.output)."""
    parts = [
        Text(
            f"softrt check: real-time CPU(s) {report.rt_cpus}, housekeeping CPU(s) {report.housekeeping}"
            + (f", read from {report.root}" if report.root != "/" else ""),
            style="bold",
        )
    ]
    for group, label in GROUPS.items():
        rows = [f for f in report.findings if f.group == group]
        if not rows:
            continue
        table = Table(title=label, title_justify="left", title_style="bold", show_edge=False, expand=expand)
        table.add_column("status", no_wrap=True)
        table.add_column("severity", no_wrap=True)
        table.add_column("check", ratio=1)
        table.add_column("finding", ratio=3)
        for f in rows:
            cell = Text(f.summary)
            if f.status is not Status.OK or verbose:
                shown = f.evidence if verbose else f.evidence[:EVIDENCE_LINES]
                for line in shown:
                    cell.append(f"\n  {line}", style="dim")
                if len(shown) < len(f.evidence):
                    cell.append(f"\n  … {len(f.evidence) - len(shown)} more (-v)", style="dim")
            if f.status in (Status.FAIL, Status.WARN):
                if f.why:
                    cell.append(f"\nwhy: {f.why}", style="italic")
                if f.fix:
                    cell.append(f"\nfix: {f.fix}", style="cyan")
            table.add_row(Text(f.status.value.upper(), style=STATUS_STYLE[f.status]), f.severity.value, f.title, cell)
        parts += [Text(""), table]
    parts += [Text(""), Text(report.verdict, style="bold green" if report.ready else "bold red")]
    first = report.priorities()
    if first:
        parts.append(Text("Fix first:", style="bold"))
        for i, f in enumerate(first, 1):
            tag = " [softrt tune]" if f.tunable else " [reboot]" if f.reboot else ""
            parts.append(Text(f"  {i}. {f.title}: {f.fix}{tag}"))
    counts = report.counts()
    parts.append(
        Text(
            f"{counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail, {counts['n/a']} n/a. "
            "Run-time fixes: softrt tune --rt-cpus " + str(report.rt_cpus),
            style="dim",
        )
    )
    return Group(*parts)


@click.command(
    "check",
    epilog="""\b
Examples:
  softrt check                                the CPU softrt run would use
  softrt check --rt-cpus 2-3 --sample 10s -v
  softrt check --root capture/ --json         a tree captured by scripts/capture_sysfs.py""",
)
@rt_cpus_option("3")
@time_option(
    "--sample",
    "2s",
    "How long to sample what runs on the RT CPUs (0: no sample; bare number: s; at most 60s).",
    unit="s",
    max_ns=60 * NS_PER_S,
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Show every check's evidence.")
@root_option("Read /proc and /sys under this directory (a tree captured by scripts/capture_sysfs.py).")
@click.option(
    "--as-system",
    "as_system",
    is_flag=True,
    help="Windows, elevated: read the SoftRealTime CSP (SetRTCores) as SYSTEM through a one-off scheduled "
    "task; softrt itself, its history and state stay yours.",
)
def command(rt_cpus, sample_ns, as_json, verbose, root, as_system):
    """Check whether this machine can hold a 250 µs loop; say what is wrong, why, and the fix.

    Exit status: 0 ready, 1 not ready, 2 bad input.
    """
    sample_s = sample_ns / NS_PER_S
    if rt_cpus is not None and not rt_cpus:
        example = default_rt_cpu(root)
        raise ConfigError(
            "no real-time CPU given", hint=f"name one or more CPUs, e.g. --rt-cpus {1 if example is None else example}"
        )
    if rt_cpus is None:
        cpu = default_rt_cpu(root)  # None: a Windows capture that does not say how many CPUs (the report says so)
        rt_cpus = CpuSet([cpu] if cpu is not None else [])
    out = make_console()
    if sample_s and not as_json and out.is_terminal and root == "/":
        with make_console(stderr=True).status(f"sampling CPU(s) {rt_cpus} for {sample_s:g} s…"):
            report = run_checks(rt_cpus, root, sample_s, as_system)
    else:
        report = run_checks(rt_cpus, root, sample_s, as_system)
    if as_json:
        sys.stdout.write(json.dumps(report.document().to_dict(), indent=2) + "\n")
    else:
        emit(out, render_report(report, verbose, expand=not unbounded(out)))
    return 0 if report.ready else 1
