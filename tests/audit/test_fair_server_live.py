"""kernel.fair_server and its tune step on this machine's own kernel (root; Linux 6.12+).

What the kernel answers is found independently of softrt: util-linux ``unshare --mount`` mounts
debugfs in a private mount namespace and ``cat`` reads the fair server's runtime (on the benchmark VM
the kernel refuses it even to root: "Operation not permitted").
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from softrt.audit import plan_tune, run_checks
from softrt.cpus import CpuSet
from softrt.platform.linux import fairserver

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="debugfs is root's"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare"),
]

CPU = max(os.sched_getaffinity(0))


def _debugfs_mounts() -> list[str]:
    return [ln for ln in open("/proc/mounts") if ln.split()[2:3] == ["debugfs"]]


@pytest.fixture(scope="module")
def kernel_says() -> tuple[int, str]:
    """(exit status, output) of reading the runtime the way an administrator would."""
    if not fairserver.read("/", [CPU]).present:
        pytest.skip("this kernel has no fair server (Linux < 6.12)")
    path = fairserver.RUNTIME.format(cpu=CPU)
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", f"mount -t debugfs none /sys/kernel/debug && cat {path}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def test_the_check_says_what_the_kernel_says(kernel_says):
    rc, text = kernel_says
    mounts = _debugfs_mounts()
    f = next(f for f in run_checks(CpuSet([CPU]), "/", sample_s=0).findings if f.id == "kernel.fair_server")
    assert _debugfs_mounts() == mounts  # a probe in a private mount namespace leaves nothing mounted here
    if rc != 0 and "Operation not permitted" in text:
        assert "debugfs is locked down" in f.evidence[0], f.evidence
        assert f.fix.startswith("the runtime cannot be changed here (debugfs is locked down)"), f.fix
        assert f.status.value in ("fail", "warn")
    else:
        assert rc == 0, text
        shown = "runtime 0: off" if int(text) == 0 else f"runtime {int(text) / 1e6:g} ms"
        assert shown in f.evidence[0], (f.evidence, text)


def test_tune_plans_what_the_kernel_allows(kernel_says):
    rc, text = kernel_says
    plan = plan_tune(CpuSet([CPU]))
    steps = [s for s in plan.steps if s.check == "kernel.fair_server"]
    if rc != 0 and "Operation not permitted" in text:
        assert steps == [] and any("locked down" in n and "cores.tasks" in n for n in plan.skipped), plan.skipped
        assert "kernel.fair_server" not in {c for c, _ in plan.manual}  # the task moves are the fix
    elif int(text) > 0 and fairserver.read("/", [CPU]).debugfs == "mounted":
        assert [(s.target, s.after) for s in steps] == [(fairserver.RUNTIME.format(cpu=CPU), "0")]
