"""Signatures of the transport layer: packet streams, link flits, credit returns, link ends.

A credit link is *valid-only*: nothing on a link can push back (a real SerDes lane cannot either),
so the flit and credit streams are ``always_ready``. Flow control is entirely by credits: a sender
holds one credit per free flit slot in the receiver's queue of that class, spends one per flit it
sends, and gets it back when the receiver's queue pops that flit.
"""

from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..packet import FabricParams, NUM_CLASSES
from ..params import check_int, check_type


__all__ = ["packet_signature", "link_flit_signature", "credit_signature", "link_end_signature",
           "check_params", "check_credits", "ParamsComponent", "CreditedComponent",
           "engine_members"]


def check_params(params):
    """Return ``params`` if it is a :class:`FabricParams`, else raise :class:`TypeError`."""
    return check_type("params", params, FabricParams)


def check_credits(credits, name="credits"):
    """Validate a per-class credit count or queue depth, in flits (an integer >= 2: a queue of one
    flit could not return a credit before the next flit needs it)."""
    return check_int(name, credits, 2)


def engine_members(fabric, load_layout, counters_layout):
    """Return the members of a collective engine's signature: per port and class a packet stream in
    (``rx``) and out (``tx``), a ``load`` stream of ``load_layout`` and ``counters_layout`` out."""
    pkt = packet_signature(fabric)
    return {
        "rx":       In(pkt).array(fabric.ports, NUM_CLASSES),
        "tx":       Out(pkt).array(fabric.ports, NUM_CLASSES),
        "load":     In(stream.Signature(load_layout)),
        "counters": Out(counters_layout),
    }


class ParamsComponent(wiring.Component):
    """A component built for one parameter set; a subclass sets ``self._params`` (validated)
    before calling ``super().__init__``."""

    @property
    def params(self):
        return self._params


class CreditedComponent(ParamsComponent):
    """A component built for one :class:`FabricParams` and one per-class credit count; a subclass
    sets ``self._params`` and ``self._credits`` (validated) before calling ``super().__init__``."""

    @property
    def credits(self):
        return self._credits


def packet_signature(params):
    """A packet stream: one flit (``data``, ``last``) per transfer, with backpressure."""
    return stream.Signature(check_params(params).flit_layout)


def link_flit_signature(params):
    """Flits on a link: ``payload`` = {``flit``: {``data``, ``last``}, ``msg_class``}, valid
    only."""
    return stream.Signature(check_params(params).link_layout, always_ready=True)


def credit_signature():
    """Credit returns on a link, valid only: ``payload`` bit ``c`` returns one flit credit of class
    ``c``. At most one credit per class per cycle is enough: a receive queue pops at most one flit
    per cycle. ``valid`` is high whenever any bit is set."""
    return stream.Signature(NUM_CLASSES, always_ready=True)


def link_end_signature(params):
    """One end of a full-duplex link, as seen by the port that owns it.

    Members
    -------
    tx : Out(link_flit_signature)
        Flits sent.
    tx_credit : In(credit_signature)
        Credits coming back for the flits sent.
    rx : In(link_flit_signature)
        Flits received.
    rx_credit : Out(credit_signature)
        Credits returned for the flits received, as the receive queues drain.
    """
    return wiring.Signature({
        "tx":        Out(link_flit_signature(params)),
        "tx_credit": In(credit_signature()),
        "rx":        In(link_flit_signature(params)),
        "rx_credit": Out(credit_signature()),
    })
