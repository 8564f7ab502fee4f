"""Adapters by friendly name or GUID mapped to Npcap's \\Device\\NPF_{GUID}, and Npcap's presence (platform.windows.winadapters).

The adapters are as GetAdaptersAddresses describes them (Microsoft Learn, "IP_ADAPTER_ADDRESSES_LH structure":
AdapterName is the GUID in braces, FriendlyName what ncpa.cpl shows); the Npcap paths are the Npcap Users'
Guide's ("Developing software with Npcap"). Not captured on a real machine.
"""

from __future__ import annotations

import pytest

from softrt.errors import ConfigError
from softrt.platform.windows import winadapters as A

GUID = "{4D36E972-E325-11CE-BFC1-08002BE10318}"
ADAPTERS = [
    A.adapter(GUID.lower(), "EtherCAT", "Intel(R) Ethernet Controller I210"),
    A.adapter("{0A1B2C3D-0000-4000-8000-00000000ABCD}", "Ethernet 2", "Realtek PCIe GbE Family Controller"),
]
NPF = "\\Device\\NPF_" + GUID


@pytest.mark.parametrize("typed", ["EtherCAT", "ethercat", GUID, GUID.strip("{}").lower(), NPF, NPF.lower()])
def test_a_friendly_name_guid_or_npf_name_maps_to_the_npf_device(typed):
    assert A.resolve(typed, ADAPTERS) == NPF


@pytest.mark.parametrize(
    "typed, words",
    [("eth1", "no network adapter named 'eth1'"), ("{11111111-2222-3333-4444-555555555555}", "no network adapter")],
)
def test_an_unknown_adapter_lists_the_adapters(typed, words):
    with pytest.raises(ConfigError, match=words) as err:
        A.resolve(typed, ADAPTERS)
    assert "Ethernet 2  {0A1B2C3D-0000-4000-8000-00000000ABCD}  Realtek" in err.value.hint
    assert "\n" not in str(err.value)


def test_two_adapters_of_one_friendly_name_are_ambiguous():
    with pytest.raises(ConfigError, match="2 network adapters"):
        A.resolve("EtherCAT", [*ADAPTERS, A.adapter("{0A1B2C3D-0000-4000-8000-00000000ABCE}", "ethercat")])


@pytest.mark.parametrize(
    "files, state",
    [
        ((), "missing"),
        (("System32/Npcap/wpcap.dll",), "no-compat"),
        (("System32/Npcap/wpcap.dll", "System32/wpcap.dll"), "ready"),
    ],
)
def test_npcap_state_and_its_one_line_fix(tmp_path, files, state):
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_bytes(b"MZ")
    assert A.npcap_state(str(tmp_path)) == state
    if state == "ready":
        A.require_npcap(str(tmp_path))
    else:
        with pytest.raises(ConfigError) as err:
            A.require_npcap(str(tmp_path))
        assert "npcap.com" in err.value.hint and "WinPcap API-compatible mode" in err.value.hint


def test_not_a_guid_is_refused():
    with pytest.raises(ValueError):
        A.adapter("eth0", "Ethernet")


@pytest.mark.skipif(not A.IS_WINDOWS, reason="this machine's Npcap and adapters (Windows, or Wine in scripts/ci-wine)")
def test_this_machines_adapters_and_npcap():
    """Wine has no Npcap: the one line with the fix; its adapters still come back with GUIDs."""
    from softrt.platform import ethercat_adapter

    assert all(a.guid.startswith("{") for a in A.list_adapters())
    if A.npcap_state() != "ready":
        with pytest.raises(ConfigError, match="Npcap") as err:
            ethercat_adapter("Ethernet")
        assert "npcap.com" in err.value.hint
