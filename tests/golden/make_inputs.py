"""Make the golden inputs once: real run directories and real rt-tests outputs (tests/golden; not run by the suite).

The golden outputs (``capture.py``) are only as good as their inputs, so the inputs are what softrt and
rt-tests really write on a machine, not synthetic ones. This script records how they were made; it runs
real-time loops, so run it by hand (as root, on an idle machine), and only when an input must change
(e.g. a new kind of run directory to cover). It writes into ``--work`` (a scratch directory); copy what
you keep into ``tests/golden/inputs/`` (``--keep`` copies everything), name the run directories in
``RUNS`` of world.py, then run ``capture.py`` and review the diff.

    PYTHONPATH=src python tests/golden/make_inputs.py --work /tmp/golden-work [--keep]

Made (each is small: 1-2 s at 250 µs):

* ``runs/``: ``softrt run --duration 1s`` (traced, the default S-curve motion on one axis); ``softrt run
  --motion trapezoid --axes 2 --wait sleep --no-trace``; ``softrt run --samples late --profile none``
  (the late-cycle sample layout, untuned); one round of ``softrt compare tuned+load --duration 1s
  --load-backend builtin`` (a run with loads); ``softrt watch --pid PID --duration 2s`` of a cyclictest
  (a watch run per thread: its main thread and its real-time one; inputs/ keeps the real-time one).
* ``sources/``: ``cyclictest -v`` (per-cycle, text), ``cyclictest --json`` with a histogram (``-h 400``),
  ``oslat --json``, and a CSV of one run's periods (``period_us``, from its samples.parquet).

It holds softrt's machine real-time lock for the whole session (waiting for another run to end), and
gives its own softrt runs a lock of their own (``SOFTRT_STATE_DIR``), as tests/conftest.py does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOFTRT = [sys.executable, "-m", "softrt"]


def _take_machine_lock(wait_s: float = 1800.0) -> int:
    from softrt.platform import get_platform

    plat = get_platform()
    path = plat.machine_lock_path("rt-loop")
    end = time.monotonic() + wait_s
    while (fd := plat.try_lock(path)) is None:
        if time.monotonic() > end:
            sys.exit(f"another softrt holds the machine lock: {plat.lock_holder(path)}")
        time.sleep(1.0)
    return fd


def _sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def make_runs(work: Path) -> None:
    runs = work / "runs"
    common = ["--out-dir", str(runs), "-q", "--metrics-linger", "0"]
    _sh([*SOFTRT, "run", "--duration", "1s", *common])
    _sh(
        [
            *SOFTRT,
            "run",
            "--duration",
            "1s",
            "--motion",
            "trapezoid",
            "--axes",
            "2",
            "--wait",
            "sleep",
            "--no-trace",
            *common,
        ]
    )
    _sh([*SOFTRT, "run", "--duration", "1s", "--samples", "late", "--profile", "none", *common])
    _sh(
        [
            *SOFTRT,
            "compare",
            "tuned+load",
            "--duration",
            "1s",
            "--load-backend",
            "builtin",
            "--out-dir",
            str(runs),
            "-q",
            "--metrics-linger",
            "0",
        ]
    )


def make_watch(work: Path) -> None:
    runs = work / "runs"
    # A watch of a thread softrt did not write: cyclictest on CPU 0 at 1 ms, watched for 2 s.
    ct = subprocess.Popen(
        ["cyclictest", "-m", "-p", "70", "-i", "1000", "-a", "0", "-t", "1", "-D", "6", "-q"], stdout=subprocess.DEVNULL
    )
    try:
        time.sleep(1.0)
        # --pid: this cyclictest's threads only (not another one on the machine); its main thread sleeps
        # until the end, so the watch may say PARTIAL (exit 1) when cyclictest exits first: not an error.
        cmd = [
            *SOFTRT,
            "watch",
            "--pid",
            str(ct.pid),
            "--duration",
            "2s",
            "--out-dir",
            str(runs),
            "-q",
            "--metrics-linger",
            "0",
        ]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=False)
    finally:
        ct.wait()


def make_sources(work: Path) -> None:
    src = work / "sources"
    src.mkdir(parents=True, exist_ok=True)
    with open(src / "cyclictest-v.txt", "wb") as fh:
        _sh(["cyclictest", "-m", "-p", "80", "-i", "250", "-a", "1", "-t", "1", "-D", "1", "-q", "-v"], stdout=fh)
    _sh(
        [
            "cyclictest",
            "-m",
            "-p",
            "80",
            "-i",
            "250",
            "-a",
            "1",
            "-t",
            "1",
            "-h",
            "400",
            "-D",
            "2",
            "-q",
            f"--json={src / 'cyclictest.json'}",
        ],
        stdout=subprocess.DEVNULL,
    )
    _sh(["oslat", "--cpu-list", "1", "-D", "2", f"--json={src / 'oslat.json'}"], stdout=subprocess.DEVNULL)
    # A CSV of one softrt run's periods (µs), as a user exports a column from another tool.
    import numpy as np
    import pyarrow.parquet as pq

    first = min((work / "runs").glob("*/samples.parquet"))  # the first run made: softrt run --duration 1s

    detect_ns = pq.read_table(first, columns=["detect_ns"]).column("detect_ns").to_numpy()
    with open(src / "periods.csv", "w") as fh:  # the period as the time between two detected edges
        fh.write("cycle,period_us\n")
        fh.writelines(f"{i + 1},{p / 1000:.3f}\n" for i, p in enumerate(np.diff(detect_ns)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--keep", action="store_true", help="copy the results into tests/golden/inputs/")
    ap.add_argument("--only", choices=("runs", "watch", "sources"), default=None)
    args = ap.parse_args()
    os.environ["SOFTRT_HOME"] = str(args.work / "home")
    os.environ["SOFTRT_STATE_DIR"] = str(args.work / "state")
    (args.work / "state").mkdir(parents=True, exist_ok=True)
    saved = os.environ.pop("SOFTRT_STATE_DIR")
    fd = _take_machine_lock()  # the real machine lock (never the session's own)
    os.environ["SOFTRT_STATE_DIR"] = saved
    try:
        if args.only in (None, "runs"):
            make_runs(args.work)
        if args.only in (None, "watch"):
            make_watch(args.work)
        if args.only in (None, "sources"):
            make_sources(args.work)
    finally:
        os.close(fd)
    if args.keep:
        dest = HERE / "inputs"
        for sub in ("runs", "sources"):
            if (args.work / sub).is_dir():
                shutil.copytree(args.work / sub, dest / sub, dirs_exist_ok=True)


if __name__ == "__main__":
    main()
