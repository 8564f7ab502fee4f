"""Virtual board semantics, driven by a manual clock (the board's hardware clock)."""

import numpy as np

from softrt.board import VirtualBoard


class ManualClock:
    def __init__(self, t=0):
        self.t = t

    def __call__(self):
        return self.t


def make(period=100, axes=1):
    clock = ManualClock()
    board = VirtualBoard(period, axes=axes, clock=clock)
    board.start(1000)
    return board, clock


def test_permit_turns_on_at_each_edge_and_write_clears_it():
    board, clock = make()
    clock.t = 999
    assert not board.permit()
    clock.t = 1000
    assert board.permit()
    clock.t = 1010
    assert board.write(1.0) == 0
    assert not board.permit()  # cleared until the next edge
    assert board.edge_ns == 1100 and board.cycle == 1
    clock.t = 1100
    assert board.permit()
    assert board.latched == 1.0


def test_late_write_misses_its_cycle_and_counts_every_missed_edge():
    board, clock = make()
    clock.t = 1000
    board.write(1.0)
    # Permit for edge 1 (t=1100) seen very late: the write lands in window 4 (t in [1400, 1500)).
    clock.t = 1450
    assert board.permit()
    assert board.write(2.0) == 3  # windows 1, 2 and 3 repeated the previous target
    assert board.missed_total == 3
    assert board.counters().to_dict() == {"writes": 2, "missed_updates": 3}


def test_resynchronises_to_the_edge_after_a_late_write():
    board, clock = make()
    clock.t = 1000
    board.write(0.0)
    clock.t = 1250  # late: in window 2
    board.write(1.0)
    assert board.edge_ns == 1300 and board.cycle == 3
    clock.t = 1299
    assert not board.permit()
    clock.t = 1300
    assert board.permit()
    assert board.write(2.0) == 0


def test_write_exactly_on_the_next_edge_is_late():
    board, clock = make()
    clock.t = 1100  # the permit of edge 0 is only seen at edge 1
    assert board.write(1.0) == 1


def test_multi_axis_write_copies_the_targets():
    board, clock = make(axes=4)
    targets = np.arange(4.0)
    clock.t = 1000
    board.write(targets)
    targets[:] = -1  # the host reuses its buffer; the board keeps what was written
    assert board.latched.tolist() == [0.0, 1.0, 2.0, 3.0]
