"""The NVLS engine's internal interfaces: the signatures that join its blocks.

:class:`~.engine.NvlsEngine` joins its blocks only through these and the stream signatures of
:mod:`.params`' layouts, with ``wiring.connect()``. Each signature is written from the side of
the block that drives the request; the other side uses ``In(...)`` of it::

    request unit --reduce--> response buffer   entry_alloc_signature (reduction-table entries)
                 --ack-----> ack table         entry_alloc_signature (ack-table entries)
                 --fan-----> outputs           stream of fan_layout (REQ, WRITE to the members)
    response buffer --order--> sequencer       stream of reduce_alloc_layout (request order)
    sequencer    --view----> response buffer   entry_view_signature
                 --out-----> outputs           stream of out_layout (READ_RESP, RDATA)
    ack table    --out-----> outputs           stream of out_layout (WRITE_RESP, WRESP)

Counters follow :mod:`scin.hdl.lib.counters`: the request unit, the response buffer and the ack
table each count their part of :data:`~.params.NVLS_COUNTERS`; the engine sums them by name.
"""

from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2


__all__ = ["STAMP_BITS", "entry_alloc_signature", "entry_view_signature"]

#: Width of the arrival stamps; arrivals are compared in serial-number order, so the responses of
#: one entry must arrive within 2**15 cycles of each other (the engine's order is then exact).
STAMP_BITS = 16


def entry_alloc_signature(layout, entry_bits):
    """Taking an entry of a table (from the taker's side): the table offers its lowest free entry
    (``entry``, while ``free``); a ``claim`` of ``layout`` (which names the entry) arms it."""
    return wiring.Signature({
        "free":  In(1),
        "entry": In(entry_bits),
        "claim": Out(stream.Signature(layout)),
    })


def entry_view_signature(params):
    """What the sequencer sees of its current entry ``cur`` (from the sequencer's side):

    * ``seen[m]``: member ``m``'s response header has arrived; ``stamp[m]`` is when;
    * ``count[m]``: payload flits of member ``m`` stored so far;
    * ``error``: some member answered with a status other than ``OK``;
    * ``rd_en``/``rd_flit``/``rd_data[m]``: a read of flit ``rd_flit`` of every member's
      response, ``rd_data`` valid the cycle after ``rd_en`` and held while ``rd_en`` is low;
    * ``clear``: a pulse that frees ``cur`` once the sequencer has read it all.
    """
    f = params.fabric
    n = f.ports
    cnt = ceil_log2(params.entry_flits + 1)
    return wiring.Signature({
        "cur":     Out(params.entry_bits),
        "seen":    In(n),
        "stamp":   In(STAMP_BITS).array(n),
        "count":   In(cnt).array(n),
        "error":   In(1),
        "rd_en":   Out(1),
        "rd_flit": Out(max(1, ceil_log2(params.entry_flits))),
        "rd_data": In(f.flit_width).array(n),
        "clear":   Out(1),
    })
