"""The worker's reports cross the spawn boundary whole (pickled), typed by kind."""

from __future__ import annotations

import pickle

from softrt.errors import ConfigError
from softrt.schema.device import Board
from softrt.schema.worker import ARMED, DONE, FAILED, NOTHING, WorkerReport


def test_each_kind_of_report_survives_the_pipe():
    armed = WorkerReport.armed(
        [{"what": "mlockall", "detail": "current|future"}], [{"what": "fifo", "detail": "80", "why": "EPERM"}], pid=42
    )
    done = WorkerReport.done(4000, Board(writes=4000, missed_updates=1), "bus lost")
    failed = WorkerReport.failed(ConfigError("no such interface", hint="ip link"))
    for report in (armed, done, failed):
        assert pickle.loads(pickle.dumps(report)).kind == report.kind
    assert pickle.loads(pickle.dumps(done)) == done and done.board.to_dict() == {"writes": 4000, "missed_updates": 1}
    assert (armed.kind, armed.pid, armed.not_applied[0]["why"]) == (ARMED, 42, "EPERM")
    back = pickle.loads(pickle.dumps(failed))
    assert back.kind == FAILED and isinstance(back.error, ConfigError) and back.error.hint == "ip link"
    assert done.kind == DONE and NOTHING.cycles is None and NOTHING.board is None
