"""``softrt tune``: plan the run-time fixes, apply them with --apply, undo them with --revert (CLI layer)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections import Counter
from pathlib import Path

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..audit import (
    AFFINITY,
    KINDS,
    Plan,
    Result,
    apply_plan,
    change_kind,
    default_rt_cpu,
    plan_tune,
    privilege,
    revert,
    short_target,
)
from ..cpus import CpuSet
from ..errors import ConfigError
from ..platform.journal import Outcome
from ..schema.text import printable
from .options import file_option, root_option, rt_cpus_option
from .output import make_console, unbounded
from .render import emit

STYLE = {
    "applied": "green",
    "restored": "green",
    "gone": "dim",
    "skipped": "yellow",
    "failed": "bold red",
    "mismatch": "bold red",
}


def _rows(plan: Plan) -> list[tuple[str, str, str, str]]:
    """One row per kernel file or service; threads folded into one row per process."""
    rows, procs = [], {}
    for step in plan.steps:
        if step.kind == AFFINITY:
            procs.setdefault(step.target, []).append(step)
            continue
        rows.append((step.describe(), step.now, step.after, step.check))
    for pid, steps in procs.items():
        leader = next((s for s in steps if s.tid == int(pid)), steps[0])
        threads = f", {len(steps)} threads" if len(steps) > 1 else ""
        rows.append((f"move {leader.comm} (pid {pid}{threads})", leader.now, leader.after, leader.check))
    return rows


def render_plan(plan: Plan, who: str = "root", expand: bool = True) -> Group:
    """The plan: run-time changes, the kernel command line for the rest, what is left to do by hand, and
    each check that could not be read with what would read it (*who*: root, or Administrator); the
    table fills the width, *expand*, unless it is a pipe's (cli.output)."""
    table = Table(
        title=f"Run-time changes for real-time CPU(s) {plan.rt_cpus} ({len(plan.steps)})",
        title_justify="left",
        title_style="bold",
        show_edge=False,
        expand=expand,
    )
    for col in ("#", "change", "now", "after", "fixes"):
        table.add_column(col, overflow="fold")
    for i, (what, now, after, check) in enumerate(_rows(plan), 1):
        table.add_row(str(i), what, now, after, check)
    if plan.steps:
        parts = [table]
    elif plan.blind:  # never "no change needed" when a fatal/high check could not be read (issue 34)
        parts = [
            Text(
                f"No run-time change found, but {len(plan.report.unknown)} fatal/high check(s) could not be "
                "read: what they would need is not known (below).",
                style="bold yellow",
            )
        ]
    else:
        parts = [Text("No run-time change needed.", style="green")]
    if plan.kernel_params:
        parts += [
            Text(""),
            Text("Needs a reboot (never applied): add to the kernel command line", style="bold"),
            Text(f"  {plan.kernel_cmdline}", style="cyan"),
            Text(
                "  (Debian/Ubuntu: GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub; "
                'Fedora/RHEL: grubby --update-kernel=ALL --args="…")',
                style="dim",
            ),
        ]
    if plan.fixed_irqs:
        parts.append(
            Text("  The kernel moves these IRQs only at boot (managed or per-CPU): " + ", ".join(plan.fixed_irqs))
        )
    if plan.manual:
        parts += [Text(""), Text("Not done by softrt tune (by hand):", style="bold")]
        parts += [Text(f"  {check}: {fix}") for check, fix in plan.manual]
    if plan.unreadable:
        parts += [
            Text(""),
            Text(f"Could not be read, so nothing is planned for them ({len(plan.unreadable)}):", style="bold"),
        ]
        parts += [
            Text(
                f"  {f.id} ({f.severity.value}): {f.summary}; read it with: {f.reader or 'softrt as ' + who}",
                style="yellow" if f.unknown else "",
            )
            for f in plan.unreadable
        ]
    for note in plan.notes:
        parts.append(Text(f"Trade-off: {note}", style="yellow"))
    for note in plan.skipped:
        parts.append(Text(f"Left out: {note}", style="dim"))
    return Group(*parts)


def _values(outcomes: list[Outcome], kind: str) -> str:
    """``19 to 3`` (IRQs, threads, idle states), or each file's own value (kernel settings)."""
    if kind == "kernel settings":
        return ", ".join(f"{short_target(o.target)} {o.detail}" for o in outcomes)
    if kind in ("services", "settings"):
        return ", ".join(f"{o.target} ({o.detail})" for o in outcomes)
    idle = {"0": "enabled", "1": "disabled"} if kind == "idle states" else {}  # cpuidle's "disable" file
    by_value = Counter(idle.get(o.detail, o.detail) for o in outcomes)
    return "; ".join(f"{n} to {value}" for value, n in by_value.most_common())


def _routine(o: Outcome) -> bool:
    """Not worth a line of its own: a thread that exited, an IRQ that went away, a value already set."""
    return o.status == "gone" or (o.status == "skipped" and o.detail in ("the thread exited", "already set"))


def by_kind(result: Result, status: str) -> list[Text]:
    """One line per kind of change: what the revert put back (or how many the apply made), and
    how many were left alone because there was nothing to do."""
    lines = []
    for kind in KINDS:
        mine = [o for o in result.outcomes if change_kind(o.target) == kind]
        done, routine = [o for o in mine if o.status == status], [o for o in mine if _routine(o)]
        words = [f"restored {_values(done, kind)}" if status == "restored" else f"{len(done)} applied"] if done else []
        if routine:
            words.append(f"{len(routine)} left alone (exited, gone or already set)")
        if words:
            lines.append(Text(f"  {kind}: {'; '.join(words)}"))
    return lines


def render_result(result: Result, verb: str) -> Group:
    """What apply or revert did: each change that did not simply succeed, then every kind of change."""
    parts = []
    for o in result.outcomes:
        if o.status not in ("applied", "restored") and not _routine(o):
            fix = f" (by hand: {o.fix})" if o.fix else ""
            parts.append(Text(f"  {o.status}: {o.target}: {o.detail}{fix}", style=STYLE.get(o.status, "")))
    counts = ", ".join(f"{result.count(s)} {s}" for s in STYLE if result.count(s))
    parts.append(Text(f"{verb}: {counts or 'nothing to do'}", style="bold green" if result.complete else "bold red"))
    parts += by_kind(result, "restored" if verb == "Reverted" else "applied")
    return Group(*parts)


def _same(root: str, state_file: Path | None) -> str:
    """The options that make a suggested command act where this one did: ``--root`` and
    ``--state-file`` when given (issue 32: "Undo with: softrt tune --revert" after ``--apply --root
    TREE`` would have acted on this machine), shell-quoted, absolute (the user may cd first)."""
    parts = [] if os.path.abspath(root) == os.path.abspath(os.sep) else ["--root", os.path.abspath(root)]
    if state_file is not None:
        parts += ["--state-file", os.path.abspath(state_file)]
    return "".join(f" {printable(shlex.quote(part))}" for part in parts)


@click.command(
    "tune",
    epilog="""\b
Examples:
  softrt tune                                 print the plan for the CPU softrt run uses
  softrt tune --apply && softrt run           apply it (root or Administrator), then measure
  softrt tune --revert                        put back every value --apply replaced""",
)
@rt_cpus_option("1")
@click.option(
    "--apply",
    "do_apply",
    is_flag=True,
    help="Apply the plan (root; Administrator on Windows); every previous value is saved first.",
)
@click.option("--revert", "do_revert", is_flag=True, help="Restore exactly what --apply changed, and verify it.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan (and the result) as JSON.")
@root_option("Work on /proc and /sys under this directory (a captured tree) instead of this machine.")
@file_option(
    "--state-file",
    help="Where the previous values are saved [default: <state dir>/tune-state.jsonl; SOFTRT_STATE_DIR].",
)
def command(rt_cpus, do_apply, do_revert, as_json, root, state_file):
    """Plan every fix that can be applied at run time; change nothing unless --apply.

    Fixes that need a reboot are printed as the kernel command line to add. Exit status: 0 done,
    1 something could not be applied or restored, 2 bad input (nothing changed).
    """
    out = make_console()
    if do_apply and do_revert:
        raise ConfigError("--apply and --revert cannot be combined")
    if do_revert:
        if rt_cpus is not None:
            raise ConfigError("--revert restores what the saved state names; drop --rt-cpus")
        result = revert(root, state_file)
        if as_json:
            sys.stdout.write(json.dumps({"revert": result.document().to_dict()}, indent=2) + "\n")
        else:
            emit(out, render_result(result, "Reverted"))
            if not result.complete:
                emit(
                    out,
                    Text(
                        f"The state file {result.state_path} is kept; fix the values above and run "
                        f"softrt tune --revert{_same(root, state_file)} again.",
                        style="red",
                    ),
                )
        return 0 if result.complete else 1
    if rt_cpus is None:
        cpu = default_rt_cpu(root)  # as check and run choose it (None: a Windows capture that does not say)
        rt_cpus = CpuSet([cpu] if cpu is not None else [])
    plan = plan_tune(rt_cpus, root)
    result = apply_plan(plan, state_file) if do_apply else None
    if as_json:
        payload = {"plan": plan.document().to_dict(), "applied": result.document().to_dict() if result else None}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        who = privilege(root)
        emit(out, render_plan(plan, who, expand=not unbounded(out)))
        emit(out)
        if result is None:
            emit(
                out,
                Text(
                    f"Nothing was changed. Apply with: softrt tune --rt-cpus {plan.rt_cpus} --apply"
                    f"{_same(root, state_file)} (as {who}); undo with: softrt tune --revert"
                    f"{_same(root, state_file)}",
                    style="bold",
                ),
            )
        else:
            emit(out, render_result(result, "Applied"))
            if result.saved:
                emit(
                    out,
                    Text(
                        f"Previous values saved in {result.state_path}. Undo with: softrt tune --revert"
                        f"{_same(root, state_file)}",
                        style="bold",
                    ),
                )
            else:
                emit(
                    out,
                    Text(
                        "Nothing was changed (every setting was already as planned, or was skipped); "
                        "no state was saved.",
                        style="bold",
                    ),
                )
    return 0 if result is None or result.complete else 1
