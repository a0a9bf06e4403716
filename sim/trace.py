"""Hop-by-hop trace of one All-Reduce: where a small message's cycles go.

:func:`trace_packets` runs inside the simulator (Icarus: it reads signals inside the hierarchy,
which the Verilator builds do not expose) and stamps every packet header crossing four boundaries
of each port, plus the endpoint memory's AXI channels, with the accelerators' own cycle counter
(the clock of the latency figures):

* ``ep_tx`` / ``ep_rx``: between endpoint ``i`` and its transport port (a packet leaves or reaches
  the endpoint);
* ``isa_rx`` / ``isa_tx``: between switch port ``i`` and the ISA (a packet reaches or leaves the ISA);
* ``ar`` / ``r`` / ``aw`` / ``b``: endpoint ``i``'s memory (read address, first read beat, write
  address, write response).

:func:`hops` turns the stamps into the critical path of one participant, hop by hop, beside that
hop's floor under the latency model. Python runs every cycle here, so this is for small messages
only (``scin allreduce --trace`` caps the size).
"""

from cocotb.triggers import RisingEdge, ReadOnly

from ..hdl.packet import MsgClass, Opcode
from .testbench.traffic import flit_data, is_last


__all__ = ["trace_packets", "hops", "HOP_NAMES"]


def _int(handle):
    v = handle.value
    return int(v) if v.is_resolvable else 0


async def trace_packets(dut, params, records):
    """For the system ``dut`` of fabric ``params`` (a FabricParams), append ``(cycle, port, where, class, opcode, "head" | "tail")`` to ``records`` for the first
    and the last flit of every packet, and ``(cycle, port, channel, -1, 0, "head")`` for AXI
    handshakes (the first beat of each read burst)."""
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
            for where, parent, prefix in (("ep_tx", ep, f"tx__{c.value}"), ("ep_rx", ep, f"rx__{c.value}"),
                                          ("isa_rx", isa, f"rx__{i}__{c.value}"),
                                          ("isa_tx", isa, f"tx__{i}__{c.value}")):
                valid = handle(parent, f"{prefix}__valid")
                if valid is None:
                    continue      # a class this boundary never carries (the ISA sends no RDATA)
                # No ready: an always-ready stream.
                streams.append((i, where, c, valid, handle(parent, f"{prefix}__ready"),
                                handle(parent, f"{prefix}__payload")))
    axi = []
    for i in range(n):
        mem = getattr(dut, f"ep{i}").memory
        for ch in ("ar", "r", "aw", "b"):
            axi.append((i, ch, getattr(mem, f"axi__{ch}__valid"), getattr(mem, f"axi__{ch}__ready")))
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
                    if r_first[i]:
                        records.append((now, i, "r", -1, 0, "head"))
                    # R beats: the first of each burst (rlast is not probed; a burst of a small
                    # read is one packet, so the first beat after an AR is what matters).
                    r_first[i] = False
                else:
                    records.append((now, i, ch, -1, 0, "head"))
                    if ch == "ar":
                        r_first[i] = True


#: The hops of one All-Reduce's critical path, in order: (name, what it covers).
HOP_NAMES = (
    ("arrival", "arrival write (ATOMIC_ADD) of the last participant: endpoint -> transport -> "
                "link -> switch port -> ISA"),
    ("barrier + issue", "ISA: barrier complete -> wave controller -> read issuer -> READ header out"),
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


def hops(records, ports, start, end, one_way, mem_latency, payload_flits):
    """The critical path of one All-Reduce as a list of dicts ``{hop, cycles, floor, covers,
    port}``, for a message of one packet per participant (up to 4 KiB).

    ``ports`` are the participants; ``start`` and ``end`` the All-Reduce's first and last cycles
    (the last arrival write leaves its endpoint; the last flag is seen). The path follows the last
    arrival to reach the ISA, then the participant whose read data reached the ISA last (it gates
    the reduction), then the participant whose flag was seen last. The floor of a hop is what the
    latency model makes unavoidable: ``one_way`` for each crossing, ``mem_latency`` for the read,
    the ``payload_flits`` of the read response behind its header, and one cycle for the flag behind
    the data; the sum is the "hop floor" of ``docs/PERFORMANCE.md``. Other hops have a floor of 0:
    their cycles are the RTL's own.
    """
    def at(port, where, cls, opcode, after, kind="head"):
        for cycle, i, w, c, op, k in records:
            if i == port and w == where and k == kind and (cls is None or c == cls) and \
                    (opcode is None or op == opcode) and cycle >= after:
                return cycle
        raise ValueError(f"no {kind} on {where} (opcode {opcode}) at port {port} after cycle {after}")

    req, write, rdata = MsgClass.REQ.value, MsgClass.WRITE.value, MsgClass.RDATA.value
    arrival = {p: at(p, "isa_rx", req, Opcode.ATOMIC_ADD.value, start) for p in ports}
    t1 = max(arrival.values())
    resp = {p: at(p, "isa_rx", rdata, Opcode.READ_RESP.value, t1, "tail") for p in ports}
    pr = max(ports, key=lambda p: resp[p])
    t = [start, t1]
    t.append(at(pr, "isa_tx", req, Opcode.READ.value, t1))
    t.append(at(pr, "ep_rx", req, Opcode.READ.value, t[-1]))
    t.append(at(pr, "ar", None, None, t[-1]))
    t.append(at(pr, "r", None, None, t[-1]))
    t.append(at(pr, "ep_tx", rdata, Opcode.READ_RESP.value, t[-1]))
    t.append(resp[pr])
    # The result's tail at the endpoint, then the flag packet's tail (the next WRITE).
    data_tail = {p: at(p, "ep_rx", write, Opcode.WRITE.value, t[-1], "tail") for p in ports}
    flag = {p: at(p, "ep_rx", write, Opcode.WRITE.value, data_tail[p] + 1, "tail") for p in ports}
    pf = max(ports, key=lambda p: flag[p])
    t.append(at(pf, "isa_tx", write, Opcode.WRITE.value, t[-1], "tail"))
    t.append(data_tail[pf])
    t.append(flag[pf])
    t.append(end)
    floors = [one_way, 0, one_way, 0, mem_latency, 0, one_way + payload_flits, 0, one_way, 1, 0]
    who = [max(arrival, key=arrival.get), None] + [pr] * 6 + [pf] * 3
    return [{"hop": name, "cycles": b - a, "floor": fl, "covers": covers, "port": w}
            for (name, covers), a, b, fl, w in zip(HOP_NAMES, t, t[1:], floors, who)]
