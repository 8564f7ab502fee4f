"""``softrt tail SOURCE``: a cyclictest -v file (synthetic, and one cyclictest really wrote), a
CSV/Parquet column, an rt-tests --json histogram, a stored run; bad input is one line and exit 2,
a refusal exit 0 with its reason (also in --json)."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from softrt.schema.tail import Tail

from ..synthetic import write_synthetic_run


def _cyclictest_v(path, latencies_us, thread: int = 0) -> None:
    """The lines cyclictest -v writes (rt-tests cyclictest.c): "THREAD: INDEX: LATENCY" after its header."""
    head = "Max CPUs = 2\nOnline CPUs = 2\n# /dev/cpu_dma_latency set to 0us\nThread 0 Interval: 750\n"
    body = "".join(f"{thread:8d}:{i:8d}:{int(v):8d}\n" for i, v in enumerate(latencies_us))
    path.write_text(head + body + "T: 0 ( 8398) P:80 I:250 C:  79093 Min:      9 Act:  109 Avg:   28 Max:   28552\n")


def _latencies(n: int, seed: int = 0) -> np.ndarray:
    """A bounded tail (GPD ξ = -0.2 above 30 µs at 2 % of cycles), in whole µs as cyclictest writes them."""
    rng = np.random.default_rng(seed)
    lat = rng.integers(8, 30, n).astype(float)
    tail = rng.random(n) < 0.02
    u = rng.random(tail.sum())
    lat[tail] = 30 + 20 / -0.2 * (u**0.2 - 1)  # GPD(ξ = -0.2, σ = 20) by inversion
    return np.floor(lat)


def test_a_cyclictest_v_file_gives_the_tail_and_its_json(tmp_path, run_cli):
    f = tmp_path / "ct.txt"
    _cyclictest_v(f, _latencies(60_000))
    code, out, err = run_cli("tail", str(f), "--deadline-us", "100", "--plot", str(tmp_path / "rl.png"))
    assert code == 0, err
    assert out.startswith("Tail of latency_us, 15 s, 60,000 cycles (deadline 100.0 µs):")
    assert "GPD ξ = " in out and "worst cycle once a day" in out and (tmp_path / "rl.png").stat().st_size > 0
    code, out, err = run_cli("tail", str(f), "--deadline-us", "100", "--json")
    tail = Tail.from_dict(json.loads(out))
    assert code == 0 and tail.fitted and tail.hours == pytest.approx(60_000 * 250e-6 / 3600)
    assert tail.xi.low < -0.2 < tail.xi.high and not tail.heavy  # the known shape
    assert tail.return_levels[0].low_us < tail.return_levels[0].level_us < tail.return_levels[0].high_us


def test_a_refusal_is_an_answer_and_bad_input_one_line(tmp_path, run_cli):
    few = tmp_path / "few.txt"
    _cyclictest_v(few, _latencies(2_000))
    code, out, _ = run_cli("tail", str(few), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["refused"].startswith("only ") and doc["xi"] is None and doc["late_rate_bound_per_h"] > 0
    (tmp_path / "const.csv").write_text("period_us\n" + "250\n" * 5000)
    (tmp_path / "neg.csv").write_text("x\n" + "".join(f"{v}\n" for v in np.arange(-5, 4995)))
    (tmp_path / "empty.txt").write_text("")
    cases = [
        (str(tmp_path / "empty.txt"),),
        (str(tmp_path / "const.csv"), "--column", "period_us", "--deadline-us", "270"),
        (str(tmp_path / "const.csv"), "--column", "nope", "--deadline-us", "270"),
        (str(tmp_path / "neg.csv"), "--column", "x", "--deadline-us", "270"),
        (str(tmp_path / "const.csv"), "--column", "period_us"),  # no deadline for a column
        (str(few), "--target", "1/fortnight"),
        (str(few), "--gap-ms", "0"),
        (str(tmp_path / "missing"),),
    ]
    for args in cases:
        code, out, err = run_cli("tail", *args)
        assert code == 2 and out == "" and err.startswith("softrt: error: ") and err.count("\n") == 1, (args, err)


def test_a_parquet_column_and_a_stored_run(tmp_path, run_cli):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"lat": _latencies(40_000, seed=1)}), tmp_path / "c.parquet")
    code, out, err = run_cli("tail", str(tmp_path / "c.parquet"), "--column", "lat", "--deadline-us", "60", "--json")
    assert code == 0 and Tail.from_dict(json.loads(out)).cycles == 40_000, err
    # A run stored without tail.npz (recorded before softrt kept it): one pass over its samples.
    run = write_synthetic_run(tmp_path / "runs", cycles=20_000, misses=[(5_000, 3)], motion=False)
    code, out, err = run_cli("tail", str(run))
    assert code == 0, err
    assert out.startswith("Tail of period_us, ") and "(deadline 270.0 µs)" in out


def test_an_rt_tests_histogram_has_no_time_order(tmp_path, run_cli):
    rng = np.random.default_rng(2)
    lat = np.floor(10 + rng.exponential(4, 50_000)).astype(int)
    values, counts = np.unique(lat, return_counts=True)
    doc = {
        "file_version": 1,
        "cmdline:": "cyclictest -m -p80 -i250 -t1 -h400 --json=x.json",
        "rt_test_version:": "2.5",
        "num_threads": 1,
        "resolution_in_ns": 0,
        "thread": {
            "0": {
                "histogram": {str(v): int(c) for v, c in zip(values, counts)},
                "cycles": int(lat.size),
                "min": int(lat.min()),
                "max": int(lat.max()),
                "avg": float(lat.mean()),
                "cpu": 1,
                "node": 0,
            }
        },
    }
    f = tmp_path / "ct.json"
    f.write_text(json.dumps(doc))
    code, out, err = run_cli("tail", str(f), "--deadline-us", "60", "--json")
    tail = Tail.from_dict(json.loads(out))
    assert code == 0, err
    assert tail.caveat and "no time order" in tail.caveat and tail.gap_ms is None and tail.cycles == lat.size


@pytest.mark.rt
@pytest.mark.skipif(shutil.which("cyclictest") is None, reason="needs rt-tests (scripts/setup installs it)")
def test_a_file_cyclictest_wrote(tmp_path, run_cli, machine_lock):
    """cyclictest's own -v output, 1 s (its header's "Interval" is not -i's: the interval is ours)."""
    f = tmp_path / "ct.txt"
    with f.open("w") as out:
        subprocess.run(
            ["cyclictest", "-m", "-p80", "-i250", "-a1", "-t1", "-D1", "-q", "-v"], stdout=out, check=True, timeout=30
        )
    code, out, err = run_cli("tail", str(f), "--json")
    tail = Tail.from_dict(json.loads(out))
    assert code == 0, err
    assert 3_000 < tail.cycles < 4_100 and tail.series == "latency_us" and tail.deadline_us == 270.0
    assert tail.refused is not None or tail.fitted  # 1 s may be too short to fit: then it says why


@pytest.mark.rt
def test_a_run_carries_its_tail_and_softrt_tail_refits_it(tmp_path, run_cli, machine_lock, rt_settings_restored):
    """A 1 s run: the tail block in --json (the no-model bound always), the verdict's clause, and
    softrt tail RUN from its tail.npz with the same cycles."""
    code, out, err = run_cli("run", "--duration", "1s", "--no-trace", "--json", "--out-dir", str(tmp_path))
    assert code in (0, 1), err
    doc = json.loads(out)
    tail = Tail.from_dict(doc["tail"])
    assert tail.series == "period_us" and tail.deadline_us == 270.0 and tail.late_rate_bound_per_h > 0
    assert tail.cycles == doc["cycles"] - 1  # periods: one less than the records
    run = tmp_path / doc["run_id"]
    assert (run / "tail.npz").is_file()
    code, again, err = run_cli("tail", str(run), "--json")
    assert code == 0, err
    assert Tail.from_dict(json.loads(again)).cycles == tail.cycles
    code, shown, err = run_cli("show", str(run))
    assert code == 0 and "(95 %, no model)" in shown and "Tail of period_us" in shown, err
