"""A lab's history under load (issue 30, items 1 to 3). Not a test.

Three figures on a real server (``--db postgresql://…``, or ``$SOFTRT_TEST_PG`` as scripts/ci-postgres
sets it) and, for comparison, on a SQLite file:

1. ``--writers`` processes store ``--runs`` runs each into one history at once (each run once, and
   one run every writer stores): wall time, runs per second, and that every run is there exactly once;
2. ``softrt push`` of ``--runs`` runs (synthetic, 2,000 cycles each) with an archive: the first push
   (rows and folders), then a second one that finds nothing to send (the cost of a cron push);
3. the same push cut by a stopped server after half of the runs (``--stop``/``--start``: shell
   commands, e.g. the harness's ``pg_ctl … stop -m immediate``), then finished: runs present once.

    PYTHONPATH=src python bench/lab_push.py --db postgresql://softrt@127.0.0.1:5432/softrt
    PYTHONPATH=src python bench/lab_push.py --writers 8 --runs 50 --stop "$STOP" --start "$START"
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote


def make_runs(base: Path, n: int, tag: str) -> list[Path]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's tests/synthetic.py
    from tests.synthetic import write_synthetic_run

    t0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
    return [
        write_synthetic_run(
            base,
            cycles=2_000,
            seed=k,
            started_at=t0 + timedelta(seconds=k),
            run_id=f"20261201-{k // 3600:02d}{k // 60 % 60:02d}{k % 60:02d}-{tag}-{k:04x}",
        )
        for k in range(n)
    ]


def _writer(target: str, paths: list[str]) -> None:
    from softrt.store.history import History

    history = History(target)
    for path in paths:
        history.add_run(path)


def writers(target: str, runs: list[Path], n: int) -> dict:
    from softrt.store.history import History

    shared = str(runs[-1])
    parts = [[str(p) for p in runs[k:-1:n]] + [shared] for k in range(n)]
    ctx = multiprocessing.get_context("fork")
    t = time.perf_counter()
    procs = [ctx.Process(target=_writer, args=(target, part)) for part in parts]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    wall = time.perf_counter() - t
    ids = [r.run_id for r in History(target).list_runs()]
    rows = sum(len(part) for part in parts)
    return {
        "writers": n,
        "rows_written": rows,
        "wall_s": round(wall, 2),
        "rows_per_s": round(rows / wall, 1),
        "exit_codes_ok": all(p.exitcode == 0 for p in procs),
        "exactly_once": len(ids) == len(set(ids)) == len(runs),
    }


def pushes(target: str, runs: list[Path], tmp: Path, stop: str | None, start: str | None) -> dict:
    from softrt.store.history import History
    from softrt.store.lab import Lab, push

    local = History(tmp / "local.sqlite")
    local.add_runs(runs)
    lab = Lab(target, str(tmp / "archive"))
    t = time.perf_counter()
    first = push(lab, local)
    first_s = time.perf_counter() - t
    t = time.perf_counter()
    again = push(lab, local)
    again_s = time.perf_counter() - t
    out = {
        "runs": len(runs),
        "first_push_s": round(first_s, 2),
        "runs_per_s": round(len(first.sent) / first_s, 1),
        "second_push_s": round(again_s, 3),
        "second_push_sent": len(again.sent),
    }
    if stop and start:
        local2 = History(tmp / "local2.sqlite")
        extra = make_runs(tmp / "runs2", len(runs), "cut")
        local2.add_runs(extra)
        half = extra[len(extra) // 2].name

        def cut(run_id: str) -> None:
            if run_id == half:
                subprocess.run(stop, shell=True, check=True, capture_output=True)

        try:
            push(lab, local2, on_run=cut)
            out["cut"] = "the push was not cut"
        except Exception as err:  # noqa: BLE001 - LabUnreachable expected; any other error is reported by name
            out["cut_error"] = type(err).__name__
        finally:
            subprocess.run(start, shell=True, check=True, capture_output=True)
        t = time.perf_counter()
        rest = push(lab, local2)
        ids = [r.run_id for r in History(target).list_runs()]
        archived = sorted(p.name for p in (tmp / "archive").glob("rig=*/date=*/*"))
        out.update(
            {
                "after_cut_sent": len(rest.sent),
                "after_cut_s": round(time.perf_counter() - t, 2),
                "exactly_once": len(ids) == len(set(ids)) == 2 * len(runs) and archived == sorted(ids),
            }
        )
    return out


def pg_schema(base: str) -> tuple[str, callable]:
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")

    def drop() -> None:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")

    return base + ("&" if "?" in base else "?") + "options=" + quote(f"-csearch_path={name}"), drop


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=os.environ.get("SOFTRT_TEST_PG"), help="a PostgreSQL URL [$SOFTRT_TEST_PG]")
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--runs", type=int, default=40, help="runs per figure (writers: in all)")
    ap.add_argument("--stop", default=os.environ.get("SOFTRT_TEST_PG_STOP"))
    ap.add_argument("--start", default=os.environ.get("SOFTRT_TEST_PG_START"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        runs = make_runs(tmp / "runs", args.runs, "b")
        engines = [("sqlite", str(tmp / "lab.sqlite"), lambda: None)]
        if args.db:
            engines.append(("pg", *pg_schema(args.db)))
        for name, target, drop in engines:
            try:
                print(name, "writers", writers(target, runs, args.writers), flush=True)
                sub = tmp / f"push-{name}"
                sub.mkdir()
                target2 = str(tmp / "lab2.sqlite") if name == "sqlite" else pg_schema(args.db)
                if name == "pg":
                    target2, drop2 = target2
                try:
                    print(
                        name,
                        "push",
                        pushes(target2, runs, sub, *((args.stop, args.start) if name == "pg" else (None, None))),
                        flush=True,
                    )
                finally:
                    if name == "pg":
                        drop2()
            finally:
                drop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
