"""The trace in a run: off, or unavailable (and the run goes on). Real runs on the last CPU.

Its removal on every other path is asserted by the runs of tests/cli/test_run.py that take those
paths: Ctrl-C (the attribution kept, a mount made for the run undone), a killed worker, and a killed
softrt (the next command removes its instance and its ring)."""

from __future__ import annotations

import os

import pytest

from softrt.schema.config import RunConfig
from softrt.session.run import run
from softrt.trace import tracefs

pytestmark = pytest.mark.rt
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="tracefs needs root")


def _quick(tmp_path, **kw) -> dict:
    return run(RunConfig(duration_ns=300_000_000, out_dir=tmp_path, **kw)).summary.to_dict()


def test_no_trace_says_so(tmp_path, state_dir):
    summary = _quick(tmp_path, trace=False)
    assert summary["why_late"] == {"tracing": "off (--no-trace)"} and summary["status"] == "complete"


def test_an_untuned_run_has_no_rt_cpu_to_trace(tmp_path, state_dir):
    summary = _quick(tmp_path, profile="none")
    assert summary["why_late"]["tracing"].startswith("unavailable: the loop is not pinned")


@pytest.mark.root
@needs_root
def test_an_instance_that_cannot_be_created_leaves_the_run_going(tmp_path, state_dir):
    path, mounted = tracefs.find_or_mount()
    taken = path / "instances" / f"softrt-{os.getpid()}"
    taken.mkdir()  # the name this run's instance would get
    try:
        summary = _quick(tmp_path)
    finally:
        tracefs.remove_instance(taken)
        if mounted is not None:
            mounted.undo()
    assert summary["status"] == "complete" and summary["cycles"] > 0
    assert (
        summary["why_late"]["tracing"].startswith("unavailable: ") and "File exists" in summary["why_late"]["tracing"]
    )


@pytest.mark.parametrize(
    "runtime, release, config, expected",
    [
        ("-1", "6.18.44", None, False),
        ("950000", "6.1.0-28-amd64", None, True),
        ("950000", "6.18.44", "CONFIG_SMP=y\n# CONFIG_RT_GROUP_SCHED is not set\n", False),  # the fair server instead
        ("950000", "6.18.44", "CONFIG_SMP=y\nCONFIG_RT_GROUP_SCHED=y\n", True),
        ("950000", "6.18.44", None, None),  # config not exposed: either
        (None, "6.18.44", None, None),
    ],
)
def test_rt_throttling_in_force_from_the_sysctl_and_the_kernel(tmp_path, runtime, release, config, expected):
    import gzip

    from softrt.trace.session import rt_throttling

    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text(release + "\n")
    if runtime is not None:
        (tmp_path / "proc/sys/kernel/sched_rt_runtime_us").write_text(runtime + "\n")
    if config is not None:
        with gzip.open(tmp_path / "proc/config.gz", "wt") as fh:
            fh.write(config)
    assert rt_throttling(str(tmp_path)) is expected
