"""Run your own cyclic Python code under softrt's real-time engine and measure every cycle.

    python examples/my_cycle.py            # 5 s at 250 µs on the last CPU

``step(seq)`` runs once per board cycle in the real-time worker; what it returns is written to
the (virtual) board at the next cycle's update-permit, exactly like the seed's target buffer.
"""

import math

import softrt

GAIN = 0.2
state = {"y": 0.0}


def step(seq: int) -> float:
    """A first-order filter tracking a 2 Hz sine: a stand-in for a control law."""
    setpoint = math.sin(2 * math.pi * 2.0 * seq * 250e-6)
    state["y"] += GAIN * (setpoint - state["y"])
    return state["y"]


if __name__ == "__main__":  # required: the worker process imports this file by name
    result = softrt.run_cyclic(step, period_us=250, duration_s=5)
    s = result.summary  # softrt.store.RunSummary; s.to_dict() is summary.json
    m = s.metrics
    print(f"{m.cycles} cycles ({s.mode}): period mean {m.period_us.mean:.1f} µs, "
          f"max {m.period_us.max:.1f} µs; process p99 {m.process_us.p99:.2f} µs; "
          f"missed updates {m.misses.missed_updates}")
    print(f"stored in {result.path}")
