"""Kernel trees are untrusted input (issue 22.2/22.4): bounded reads, regular files only, never
waited on, never out of the tree; writes never through a link, also one planted after the check."""

from __future__ import annotations

import gzip
import os

import pytest

from softrt.errors import SoftRTError
from softrt.platform import journal
from softrt.platform.kfiles import MAX_KFILE_BYTES, read_gzip_text, read_text, write_raw
from softrt.platform.linux import writable

from ..child import in_child

LIMIT = 512 << 20  # more address space for the child: a reader of /dev/zero whole runs out long before


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "tree/proc").mkdir(parents=True)
    return tmp_path / "tree"


def _plant(tree, what: str):
    cmdline = tree / "proc/cmdline"
    if what == "fifo":
        os.mkfifo(cmdline)
    elif what == "zero_device":
        if os.geteuid() != 0:
            pytest.skip("mknod needs root")
        os.mknod(cmdline, 0o600 | 0o020000, os.makedev(1, 5))  # a character device: /dev/zero's numbers
    elif what == "huge":
        with open(cmdline, "wb") as f:
            f.truncate(MAX_KFILE_BYTES + 1)  # sparse: costs no disk
    elif what == "link_out":
        cmdline.symlink_to("/proc/self/environ")  # something of the machine's, outside the tree
    return cmdline


@pytest.mark.parametrize("what", ["fifo", "zero_device", "huge", "link_out"])
def test_a_hostile_kernel_file_is_unreadable_at_once_never_a_hang_or_a_memory_error(tree, what):
    _plant(tree, what)
    assert in_child(read_text, str(tree), "/proc/cmdline", "fallback", max_memory=LIMIT, timeout_s=20) == "fallback"
    said = in_child(_error_of_reading, str(tree), max_memory=LIMIT, timeout_s=20)
    assert said.startswith("cannot read /proc/cmdline: ") and any(
        why in said for why in ("not a regular file", "larger than 64 MiB", "a link that leads out of the tree")
    ), said


def _error_of_reading(tree: str) -> str:
    try:
        return f"read {read_text(tree, '/proc/cmdline')!r}"
    except SoftRTError as err:
        return err.msg


def test_a_link_inside_the_tree_is_followed(tree):
    (tree / "proc/real").write_text("quiet\n")
    (tree / "proc/cmdline").symlink_to("real")
    assert read_text(str(tree), "/proc/cmdline") == "quiet"


def test_config_gz_is_bounded_once_decompressed_too(tree):
    (tree / "proc/config.gz").write_bytes(gzip.compress(b"\0" * ((1 << 20) + 1), compresslevel=1))  # 1 KB on disk
    with pytest.raises(OSError, match="larger than 1 MiB once decompressed"):
        read_gzip_text(str(tree), "/proc/config.gz", max_bytes=1 << 20)
    (tree / "proc/config.gz").write_bytes(gzip.compress(b"CONFIG_PREEMPT_RT=y\n"))
    assert read_gzip_text(str(tree), "/proc/config.gz") == "CONFIG_PREEMPT_RT=y\n"


def test_a_directory_swapped_for_a_link_after_the_check_is_never_written_through(tmp_path):
    """The ``tune --root DIR --revert`` race: the path was checked, then a parent became a link out."""
    root = tmp_path / "tree"
    kernel = root / "proc/sys/kernel"
    kernel.mkdir(parents=True)
    (kernel / "sched_rt_period_us").write_text("1000000\n")
    (kernel / "sched_rt_runtime_us").write_text("-1\n")
    outside = tmp_path / "outside/sys/kernel"
    outside.mkdir(parents=True)
    (outside / "sched_rt_runtime_us").write_text("precious\n")
    entry = {
        "kind": "file",
        "target": "/proc/sys/kernel/sched_rt_runtime_us",
        "before": "950000\n",
        "restore": "950000",
    }

    def swap_then_write(path, value):  # what the racing process did between the check and the write
        os.rename(root / "proc/sys", tmp_path / "moved")
        (root / "proc/sys").symlink_to(tmp_path / "outside/sys")
        writable.write_line(path, value)

    outcome = journal.restore_file(str(root), entry, swap_then_write)
    assert outcome.status == "failed" and "symbolic link" in outcome.detail
    assert (outside / "sched_rt_runtime_us").read_text() == "precious\n"
    with pytest.raises(OSError, match="symbolic link"):
        write_raw(root / "proc/sys/kernel/sched_rt_runtime_us", "0")
    assert (outside / "sched_rt_runtime_us").read_text() == "precious\n"


def test_a_capture_whose_output_is_a_fifo_reads_as_a_command_that_could_not_run(tmp_path):
    """Windows captures are read the same way: a FIFO named as a command's output never blocks."""
    from softrt.platform.windows.wincmd import INDEX, CapturedRunner

    (tmp_path / INDEX).write_text('{"sc query": {"out": "sc.txt", "rc": 0}}')
    os.mkfifo(tmp_path / "sc.txt")
    result = in_child(CapturedRunner(tmp_path), ["sc", "query"], timeout_s=20)
    assert result.rc == 127 and "captured output sc.txt unreadable: not a regular file" in result.err
