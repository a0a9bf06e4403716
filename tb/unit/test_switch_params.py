"""Construction-time validation of the transport and switch blocks (messages tested), and
elaboration of the larger switch configurations (no simulation)."""

import pytest
from amaranth.hdl import Fragment

from scin.hdl.catalog import BLOCKS
from scin.hdl.packet import FabricParams
from scin.hdl.switch import PacketArbiter, PacketFilter, SwitchPort, Switch
from scin.hdl.toplevel import toplevel_ports
from scin.hdl.transport import CreditRx, CreditTx, DelayLine, Link, TransportPort


P = FabricParams()


@pytest.mark.parametrize("make", [CreditTx, CreditRx, TransportPort,
                                  lambda p, c: SwitchPort(p, c), lambda p, c: Switch(p, c)])
@pytest.mark.parametrize("credits", [0, 1, -3, 2.5, True, "256"])
def test_bad_credits(make, credits):
    error, rng = (ValueError, " >= 2") if type(credits) is int else (TypeError, "")
    with pytest.raises(error, match=rf"^credits must be an integer{rng}, not {credits!r}$"):
        make(P, credits)


@pytest.mark.parametrize("latency", [0, -1, 1.5, None])
def test_bad_latency(latency):
    error, rng = (ValueError, " >= 1") if type(latency) is int else (TypeError, "")
    with pytest.raises(error, match=rf"^latency must be an integer{rng}, not {latency!r}$"):
        Link(P, latency)
    with pytest.raises(error, match=rf"^latency must be an integer{rng}, not {latency!r}$"):
        DelayLine(8, latency)


@pytest.mark.parametrize("depth", [0, 1, "16"])
def test_bad_isa_depth(depth):
    error, rng = (ValueError, " >= 2") if type(depth) is int else (TypeError, "")
    with pytest.raises(error, match=rf"^isa_depth must be an integer{rng}, not {depth!r}$"):
        SwitchPort(P, 16, depth)
    with pytest.raises(error, match=rf"^isa_depth must be an integer{rng}, not {depth!r}$"):
        Switch(P, 16, depth)


def test_bad_arbiter_and_params():
    with pytest.raises(ValueError, match=r"^n must be an integer >= 1, not 0$"):
        PacketArbiter(P, 0)
    with pytest.raises(TypeError, match=r"^params must be a FabricParams, not 4$"):
        Switch(4)
    for bad in (7, "REQ", True):
        with pytest.raises(ValueError, match=r"^msg_class must be a MsgClass or its value: "
                                             r"REQ \(0\), WRITE \(1\), RDATA \(2\), "
                                             rf"WRESP \(3\); not {bad!r}$"):
            PacketFilter(P, bad)


def _elaborate(component):
    Fragment.get(component, None).prepare(ports=toplevel_ports(component))


@pytest.mark.parametrize("name", [n for n in ("credit_tx", "credit_rx", "link", "transport_port",
                                              "switch_port", "switch_core")])
def test_catalog_elaborates(name):
    factory, description = BLOCKS[name]
    assert description
    _elaborate(factory(FabricParams(flit_width=64, addr_width=16, tag_width=8, max_payload=1024)))


@pytest.mark.parametrize("ports", [2, 8, 16])
def test_switch_elaborates(ports):
    _elaborate(Switch(FabricParams(flit_width=64, addr_width=16, tag_width=8, max_payload=1024,
                                   ports=ports), credits=16, isa_depth=16))
