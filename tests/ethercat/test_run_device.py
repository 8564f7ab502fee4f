"""``softrt run --device ethercat:IFACE``: the real worker, the real pysoem master, the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.rt


def test_softrt_run_drives_the_simulated_bus(start_sim, ecat_ns, tmp_path):
    sim = start_sim("--slaves", "2", "--bad-wkc-every", "500", fifo=True)
    env = {**os.environ, "SOFTRT_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.run(
        ecat_ns.cmd(sys.executable, "-m", "softrt", "run", "--device", f"ethercat:{ecat_ns.master_iface}",
                    "--axes", "2", "--period", "1ms", "--duration", "2s", "--json", "--out-dir", str(tmp_path)),
        capture_output=True, text=True, env=env, timeout=120)
    s = json.loads(proc.stdout)
    assert proc.returncode == 0, (s["status"], s["partial_reason"], proc.stderr)
    assert s["status"] == "complete" and s["config"]["device"] == f"ethercat:{ecat_ns.master_iface}"
    board = s["board"]
    assert board["writes"] == s["cycles"] > 1000
    # Every injected wrong working counter is a device error and a missed update.
    injected = sim.stats()["injected"]["bad_wkc"]
    assert injected >= 2
    assert board["wkc_errors"] == injected == s["misses"]["device_errors"] - board["drive_not_enabled_cycles"] - board["lost_frames"]
    assert s["rtt_us"]["p50"] > 0
    assert s["motion"]["writes"] == s["cycles"]
    after = sim.stats()["slaves"]  # on stop: drives disabled, bus back in INIT
    assert [x["al_state"] for x in after] == ["INIT", "INIT"]
    assert [x["drive_state"] for x in after] == ["SWITCH_ON_DISABLED"] * 2


def test_missing_interface_is_bad_input(tmp_path):
    env = {**os.environ, "SOFTRT_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.run([sys.executable, "-m", "softrt", "run", "--device", "ethercat:nosuch0", "--duration", "1s",
                           "--out-dir", str(tmp_path / "runs")], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "nosuch0" in lines[0], proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
