"""Finding SOEM's raw socket and switching it to non-blocking for the cyclic phase (softrt.ethercat.receive)."""

from __future__ import annotations

import os
import socket

import pytest

from softrt.ethercat.errors import EcatError
from softrt.ethercat.receive import PollingReceive, ethercat_sockets
from softrt.ethercat.wire import ETH_P_ECAT

ETH_P_IP = 0x0800


def raw_socket(iface: str, proto: int) -> socket.socket:
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(proto))
    except PermissionError:
        pytest.skip("needs CAP_NET_RAW")
    s.bind((iface, proto))
    return s


def test_finds_only_the_ethercat_socket_on_that_interface():
    assert ethercat_sockets("lo") == []
    with raw_socket("lo", ETH_P_ECAT) as ecat, raw_socket("lo", ETH_P_IP), \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM):
        assert ethercat_sockets("lo") == [ecat.fileno()]
        assert ethercat_sockets("nosuch0") == []


def test_polling_receive_is_non_blocking_while_entered():
    with raw_socket("lo", ETH_P_ECAT) as ecat:
        assert os.get_blocking(ecat.fileno())
        with PollingReceive("lo"):
            assert not os.get_blocking(ecat.fileno())
            with pytest.raises(BlockingIOError):  # recv() returns at once: SOEM's loop polls its own timer
                ecat.recv(2048)
        assert os.get_blocking(ecat.fileno())


def test_polling_receive_needs_exactly_one_socket():
    with pytest.raises(EcatError, match="found 0"):
        PollingReceive("lo").__enter__()
    with raw_socket("lo", ETH_P_ECAT), raw_socket("lo", ETH_P_ECAT):
        with pytest.raises(EcatError, match="found 2"):
            PollingReceive("lo").__enter__()
