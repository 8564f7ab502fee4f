"""The raw socket with a datagram-index filter, on a veth pair: it sees its own frames, never the others."""

from __future__ import annotations

from softrt.ethercat.rawsock import INDEX_OFFSET, open_raw_socket
from softrt.ethercat.wire import Cmd, encode_frame


def test_the_index_filter_keeps_only_its_frames(ecat_ns):
    with ecat_ns.inside():
        mine = open_raw_socket(ecat_ns.master_iface, 0xDC)
        every = open_raw_socket(ecat_ns.master_iface)
        peer = open_raw_socket(ecat_ns.slave_iface)
    try:
        for index in (0x01, 0xDC, 0x05, 0xDC):
            frame = encode_frame([(Cmd.FPRD, index, 0x1001, 0x092C, bytes(4))])
            peer.send(bytes(frame) + bytes(60 - len(frame)))
        every.settimeout(2)
        seen_all = [every.recv(2048)[INDEX_OFFSET] for _ in range(4)]
        assert seen_all == [0x01, 0xDC, 0x05, 0xDC]
        mine.settimeout(2)
        seen = [mine.recv(2048)[INDEX_OFFSET] for _ in range(2)]
        assert seen == [0xDC, 0xDC]
        mine.settimeout(0.2)
        try:
            extra = mine.recv(2048)
        except TimeoutError:
            extra = None
        assert extra is None
    finally:
        for s in (mine, every, peer):
            s.close()
