"""Finding SOEM's raw socket (softrt.ethercat.receive)."""

from __future__ import annotations

import socket

import pytest

from softrt.ethercat.errors import EcatError
from softrt.ethercat.receive import ethercat_sockets, soem_socket
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
    with (
        raw_socket("lo", ETH_P_ECAT) as ecat,
        raw_socket("lo", ETH_P_IP),
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
    ):
        assert ethercat_sockets("lo") == [ecat.fileno()]
        assert ethercat_sockets("nosuch0") == []


def test_soem_socket_is_the_one_ethercat_socket_on_the_interface():
    with pytest.raises(EcatError, match="found 0"):
        soem_socket("lo")
    with raw_socket("lo", ETH_P_ECAT) as ecat:
        assert soem_socket("lo") == ecat.fileno()
        with raw_socket("lo", ETH_P_ECAT), pytest.raises(EcatError, match="found 2"):
            soem_socket("lo")
