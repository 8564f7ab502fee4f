"""cli.options: ``--priority``'s help states the Windows mapping the run applies (issue 34, item 4)."""

from __future__ import annotations

import re

from softrt.cli.options import PRIORITY_HELP
from softrt.platform.windows.backend import base_priority, realtime_level


def test_the_priority_help_states_the_windows_base_priorities_the_run_sets():
    stated = re.findall(r"(\d+)(?:-(\d+))? → (\d+)", PRIORITY_HELP)
    assert len(stated) == 4
    for first, last, base in stated:
        for priority in range(int(first), int(last or first) + 1):
            assert base_priority(realtime_level(priority)) == int(base), priority
        if last:  # a range is stated whole: the priorities beside it give another base
            assert base_priority(realtime_level(int(first) - 1 if int(first) > 1 else int(last) + 1)) != int(base)
    assert base_priority(realtime_level(99)) == 31 and realtime_level(99) == 15  # TIME_CRITICAL
    assert realtime_level(1) == -15  # IDLE


def test_run_and_compare_show_it(run_cli):
    for command in ("run", "compare"):
        code, out, _ = run_cli(command, "--help")
        assert code == 0 and "80 → 28" in " ".join(out.split())
