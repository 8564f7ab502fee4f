"""Hostile tune state files through the public reader ``audit.state.load(path, root)``: a valid
(header, entries), or one ConfigError line; never another exception, never an entry that names a file
outside /proc or /sys (issue 12, defects 1 and 9).

Written against the contract only (the state file is a :mod:`softrt.platform.journal`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fuzz import fuzz, reads

from softrt.audit import state
from softrt.errors import SoftRTError
from softrt.platform import journal

FUZZ = fuzz(100)


def _header(root: str) -> dict:
    return {"format": state.FORMAT, "version": journal.VERSION, "created": 1.0, "host": "pc", "pid": 1, "root": root}


def _load(root: Path, lines: list[str]):
    """state.load of a file of *lines* under *root*: the result, or the SoftRTError it raised (checked)."""
    path = root / "tune-state.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return reads(lambda: state.load(path, str(root)))


def _kernel_file(target: str) -> bool:
    """A target revert may write: a file under /proc/sys or /sys, not reached through a process's root."""
    parts = target.split("/")
    return (
        target.startswith(("/proc/sys/", "/proc/irq/", "/sys/"))
        and ".." not in parts
        and "root" not in parts
        and "cwd" not in parts
    )


TARGETS = st.sampled_from(
    [
        "/proc/sys/kernel/sched_rt_runtime_us",
        "/proc/irq/5/smp_affinity",
        "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
        "/etc/passwd",
        "/proc/../etc/x",
        "1234",
        "x.service",
        "a/b.service",
        "",
    ]
) | st.text(max_size=12)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=6,
)
ENTRIES = st.fixed_dictionaries(
    {"kind": st.sampled_from(["file", "affinity", "service", "other"]) | VALUES},
    optional={
        "target": TARGETS | VALUES,
        "before": st.sampled_from(["0-1", "0-99999999999", "1"]) | VALUES,
        "restore": st.text(max_size=8) | VALUES,
        "tid": st.integers(-5, 2**40) | VALUES,
    },
)


@FUZZ
@given(entries=st.lists(ENTRIES | VALUES, max_size=4), tail=st.sampled_from(["", '{"kind": "fi', "\x00\xff"]))
def test_fuzz_state_entries(entries, tail):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        lines = [json.dumps(_header(str(root)))] + [json.dumps(e) for e in entries] + ([tail] if tail else [])
        result = _load(root, lines)
        if not isinstance(result, Exception):
            _, loaded = result
            for entry in loaded:
                if entry.get("kind") == "file":
                    assert entry["target"].startswith(("/proc/", "/sys/")) and ".." not in entry["target"]


@FUZZ
@given(raw=st.binary(max_size=200))
def test_fuzz_state_bytes(raw):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tune-state.jsonl"
        path.write_bytes(raw)
        reads(lambda: state.load(path, tmp))


def test_state_with_huge_cpu_list_is_refused(tmp_path):
    """Defect 4 through a state file: an affinity entry of "0-99999999999" is one line, no allocation."""
    entry = {"kind": "affinity", "target": "1", "tid": 1, "before": "0-99999999999"}
    assert isinstance(_load(tmp_path, [json.dumps(_header(str(tmp_path))), json.dumps(entry)]), SoftRTError)


def test_state_deeply_nested_is_one_line(tmp_path):
    """Defect 9: a state line nested 100,000 deep was a RecursionError traceback."""
    _load(tmp_path, [json.dumps(_header(str(tmp_path))), "[" * 100_000 + "]" * 100_000])


@pytest.mark.parametrize("target", ["/proc/1/root/etc/passwd", "/proc/self/root/tmp/victim", "/proc/self/cwd/x"])
def test_state_never_returns_a_file_through_a_process_root(tmp_path, target):
    """Defects 1 and 9: /proc/<pid>/root/<any path> passed the prefix check, and revert wrote there as root."""
    entry = {"kind": "file", "target": target, "before": "x", "restore": "PWNED"}
    result = _load(tmp_path, [json.dumps(_header(str(tmp_path))), json.dumps(entry)])
    assert isinstance(result, SoftRTError) or all(_kernel_file(e["target"]) for e in result[1])


def test_state_header_with_a_nul_root_is_one_line(tmp_path):
    """Found by the fuzz: a header root with a NUL byte made os.path.realpath raise ValueError."""
    header = {**_header(str(tmp_path)), "root": "/\x00"}
    _load(tmp_path, [json.dumps(header)])
