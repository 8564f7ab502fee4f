"""The simulator's receive ring on a veth pair: every frame, in order, with the kernel's receive
time, through a ring smaller than the frames sent (it wraps); select() wakes a sleeper on it."""

from __future__ import annotations

import select
import socket
import time

from softrt.ecatsim.ring import RxRing
from softrt.ethercat.rawsock import open_raw_socket
from softrt.ethercat.wire import Cmd, encode_frame


def test_the_ring_hands_over_every_frame_with_its_receive_time(ecat_ns):
    with ecat_ns.inside():
        rx = open_raw_socket(ecat_ns.slave_iface)
        tx = open_raw_socket(ecat_ns.master_iface)
    ring = RxRing(rx, slots=4)
    try:
        assert ring.take() is None
        assert select.select([rx], [], [], 0)[0] == []
        for burst in range(3):  # 9 frames through 4 slots
            before = time.clock_gettime_ns(time.CLOCK_REALTIME)
            sent = [
                bytes(encode_frame([(Cmd.FPRD, 3 * burst + i, 0x1001, 0x0130, bytes(2 + i))])).ljust(60, b"\0")
                for i in range(3)
            ]
            for frame in sent:
                tx.send(frame)
            assert select.select([rx], [], [], 2)[0] == [rx]
            taken = []
            deadline = time.monotonic() + 2
            while len(taken) < 3 and time.monotonic() < deadline:
                got = ring.take()
                if got is not None:
                    taken.append(got)
            after = time.clock_gettime_ns(time.CLOCK_REALTIME)
            assert [bytes(frame) for frame, _at, _kind in taken] == sent
            assert all(before <= at <= after for _frame, at, _kind in taken)
            assert {kind for _frame, _at, kind in taken} == {socket.PACKET_BROADCAST}
            assert ring.take() is None
    finally:
        ring.close()
        rx.close()
        tx.close()
