"""Hop-by-hop trace of one collective: where a small message's cycles go.

:func:`trace_packets` runs inside the simulator (Icarus: it reads signals inside the hierarchy,
which the Verilator builds do not expose) and stamps every packet header crossing four boundaries
of each port, plus the endpoint memory's AXI channels, with the accelerators' own cycle counter
(the clock of the latency figures):

* ``ep_tx`` / ``ep_rx``: between endpoint ``i`` and its transport port (a packet leaves or reaches
  the endpoint);
* ``isa_rx`` / ``isa_tx``: between switch port ``i`` and the ISA (a packet reaches or leaves the
  ISA);
* ``ar`` / ``r`` / ``aw`` / ``b``: endpoint ``i``'s memory (read address, first read beat, write
  address, write response).

:func:`hops` turns the stamps into the critical path of one participant, hop by hop, beside that
hop's floor under the latency model. Python runs every cycle here, so this is for small messages
only (``scin allreduce --trace`` caps the size).
"""

from cocotb.triggers import RisingEdge, ReadOnly

from ..hdl.packet import MsgClass, Opcode
from .testbench.traffic import flit_data, is_last


__all__ = ["trace_packets", "hops", "HOP_NAMES", "BARRIER_HOP_NAMES"]


def _int(handle):
    v = handle.value
    return int(v) if v.is_resolvable else 0


async def trace_packets(dut, params, records):
    """For the system ``dut`` of fabric ``params`` (a FabricParams), append
    ``(cycle, port, where, class, opcode, "head" | "tail")`` to ``records`` for the first and the
    last flit of every packet, and ``(cycle, port, channel, -1, 0, "head")`` for AXI handshakes
    (the first beat of each read burst)."""
    def handle(parent, name):
        try:
            return getattr(parent, name)
        except AttributeError:
            return None

    n = params.ports
    streams = []
    isa = dut.switch.isa      # System's ScinSwitch holds the ISA
    for i in range(n):
        ep = getattr(dut, f"ep{i}")
        for c in MsgClass:
            for where, parent, prefix in (("ep_tx", ep, f"tx__{c.value}"),
                                          ("ep_rx", ep, f"rx__{c.value}"),
                                          ("isa_rx", isa, f"rx__{i}__{c.value}"),
                                          ("isa_tx", isa, f"tx__{i}__{c.value}")):
                valid = handle(parent, f"{prefix}__valid")
                if valid is None:
                    continue      # a class this boundary never carries (the ISA sends no RDATA)
                # No ready: an always-ready stream.
                streams.append((i, where, c, valid, handle(parent, f"{prefix}__ready"),
                                handle(parent, f"{prefix}__payload")))
    axi, r_payload = [], []
    for i in range(n):
        mem = getattr(dut, f"ep{i}").memory
        for ch in ("ar", "r", "aw", "b"):
            axi.append((i, ch, getattr(mem, f"axi__{ch}__valid"),
                        getattr(mem, f"axi__{ch}__ready")))
        # R's `last` is the top bit of its payload (the last field of AxiParams.r_layout).
        r_payload.append(mem.axi__r__payload)
    r_last_bit = [len(h.value) - 1 for h in r_payload]
    clock = dut.ep0.accelerator.cycle
    head = {id(s[3]): True for s in streams}      # the next flit of this stream is a header
    r_first = [True] * n
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        now = _int(clock)
        for i, where, c, valid, ready, payload in streams:
            if _int(valid) and (ready is None or _int(ready)):
                word = _int(payload)
                if head[id(valid)] is True:
                    # The opcode, kept until the packet's tail.
                    head[id(valid)] = params.unpack_header(flit_data(params, word))["opcode"]
                    records.append((now, i, where, c.value, head[id(valid)], "head"))
                if is_last(params, word):
                    records.append((now, i, where, c.value, head[id(valid)], "tail"))
                    head[id(valid)] = True
        for i, ch, valid, ready in axi:
            if _int(valid) and _int(ready):
                if ch == "r":
                    # R beats: the first of each burst (bursts are answered in order here).
                    if r_first[i]:
                        records.append((now, i, "r", -1, 0, "head"))
                    r_first[i] = bool(_int(r_payload[i]) >> r_last_bit[i] & 1)
                else:
                    records.append((now, i, ch, -1, 0, "head"))


#: The hops of one All-Reduce's critical path, in order: (name, what it covers).
HOP_NAMES = (
    ("arrival", "arrival write (ATOMIC_ADD) of the last participant: endpoint -> transport -> "
                "link -> switch port -> ISA"),
    ("barrier + issue", "ISA: barrier complete -> wave controller -> read issuer -> "
                        "READ header out"),
    ("read request", "READ: ISA -> switch port -> link -> transport -> endpoint"),
    ("bridge (read)", "endpoint AXI bridge: READ header -> AR handshake"),
    ("memory read", "AR handshake -> first R beat (the memory's latency)"),
    ("bridge (response)", "first R beat -> READ_RESP header leaves the endpoint"),
    ("read response", "READ_RESP: endpoint -> transport -> link -> switch port -> ISA, to its "
                      "last flit (serialisation included)"),
    ("reduce", "ISA: last participant's data in -> last result flit out (feeder, datapath, "
               "write-back; the WRITE header went out earlier, cut-through)"),
    ("result write", "result data: ISA -> switch port -> link -> transport -> endpoint, last flit"),
    ("flag", "last result flit -> completion flag's last flit at the endpoint (right behind it)"),
    ("commit + poll", "flag at the endpoint -> AXI write -> the accelerator's poll sees it"),
)

#: The hops of a barrier: no data, only the arrivals and the flags.
BARRIER_HOP_NAMES = (
    HOP_NAMES[0],
    ("barrier + flag", "ISA: barrier complete -> wave controller -> write-back -> flag WRITE "
                       "header out"),
    ("flag", "flag WRITE: ISA -> switch port -> link -> transport -> endpoint, its last flit"),
    HOP_NAMES[-1],
)


class _Events:
    """Queries on a trace's records ``(cycle, port, where, class, opcode, kind)``, in cycle
    order: the flits of one port, place, class (``None``: any), opcode (``None``: any) and kind
    (``"head"`` or ``"tail"``)."""

    def __init__(self, records):
        self._records = records

    def matching(self, port, where, cls, opcode, kind):
        """The cycles of every such flit."""
        return [cycle for cycle, i, w, c, op, k in self._records
                if i == port and w == where and k == kind and (cls is None or c == cls)
                and (opcode is None or op == opcode)]

    def at(self, port, where, cls, opcode, after, kind="head"):
        """The first such flit at or after ``after``; ValueError if there is none."""
        for cycle in self.matching(port, where, cls, opcode, kind):
            if cycle >= after:
                return cycle
        raise ValueError(f"no {kind} on {where} (opcode {opcode}) at port {port} "
                         f"after cycle {after}")

    def nth(self, port, where, cls, opcode, after, k, kind="head"):
        """The ``k``-th (from 0) such flit at or after ``after``; ValueError if there are fewer."""
        found = [c for c in self.matching(port, where, cls, opcode, kind) if c >= after]
        if len(found) <= k:
            raise ValueError(f"fewer than {k + 1} {kind}s on {where} (opcode {opcode}) at port "
                             f"{port} after cycle {after}")
        return found[k]

    def last(self, port, where, cls, opcode, before, kind="tail"):
        """The last such flit at or before ``before``, or None."""
        found = [c for c in self.matching(port, where, cls, opcode, kind) if c <= before]
        return found[-1] if found else None


def hops(records, ports, start, end, one_way, mem_latency, payload_flits, barrier=False):
    """The critical path of one collective as a list of dicts ``{hop, cycles, floor, covers,
    port}``: :data:`HOP_NAMES` for an operation that moves data, :data:`BARRIER_HOP_NAMES` for a
    barrier (``barrier=True``).

    ``ports`` are the participants; ``start`` and ``end`` the collective's first and last cycles
    (the last arrival write leaves its endpoint; the last flag is seen). The path follows the last
    arrival to reach the ISA; then back from the last result data to reach an endpoint (``pw``)
    to the read response that reached the ISA last before that data left it (``pr``, the one that
    gates it), and from that response to its own ``READ`` (the ``k``-th of that port: reads are
    answered in order); then the flag seen last (``pf``). With one packet per participant (an
    All-Reduce of up to 4 KiB) that is the participant whose data reached the ISA last; with
    several (ReduceScatter, AllGather: one per phase) it is the last phase's.

    The floor of a hop is what the latency model makes unavoidable for *that packet*:
    ``one_way`` for each crossing, ``mem_latency`` for the read, the ``payload_flits`` of the read
    response behind its header, and one cycle for the flag behind the data; the sum is the "hop
    floor" of ``docs/PERFORMANCE.md``. Other hops have a floor of 0: their cycles are the RTL's
    own (or, with several packets per link, the others' serialisation, which the caller accounts
    for apart).
    """
    log = _Events(records)
    matching, at, nth, last = log.matching, log.at, log.nth, log.last
    req, write, rdata = MsgClass.REQ.value, MsgClass.WRITE.value, MsgClass.RDATA.value
    WRITE, READ, READ_RESP = Opcode.WRITE.value, Opcode.READ.value, Opcode.READ_RESP.value
    arrival = {p: at(p, "isa_rx", req, Opcode.ATOMIC_ADD.value, start) for p in ports}
    t1 = max(arrival.values())
    pa = max(arrival, key=arrival.get)
    # Each participant's flag is its last WRITE; its data, if the operation gives it any, the
    # WRITE before.
    flag = {p: last(p, "ep_rx", write, WRITE, end) for p in ports}
    pf = max(ports, key=lambda p: flag[p])
    if barrier:
        t = [start, t1, at(pf, "isa_tx", write, WRITE, t1), flag[pf], end]
        floors = [one_way, 0, one_way + 1, 0]
        who = [pa, None, pf, pf]
        names = BARRIER_HOP_NAMES
    else:
        data = {p: last(p, "ep_rx", write, WRITE, flag[p] - 1) for p in ports}
        data = {p: c for p, c in data.items() if c is not None and c > t1}
        pw = max(data, key=data.get)
        # The ISA's k-th WRITE to that port is the k-th to reach it (one path, in order).
        kw = len([c for c in matching(pw, "ep_rx", write, WRITE, "tail") if t1 < c <= data[pw]]) - 1
        out = nth(pw, "isa_tx", write, WRITE, t1, kw, "tail")
        # The read response that gates that write: the last to reach the ISA before it left.
        resp = {p: last(p, "isa_rx", rdata, READ_RESP, out) for p in ports}
        resp = {p: c for p, c in resp.items() if c is not None and c > t1}
        pr = max(resp, key=resp.get)
        tails = matching(pr, "isa_rx", rdata, READ_RESP, "tail")
        k = len([c for c in tails if t1 < c <= resp[pr]]) - 1
        t = [start, t1]
        for where, cls, opcode in (("isa_tx", req, READ), ("ep_rx", req, READ), ("ar", None, None),
                                   ("r", None, None), ("ep_tx", rdata, READ_RESP)):
            t.append(nth(pr, where, cls, opcode, t1, k))
        t += [resp[pr], out, data[pw], flag[pf], end]
        floors = [one_way, 0, one_way, 0, mem_latency, 0, one_way + payload_flits, 0, one_way, 1, 0]
        who = [pa, None] + [pr] * 6 + [pw, pw, pf]
        names = HOP_NAMES
    return [{"hop": name, "cycles": b - a, "floor": fl, "covers": covers, "port": w}
            for (name, covers), a, b, fl, w in zip(names, t, t[1:], floors, who)]
