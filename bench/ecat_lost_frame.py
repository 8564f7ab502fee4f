"""What one lost EtherCAT frame costs the loop: cycles lost per dropped frame (issue 11).

Runs ``softrt run --device ethercat:ecm0`` against ``softrt ecat-sim`` on a veth pair in a
private network namespace; once the run's loop cycles (seen in its checkpoints), the simulator
drops every N-th process-data frame (control socket), and stops before the run ends, so the
drops counted are the run's. Per period it prints the drops injected, the frames the master lost,
the missed updates, the cycles that never ran (scheduled - run) and, from the records, what each
dropped frame cost: the missed updates of its own record plus the next one (1 = its own cycle
only) and how often the next write landed in its own window (no missed update). The dropped frames are found in the
records as the simulator made them: every N-th process-data frame, so lost records N apart; any
other lost frame is a reply that came back late (a stall of the machine), counted apart.

    sudo python bench/ecat_lost_frame.py                       # this tree
    sudo python bench/ecat_lost_frame.py --src /work/main/src  # another tree's master (e.g. main)

The simulator (always this tree's) runs on CPU 0 with SCHED_FIFO 10 (``--no-fifo``: not), the
worker on the last CPU. Needs root (ip netns, raw sockets). Not a test: timing on a VM is noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE_SRC = Path(__file__).resolve().parent.parent / "src"


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


class Sim:
    def __init__(self, ns: str, slaves: int, fifo: bool, tmp: Path) -> None:
        self.path = tmp / "sim.sock"
        env = {**os.environ, "PYTHONPATH": str(HERE_SRC)}
        prefix = ["taskset", "-c", "0", *(["chrt", "-f", "10"] if fifo else [])]
        self.proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                ns,
                *prefix,
                sys.executable,
                "-m",
                "softrt",
                "ecat-sim",
                "--iface",
                "ecs0",
                "--slaves",
                str(slaves),
                "--control",
                str(self.path),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        line = self.proc.stdout.readline()
        assert "answering" in line, line
        while not self.path.exists():
            time.sleep(0.01)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(tmp / "client.sock"))
        self.sock.settimeout(5)

    def control(self, **req) -> dict:
        self.sock.sendto(json.dumps(req).encode(), str(self.path))
        return json.loads(self.sock.recv(1 << 20))

    def stop(self) -> None:
        self.sock.close()
        self.proc.terminate()
        self.proc.wait(5)


def checkpoint_cycles(out: Path) -> int:
    for path in out.glob("*/summary.json"):
        try:
            return int(json.loads(path.read_text()).get("cycles") or 0)
        except (OSError, ValueError):
            pass
    return 0


def one_run(
    src: Path,
    period: str,
    period_ns: int,
    duration_s: float,
    drop_every: int,
    slaves: int,
    fifo: bool,
    extra: list[str],
) -> dict:
    ns = f"softrt-bench-{os.getpid()}"
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "-n", ns, "link", "add", "ecm0", "type", "veth", "peer", "name", "ecs0")
        for link in ("lo", "ecm0", "ecs0"):
            sh("ip", "-n", ns, "link", "set", link, "up")
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            sim = Sim(ns, slaves, fifo, tmp)
            try:
                env = {
                    **os.environ,
                    "PYTHONPATH": str(src),
                    "SOFTRT_STATE_DIR": str(tmp / "state"),
                    "SOFTRT_CHECKPOINT_INTERVAL": "0.1",
                }
                run = subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        ns,
                        sys.executable,
                        "-m",
                        "softrt",
                        "run",
                        "--device",
                        "ethercat:ecm0",
                        "--axes",
                        str(slaves),
                        "--period",
                        period,
                        "--duration",
                        f"{duration_s}s",
                        "--no-trace",
                        "--json",
                        "--out-dir",
                        str(tmp / "runs"),
                        *extra,
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                )
                scheduled = int(duration_s * 1e9 // period_ns)
                while checkpoint_cycles(tmp / "runs") < 1 and run.poll() is None:
                    time.sleep(0.02)
                first = sim.control(cmd="drop", every=drop_every)
                while checkpoint_cycles(tmp / "runs") < 0.9 * scheduled and run.poll() is None:
                    time.sleep(0.02)
                last = sim.control(cmd="drop", every=0)
                out, err = run.communicate(timeout=120)
                s = json.loads(out)
                per_drop = drop_costs(tmp / "runs" / s["run_id"], drop_every)
            finally:
                sim.stop()
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    b = s["board"]
    dropped = last["injected"]["drop"] - first["injected"]["drop"]
    lost_cycles = scheduled - s["cycles"]
    return {
        "period": period,
        "status": s["status"],
        "reason": s["partial_reason"],
        "scheduled": scheduled,
        "run": s["cycles"],
        "never_ran": lost_cycles,
        "dropped": dropped,
        "lost_frames": b["lost_frames"],
        "missed": s["misses"]["missed_updates"],
        "rtt_p50_us": (s.get("rtt_us") or {}).get("p50"),
        "missed_per_drop": round(s["misses"]["missed_updates"] / dropped, 2) if dropped else None,
        "never_ran_per_drop": round(lost_cycles / dropped, 2) if dropped else None,
        **per_drop,
    }


def drop_costs(run_dir: Path, drop_every: int) -> dict:
    """From the records: what each dropped frame cost (see the module docstring)."""
    import numpy as np

    sys.path.insert(0, str(HERE_SRC))
    from softrt.store.rundir import read_samples

    r = read_samples(run_dir)
    lost = np.flatnonzero(r["wkc"] < 0)
    if not len(lost):
        return {}
    residues, counts = np.unique(lost % drop_every, return_counts=True)
    drops = lost[lost % drop_every == residues[np.argmax(counts)]]
    drops = drops[drops < len(r) - 1]
    cost = r["missed"][drops] + r["missed"][drops + 1]
    return {
        "drops_in_records": int(len(drops)),
        "late_replies": int(len(lost) - len(drops)),
        "cost_per_drop_mean": round(float(cost.mean()), 2),
        "cost_per_drop_max": int(cost.max()),
        "next_cycle_on_time": round(float(np.mean(r["missed"][drops + 1] == 0)), 3),
        "lost_frame_rtt_us_p50": round(float(np.median(r["rtt_ns"][drops])) / 1e3, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=HERE_SRC, help="softrt source tree whose master runs")
    ap.add_argument("--periods", default="1ms,250us")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    ap.add_argument("--drop-every", type=int, default=100)
    ap.add_argument("--slaves", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--no-fifo", dest="fifo", action="store_false")
    ap.add_argument("--extra", default="", help="more `softrt run` arguments, e.g. '--bus-timeout 1s'")
    args = ap.parse_args()
    units = {"ms": 1_000_000, "us": 1_000}
    for period in args.periods.split(","):
        period_ns = int(float(period[:-2]) * units[period[-2:]])
        for _ in range(args.repeat):
            print(
                json.dumps(
                    one_run(
                        args.src,
                        period,
                        period_ns,
                        args.duration,
                        args.drop_every,
                        args.slaves,
                        args.fifo,
                        args.extra.split(),
                    )
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
