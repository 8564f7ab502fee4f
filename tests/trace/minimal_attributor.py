"""A minimal Attributor for the trace plumbing tests, used only until H6's
``softrt.analysis.attribution`` is merged (the conftest installs it when that module is missing).

It follows the agreed contract (add_records / add_events / add_steal / advance / finish) and does
the simplest honest attribution: a late cycle's window is [previous detect + period, detect];
every interval in it when another task ran while the worker was runnable (sched_switch,
sched_wakeup) or an IRQ/softirq/vector handler ran is a cause; the rest is "unexplained".
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

LOOKBACK_NS = 100_000_000  # state (who runs, is the worker runnable) is rebuilt from this far back


class Attributor:
    def __init__(self, period_ns, rt_cpu, worker_pid, threshold_ns=20_000, keep_worst=100):
        self.period_ns, self.rt_cpu, self.worker_pid = period_ns, rt_cpu, worker_pid
        self.threshold_ns, self.keep_worst = threshold_ns, keep_worst
        self.pending = []  # (cycle, window_start, window_end, period_ns)
        self.events = []
        self.ts = []
        self.late = []
        self.steal = []
        self.prev_detect = None
        self.worker_prio = 0  # kernel priority (lower is higher); learnt from the worker's switches
        self.horizons = []

    def add_records(self, recs):
        detect = recs["detect_ns"]
        prev = np.concatenate(([self.prev_detect if self.prev_detect is not None else detect[0]], detect[:-1]))
        period = detect - prev
        late = (period > self.period_ns + self.threshold_ns) | (recs["missed"] > 0)
        if self.prev_detect is None:
            late[0] = False
        for i in np.flatnonzero(late):
            start = int(prev[i]) + self.period_ns
            self.pending.append((int(recs["cycle"][i]), min(start, int(detect[i])), int(detect[i]), int(period[i])))
        self.prev_detect = int(detect[-1])

    def add_events(self, events):
        assert all(a.ts_ns <= b.ts_ns for a, b in zip(events, events[1:])), "events out of order"
        assert not self.events or events[0].ts_ns >= self.events[-1].ts_ns
        self.events.extend(e for e in events if e.cpu == self.rt_cpu)
        self.ts = [e.ts_ns for e in self.events]

    def add_steal(self, samples):
        self.steal.extend(samples)

    def advance(self, horizon_ns):
        assert not self.horizons or horizon_ns >= self.horizons[-1], "horizon went back"
        self.horizons.append(horizon_ns)
        ready = [p for p in self.pending if p[2] < horizon_ns]
        self.pending = [p for p in self.pending if p[2] >= horizon_ns]
        for p in ready:
            self.late.append(self._explain(*p))
        oldest = min((p[1] for p in self.pending), default=horizon_ns) - 1_000_000_000
        cut = bisect_left(self.ts, oldest)  # keep 1 s of context
        self.events, self.ts = self.events[cut:], self.ts[cut:]

    def _intervals(self, start, end):
        """(kind, name, pid, t0, t1) of what ran instead of the runnable worker, or in IRQ context."""
        out, running, irq, runnable = [], None, {}, True
        for e in self.events[bisect_left(self.ts, start - LOOKBACK_NS):]:
            if e.ts_ns > end:
                break
            f = e.fields
            if e.name == "sched_switch":
                if running is not None and runnable:
                    if running[3] <= self.worker_prio:
                        out.append(("thread", running[0], running[1], running[2], e.ts_ns))
                    else:  # a lower priority is preempted at once, unless the kernel cannot preempt yet
                        out.append(("kernel", "preemption delayed", None, running[2], e.ts_ns))
                if int(f["prev_pid"]) == self.worker_pid:
                    self.worker_prio = int(f["prev_prio"])
                if int(f["prev_pid"]) == self.worker_pid:
                    runnable = f["prev_state"].startswith("R")
                nxt = int(f["next_pid"])
                running = (f["next_comm"], nxt, e.ts_ns, int(f["next_prio"])) if nxt not in (0, self.worker_pid) else None
            elif e.name == "sched_wakeup" and int(f["pid"]) == self.worker_pid:
                if running is not None and not runnable:
                    running = (running[0], running[1], e.ts_ns, running[3])
                runnable = True
            elif e.name.endswith("_entry") and e.name != "sys_enter":
                key = e.name[:-6]
                irq[key] = (f.get("name") or f.get("action") or key, e.ts_ns)
            elif e.name.endswith("_exit") and e.name[:-5] in irq:
                label, t0 = irq.pop(e.name[:-5])
                out.append(("irq", label, None, t0, e.ts_ns))
        if running is not None and runnable:
            out.append(("thread", running[0], running[1], running[2], end) if running[3] <= self.worker_prio
                       else ("kernel", "preemption delayed", None, running[2], end))
        # A task still on the CPU for the microsecond between the worker's wake-up (in an IRQ) and
        # the switch is the scheduler at work, not a cause.
        return [(k, n, p, max(a, start), min(b, end)) for k, n, p, a, b in out
                if b > start and a < end and (k != "thread" or b - a > 5_000)]

    def _explain(self, cycle, start, end, period):
        causes = {}
        intervals = self._intervals(start, end)
        irqs = [(a, b) for kind, _, _, a, b in intervals if kind == "irq"]
        for kind, name, pid, a, b in intervals:
            ns = b - a
            if kind != "irq":  # an interrupt taken while a task held the CPU is the interrupt's time
                ns -= sum(max(0, min(b, y) - max(a, x)) for x, y in irqs)
            key = (kind, name, pid)
            causes[key] = causes.get(key, 0) + max(ns, 0)
        window = max(end - start, 1)
        listed = [{"kind": k, "name": n, "pid": p, "duration_us": ns / 1e3, "share": ns / window}
                  for (k, n, p), ns in sorted(causes.items(), key=lambda kv: -kv[1])]
        explained = sum(causes.values())
        return {"cycle": cycle, "period_us": period / 1e3, "window_start_ns": start, "window_end_ns": end,
                "window_us": window / 1e3, "causes": listed, "unexplained_us": max(0, window - explained) / 1e3}

    def finish(self, lost_events=0):
        self.advance(2**62)
        culprits = {}
        for lc in self.late:
            for c in lc["causes"]:
                key = (c["kind"], c["name"], c["pid"])
                entry = culprits.setdefault(key, {"kind": key[0], "name": key[1], "pid": key[2], "late_cycles": 0,
                                                  "total_us": 0.0, "worst_us": 0.0})
                entry["late_cycles"] += 1
                entry["total_us"] += c["duration_us"]
                entry["worst_us"] = max(entry["worst_us"], c["duration_us"])
        worst = sorted(self.late, key=lambda lc: -lc["window_us"])[: self.keep_worst]
        return {"late_cycles": worst, "late_cycle_count": len(self.late),
                "culprits": sorted(culprits.values(), key=lambda c: -c["total_us"]), "lost_events": lost_events,
                "steal_samples": len(self.steal)}
