"""The link checks of ethercat.netif on a real veth pair in its own network namespace."""

from __future__ import annotations

from softrt.ethercat.netif import IFF_RUNNING, carrier, interface_flags, link_problem


def test_a_lost_carrier_is_seen_at_once_not_after_the_kernels_linkwatch(ecat_ns):
    """The peer of a veth goes down (a cable pulled): its carrier is off before `ip` returns, while
    IFF_RUNNING follows only when the kernel's linkwatch work has run (a CI run's master named a
    lost bus 5 ms later, before it had)."""
    iface = ecat_ns.master_iface
    with ecat_ns.inside():
        assert carrier(iface) is True and link_problem(iface) is None
        ecat_ns.ip("link", "set", ecat_ns.slave_iface, "down")
        assert carrier(iface) is False and link_problem(iface) == "no carrier"
        ecat_ns.ip("link", "set", ecat_ns.slave_iface, "up")
        assert carrier(iface) is True
        ecat_ns.ip("link", "set", iface, "down")
        assert link_problem(iface) == "the interface is down"
        assert not interface_flags(iface) & IFF_RUNNING
        assert carrier("nosuch0") is None and link_problem("nosuch0") == "no such interface"
