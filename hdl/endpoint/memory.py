"""AxiMemory: an AXI4 subordinate memory model backed by block RAM, with a test backdoor."""

from types import SimpleNamespace
from amaranth.hdl import Module, Signal, Const, Mux, Cat
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.memory import Memory

from .sim_ram import SimRam
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, exact_log2

from ..paper import MEM_LATENCY
from .axi import AxiParams, Burst, Resp, axi_signature, poll_signature


__all__ = ["AxiMemory", "MIN_LATENCY", "backdoor_load_layout"]

#: Smallest read latency the pipeline can model: slot insert, pick, block-RAM read.
MIN_LATENCY = 3
#: With ``reorder=True`` every read burst waits up to this many extra cycles, drawn from an LFSR.
REORDER_SPREAD = 32


#: Beats of a legal WRAP burst (AMBA AXI4, A3.4.1); any other length answers SLVERR.
WRAP_LENGTHS = (2, 4, 8, 16)
#: Longest legal FIXED burst, in beats (AMBA AXI4, A3.4.1); a longer one answers SLVERR.
FIXED_MAX_BEATS = 16
#: Bits of a WRAP burst's wrap mask: 16 beats of the widest (128-byte) beat span 2 KiB.
WRAP_MASK_BITS = 12


def wrap_mask(m, len_, size):
    """``((len + 1) << size) - 1``: the address bits that a WRAP burst of ``len + 1`` beats of
    ``1 << size`` bytes steps through (meaningful for a legal WRAP length only)."""
    mask = Signal(WRAP_MASK_BITS)
    m.d.comb += mask.eq(((len_[:4] + 1) << size) - 1)
    return mask


def next_beat_addr(m, addr, size, burst, wmask):
    """Address of the next beat of a burst (AMBA AXI4, A3.4.2): INCR steps from the start aligned
    down to ``1 << size``; WRAP does the same within the ``wmask + 1``-byte container, returning to
    its bottom at the top; FIXED (and the reserved encoding, which moves no data) stays put."""
    step = Signal(8)
    low = Signal(8)
    m.d.comb += [step.eq(Const(1, 8) << size), low.eq(step - 1)]
    incr = Signal.like(addr)
    m.d.comb += incr.eq(addr - (addr[:8] & low) + step)
    w = WRAP_MASK_BITS
    wrapped = Cat((addr[:w] & ~wmask) | (incr[:w] & wmask), addr[w:])
    return Mux(burst == Burst.INCR, incr, Mux(burst == Burst.WRAP, wrapped, addr))


def burst_resp(m, params, mem_size, ax):
    """The response of a whole burst, decided when its address is accepted.

    SLVERR for a burst AXI4 does not allow: a beat wider than the bus, the reserved burst type
    0b11, a FIXED burst of more than 16 beats, a WRAP burst whose length is not 2, 4, 8 or 16 or
    whose start is not aligned to the beat size. Otherwise DECERR if any byte of the burst's
    extent lies at or beyond ``mem_size``, the extent being, from the start address *aligned down
    to the beat size*: ``len + 1`` beats (INCR), one beat (FIXED) or the wrap container (WRAP).
    Otherwise OKAY."""
    step = Signal(8)
    low = Signal(8)
    m.d.comb += [step.eq(Const(1, 8) << ax.size), low.eq(step - 1)]
    base = Signal.like(ax.addr)
    m.d.comb += base.eq(ax.addr - (ax.addr[:8] & low))
    wmask = wrap_mask(m, ax.len, ax.size)
    burst = ax.burst.as_value()
    wrap_ok = Cat(*(ax.len == n - 1 for n in WRAP_LENGTHS)).any() & ((ax.addr[:8] & low) == 0)
    bad = ((ax.size > params.size_max) | (burst == 0b11)
           | ((ax.burst == Burst.FIXED) & (ax.len >= FIXED_MAX_BEATS))
           | ((ax.burst == Burst.WRAP) & ~wrap_ok))
    end = Mux(ax.burst == Burst.INCR, base + ((ax.len + 1) << ax.size),
              Mux(ax.burst == Burst.FIXED, base + step,
                  Cat(ax.addr[:WRAP_MASK_BITS] & ~wmask, ax.addr[WRAP_MASK_BITS:]) + wmask + 1))
    return Mux(bad, Resp.SLVERR, Mux(end > mem_size, Resp.DECERR, Resp.OKAY))


def backdoor_load_layout(addr_bits, data_width):
    """The payload of the backdoor ``load`` stream: ``data`` (one word) at word index ``addr``
    (the address in the low bits)."""
    return data.StructLayout({"addr": addr_bits, "data": data_width})


class AxiMemory(wiring.Component):
    """AXI4 subordinate memory model (a stand-in for DDR4 behind an interconnect).

    Contract
    --------
    * **Reads** are pipelined: up to ``outstanding`` accepted read bursts wait in a table while the
      burst being returned streams one R beat per cycle. With an idle memory the first R beat of a
      burst is valid exactly ``latency`` cycles after its AR handshake (AR in cycle ``t``, R in
      cycle ``t + latency``); later bursts follow without a gap. R beats of one burst are
      contiguous (no read-data interleaving).
    * **Order**: with ``reorder=False`` bursts return in AR order. With ``reorder=True`` each burst
      waits a further 0-31 cycles drawn from a seeded LFSR and the lowest-numbered ready burst goes
      first, so bursts with different IDs overtake one another; bursts with the *same* ID always
      return in AR order (AXI rule), enforced by a dependency mask taken at AR time.
    * **Writes**: one W beat per cycle, concurrently with reads (separate block-RAM ports);
      ``wstrb`` is honoured; W beats wait for their AW (``wready`` low until it has arrived; a W
      beat may go in the same cycle as its AW); B responses come back in AW order. AW is buffered
      so the next burst's W beats follow the previous ``wlast`` without a gap.
    * **Bursts** (AMBA AXI4 A3.4; the full table is in docs/ARCHITECTURE.md, "AxiMemory as an AXI4
      subordinate"): INCR of 1-256 beats, FIXED of 1-16 beats (every beat at the start address),
      WRAP of 2, 4, 8 or 16 beats from a start aligned to the beat size, each of any ``size`` up
      to the bus width. The start address may be unaligned: the first beat goes to it, the
      following beats to the start aligned down to ``1 << size`` plus ``k << size``. ``wstrb`` is
      applied as given to the addressed bus word (a manager asserts only the beat's byte lanes);
      R beats carry the whole bus word. Anything else answers **SLVERR** on every beat (read data
      zero) and writes nothing: the reserved burst type 0b11, WRAP of another length or from an
      unaligned start, FIXED of more than 16 beats, a beat wider than the bus.
    * **DECERR**: a burst whose extent, counted from its start aligned down to the beat size
      (``len + 1`` beats for INCR, one beat for FIXED, the wrap container for WRAP), has any byte
      at or beyond ``size`` answers DECERR on every beat (read data zero) and writes nothing, also
      the part that is in range. With a memory of at least 4 KiB no legal AXI4 burst is partly in
      range. An INCR burst that crosses a 4 KB boundary (not allowed by AXI4) is carried out
      linearly across it. SLVERR takes precedence over DECERR.
    * **Exclusive access** is not supported: there is no ``AxLOCK`` input, an exclusive access
      arrives as a normal one (or with its ``AxLOCK`` ignored, as in
      :class:`~scin.sim.tops.endpoint.FlatAxiMemory`) and is answered ``OKAY``, never
      ``EXOKAY``, which AXI4 (A7.2) defines as "exclusive access not supported". ``AxCACHE``,
      ``AxPROT``, ``AxQOS``, ``AxREGION`` and ``AxUSER`` are ignored.
    * **Backdoor** (for testbenches; not AXI): ``load`` writes ``data`` at word index ``addr``, one
      word per cycle, taking the write port from W for that cycle. ``dump_req`` takes a word index
      and ``dump_data`` returns that word, one per cycle, in order.
    * **Poll port** ``poll``: the word at index ``poll.addr`` appears on ``poll.data`` one cycle
      later, every cycle (a local observer's read, e.g. the accelerator's completion-flag poll).
      A write committed in cycle ``t`` is seen by a poll address presented in cycle ``t + 1``.

    Parameters
    ----------
    params : AxiParams
    size : int
        Bytes; a power of two and at least two bus words.
    latency : int
        Read latency in cycles, AR handshake to first R beat; at least ``MIN_LATENCY`` (3). The
        default, :data:`~scin.hdl.paper.MEM_LATENCY` (40 cycles = 160 ns at 250 MHz), is the paper
        latency model's DDR4 read.
    reorder : bool
        Let responses to different IDs come back out of order.
    outstanding : int
        Read bursts accepted and waiting (1-64), besides the one being returned.
    seed : int
        Non-zero 16-bit LFSR seed for ``reorder``.
    storage : str
        ``"memory"`` (default): an ``amaranth.lib.memory.Memory``, which maps to block RAM.
        ``"sim"``: a :class:`~scin.hdl.endpoint.sim_ram.SimRam` (simulation only, same behaviour),
        for memories of megabytes: no per-word initialiser in the Verilog, and a file backdoor.
    name : str
        The ``SimRam``'s name, which names its file-backdoor plusargs (``storage="sim"`` only).

    Members
    -------
    axi : In(axi_signature(params))
    load : In(stream.Signature({addr, data}))
    dump_req : In(stream.Signature(word_bits))
    dump_data : Out(stream.Signature(data_width))
    poll : In(poll_signature(word_bits, data_width))
    """

    def __init__(self, params, *, size, latency=MEM_LATENCY, reorder=False, outstanding=16,
                 seed=0xACE1, storage="memory", name="mem"):
        if not isinstance(params, AxiParams):
            raise TypeError(f"params must be an AxiParams, not {params!r}")
        if (not isinstance(size, int) or size < 2 * params.data_bytes or size & (size - 1)
                or size > 1 << params.addr_width):
            raise ValueError(f"size must be a power of two of at least two "
                             f"{params.data_bytes}-byte words and addressable in "
                             f"{params.addr_width} bits, not {size!r}")
        if (not isinstance(latency, int) or isinstance(latency, bool)
                or not MIN_LATENCY <= latency <= 4096):
            raise ValueError(f"latency must be an integer between {MIN_LATENCY} and 4096, "
                             f"not {latency!r}")
        if not isinstance(reorder, bool):
            raise TypeError(f"reorder must be a bool, not {reorder!r}")
        if (not isinstance(outstanding, int) or isinstance(outstanding, bool)
                or not 1 <= outstanding <= 64):
            raise ValueError(f"outstanding must be an integer between 1 and 64, "
                             f"not {outstanding!r}")
        if not isinstance(seed, int) or not 0 < seed < 1 << 16:
            raise ValueError(f"seed must be a non-zero 16-bit integer, not {seed!r}")
        if storage not in ("memory", "sim"):
            raise ValueError(f"storage must be 'memory' or 'sim', not {storage!r}")
        self._storage, self._name = storage, name
        self._p, self._size, self._latency = params, size, latency
        self._reorder, self._outstanding, self._seed = reorder, outstanding, seed
        self._depth = size // params.data_bytes
        wbits = exact_log2(self._depth)
        super().__init__({
            "axi":       In(axi_signature(params)),
            "load":      In(stream.Signature(backdoor_load_layout(wbits, params.data_width))),
            "dump_req":  In(stream.Signature(wbits)),
            "dump_data": Out(stream.Signature(params.data_width)),
            "poll":      In(poll_signature(wbits, params.data_width)),
        })

    @property
    def size(self):
        return self._size

    @property
    def depth(self):
        """Words of ``data_width`` bits."""
        return self._depth

    def elaborate(self, platform):
        m = Module()
        wport, rport, dport, pport = self._storage_ports(m)
        self._write_channel(m, wport)
        self._read_channel(m, rport)
        self._backdoor(m, dport, pport)
        return m

    def _storage_ports(self, m):
        """The word storage and its four ports: AXI W, AXI R, backdoor dump, poll."""
        p = self._p
        if self._storage == "memory":
            m.submodules.mem = mem = Memory(shape=p.data_width, depth=self._depth, init=[])
            wport = mem.write_port(granularity=8)
            rport = mem.read_port()   # AXI R
            dport = mem.read_port()   # backdoor dump
            pport = mem.read_port()   # poll
        else:
            m.submodules.mem = ram = SimRam(width=p.data_width, depth=self._depth, name=self._name)
            wport = SimpleNamespace(addr=ram.w_addr, data=ram.w_data, en=ram.w_en)
            rport, dport, pport = ram.read

        return wport, rport, dport, pport

    def _write_channel(self, m, wport):
        """AW, W and B: AWs queue in a FIFO, W beats write through ``wport`` (the backdoor
        load has priority), one B per burst in AW order."""
        p, axi = self._p, self.axi
        lsb = p.size_max  # address bits below the word index
        # A combinational-read FIFO: an AW accepted in cycle t is the head in cycle t + 1, so W
        # beats that follow right behind it (a bridge streaming packets) never wait.
        aw_layout = data.StructLayout({"id": p.id_width, "addr": p.addr_width, "size": 3,
                                       "burst": Burst, "wrap": WRAP_MASK_BITS, "resp": Resp})
        m.submodules.aw_fifo = aw_fifo = SyncFIFO(width=aw_layout.size, depth=4)
        m.submodules.b_fifo = b_fifo = SyncFIFOBuffered(width=p.b_layout.size, depth=4)
        aw_in = Signal(aw_layout)
        m.d.comb += [
            aw_in.id.eq(axi.aw.payload.id), aw_in.addr.eq(axi.aw.payload.addr),
            aw_in.size.eq(axi.aw.payload.size), aw_in.burst.eq(axi.aw.payload.burst),
            aw_in.wrap.eq(wrap_mask(m, axi.aw.payload.len, axi.aw.payload.size)),
            aw_in.resp.eq(burst_resp(m, p, self._size, axi.aw.payload)),
            aw_fifo.w_data.eq(aw_in), axi.aw.ready.eq(aw_fifo.w_rdy),
        ]
        # Fall-through: with the FIFO empty, a W beat may go in the same cycle as its AW.
        head = Signal(aw_layout)
        head_valid = aw_fifo.r_rdy | axi.aw.valid
        m.d.comb += head.eq(Mux(aw_fifo.r_rdy, aw_fifo.r_data, aw_in))
        w_first = Signal(init=1)
        w_addr = Signal(p.addr_width)
        cur_addr = Mux(w_first, head.addr, w_addr)
        w_ok = head_valid & b_fifo.w_rdy & ~self.load.valid
        w_fire = axi.w.valid & w_ok
        m.d.comb += axi.w.ready.eq(w_ok)
        # An AW whose whole burst (one beat) went by in its own cycle never enters the FIFO.
        bypassed = ~aw_fifo.r_rdy & w_fire & axi.w.payload.last
        m.d.comb += aw_fifo.w_en.eq(axi.aw.valid & ~bypassed)
        with m.If(self.load.valid):
            m.d.comb += [wport.addr.eq(self.load.payload.addr),
                         wport.data.eq(self.load.payload.data),
                         wport.en.eq(-1), self.load.ready.eq(1)]
        with m.Elif(w_fire & (head.resp == Resp.OKAY)):
            m.d.comb += [wport.addr.eq(cur_addr[lsb:]), wport.data.eq(axi.w.payload.data),
                         wport.en.eq(axi.w.payload.strb)]
        with m.If(w_fire):
            m.d.sync += [w_addr.eq(next_beat_addr(m, cur_addr, head.size, head.burst, head.wrap)),
                         w_first.eq(axi.w.payload.last)]
            with m.If(axi.w.payload.last):
                b_in = Signal(p.b_layout)
                m.d.comb += [aw_fifo.r_en.eq(aw_fifo.r_rdy), b_in.id.eq(head.id),
                             b_in.resp.eq(head.resp), b_fifo.w_data.eq(b_in), b_fifo.w_en.eq(1)]
        m.d.comb += [axi.b.valid.eq(b_fifo.r_rdy), axi.b.payload.eq(b_fifo.r_data),
                     b_fifo.r_en.eq(axi.b.ready)]

    def _read_channel(self, m, rport):
        """AR and R: a table of waiting bursts, one burst returned at a time through ``rport``."""
        p, axi = self._p, self.axi
        lsb = p.size_max  # address bits below the word index
        # A table of waiting bursts.
        n = self._outstanding
        cnt_width = bits_for(self._latency + REORDER_SPREAD)
        slot_layout = data.StructLayout({
            "id": p.id_width, "addr": p.addr_width, "len": 8, "size": 3, "burst": Burst,
            "resp": Resp, "cnt": cnt_width,  # cycles still to wait before the burst may start
            "dep": n,          # older waiting bursts that must go first (same ID, or all in order)
        })
        valid = Signal(n)
        slots = [Signal(slot_layout, name=f"slot{i}") for i in range(n)]

        free_idx = Signal(range(n))
        for i in reversed(range(n)):
            with m.If(~valid[i]):
                m.d.comb += free_idx.eq(i)
        ar_fire = axi.ar.valid & axi.ar.ready
        m.d.comb += axi.ar.ready.eq(~valid.all())

        # The burst being returned, copied out of its slot when picked.
        act_valid = Signal()
        act = Signal(data.StructLayout({"id": p.id_width, "addr": p.addr_width, "len": 8,
                                        "size": 3, "burst": Burst, "wrap": WRAP_MASK_BITS,
                                        "resp": Resp}))
        s1_valid = Signal()
        s1 = Signal(data.StructLayout({"id": p.id_width, "resp": Resp, "last": 1}))
        advance = axi.r.ready | ~s1_valid

        eligible = Signal(n)
        for i in range(n):
            m.d.comb += eligible[i].eq(valid[i] & (slots[i].cnt == 0) & (slots[i].dep == 0))
        pick_idx = Signal(range(n))
        for i in reversed(range(n)):
            with m.If(eligible[i]):
                m.d.comb += pick_idx.eq(i)
        can_pick = ~act_valid | (advance & (act.len == 0))
        pick = can_pick & eligible.any()
        picked = Signal(n)  # one-hot slot leaving the table this cycle
        m.d.comb += picked.eq(Mux(pick, Const(1, n) << pick_idx, 0))

        lfsr = Signal(16, init=self._seed)
        m.d.sync += lfsr.eq(Mux(lfsr[0], (lfsr >> 1) ^ 0xB400, lfsr >> 1))
        extra = lfsr[:exact_log2(REORDER_SPREAD)] if self._reorder else 0

        same = Signal(n)
        for i in range(n):
            m.d.comb += same[i].eq(valid[i] & (Const(int(not self._reorder), 1)
                                               | (slots[i].id == axi.ar.payload.id)))
        for i in range(n):
            s = slots[i]
            with m.If(s.cnt != 0):
                m.d.sync += s.cnt.eq(s.cnt - 1)
            m.d.sync += s.dep.eq(s.dep & ~picked)
            with m.If(picked[i]):
                m.d.sync += valid[i].eq(0)
            with m.If(ar_fire & (free_idx == i)):
                ar = axi.ar.payload
                m.d.sync += [
                    valid[i].eq(1), s.id.eq(ar.id), s.addr.eq(ar.addr), s.len.eq(ar.len),
                    s.size.eq(ar.size), s.burst.eq(ar.burst),
                    s.resp.eq(burst_resp(m, p, self._size, ar)),
                    s.cnt.eq(self._latency - MIN_LATENCY + extra),
                    s.dep.eq(same & ~picked),
                ]

        with m.If(advance):
            m.d.comb += [rport.addr.eq(act.addr[lsb:]), rport.en.eq(1)]
            m.d.sync += [s1_valid.eq(act_valid), s1.id.eq(act.id), s1.resp.eq(act.resp),
                         s1.last.eq(act.len == 0)]
            with m.If(act_valid):
                m.d.sync += [act.addr.eq(next_beat_addr(m, act.addr, act.size, act.burst,
                                                        act.wrap)),
                             act.len.eq(act.len - 1)]
        with m.Else():
            m.d.comb += rport.en.eq(0)
        # The picked slot, muxed once, so its wrap mask is computed once rather than per slot.
        chosen = Signal(slot_layout)
        for i in range(n):
            with m.If(pick_idx == i):
                m.d.comb += chosen.eq(slots[i])
        with m.If(can_pick):
            m.d.sync += act_valid.eq(pick)
            with m.If(pick):
                m.d.sync += [act.id.eq(chosen.id), act.addr.eq(chosen.addr), act.len.eq(chosen.len),
                             act.size.eq(chosen.size), act.burst.eq(chosen.burst),
                             act.wrap.eq(wrap_mask(m, chosen.len, chosen.size)),
                             act.resp.eq(chosen.resp)]
        m.d.comb += [
            axi.r.valid.eq(s1_valid), axi.r.payload.id.eq(s1.id), axi.r.payload.resp.eq(s1.resp),
            axi.r.payload.last.eq(s1.last),
            axi.r.payload.data.eq(Mux(s1.resp == Resp.OKAY, rport.data, 0)),
        ]

    def _backdoor(self, m, dport, pport):
        """The backdoor dump stream and the poll port."""
        dump_adv = ~self.dump_data.valid | self.dump_data.ready
        m.d.comb += [dport.addr.eq(self.dump_req.payload), dport.en.eq(dump_adv),
                     self.dump_req.ready.eq(dump_adv), self.dump_data.payload.eq(dport.data)]
        with m.If(dump_adv):
            m.d.sync += self.dump_data.valid.eq(self.dump_req.valid)
        m.d.comb += [pport.addr.eq(self.poll.addr), self.poll.data.eq(pport.data)]
