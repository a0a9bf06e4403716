"""The ISA-level test setup that ``tb/block/test_isa.py`` and ``tb/block/test_faults.py`` share: one
ISA configuration (so each simulator builds the ISA once for both), the buffer addresses in every
endpoint model's memory, and the random inputs.
"""

import numpy as np

from scin.hdl.codec import pack
from scin.hdl.isa import FlagStatus, IsaParams, flag_layout
from scin.hdl.packet import FabricParams
from scin.sim import numerics
from scin.sim.testbench.endpoint_model import EndpointModel
from scin.sim.testbench.env import tb_config, tb_rng, start
from scin.sim.testbench.isa_program import read_counters
from scin.sim.testbench.streams import StreamSource, random_pauses


__all__ = ["SRC", "DST", "SSRC", "SDST", "FLAG", "MEM", "TEST_TIMEOUT", "DATA_FLAGS", "isa_params",
           "make_inputs", "flag_word", "counters", "start_isa"]

SRC, DST, SSRC, SDST, FLAG = 0x0000, 0x10000, 0x20000, 0x21000, 0x22000
MEM = 0x23000


#: The watchdog of the ISA under test, in cycles: short, so the fault tests
#: (tb/block/test_faults.py, which share this build) see it expire quickly, and still far above any
#: healthy pause here (model latencies of 5-40 cycles with 20 % idle cycles and backpressure).
TEST_TIMEOUT = 2048

#: The flag's data bits (OVERFLOW | INVALID): what a good collective's status may carry, and
#: meaningless in a failed one's.
DATA_FLAGS = (FlagStatus.OVERFLOW | FlagStatus.INVALID).value


def isa_params(cfg):
    # One configuration for every case, so each simulator builds the ISA once: 4 slots in 2 waves
    # makes messages of more than 4 slots (16 KiB) exercise wave regulation and slot reuse; two
    # push resources of 2 slots each let two groups push at once, beside pulled collectives;
    # trains of 2 slots (a wave) put READ_WAVE and WRITE_POSTED under every case here (the
    # system tests' builds keep the per-slot protocol); in-place AllGathers of whole pages run in
    # pairs of ranks (the system tests' builds keep one phase per rank, the paper's).
    return IsaParams(fabric=FabricParams(ports=4), capacity=16384, waves=2, timeout=TEST_TIMEOUT,
                     push_resources=2, push_capacity=8192, read_train=2, write_train=2,
                     gather_pairs=True)


def make_inputs(rng, dtype, n_parts, elements):
    """Random inputs per participant: ``(data, scales)`` as :func:`scin.sim.numerics.allreduce`
    takes them (``scales`` None but for int8)."""
    g = np.random.default_rng(rng.getrandbits(32))
    if dtype == "int8":
        x = (g.standard_normal((n_parts, elements)) * 3).astype(np.float16)
        q, s = numerics.quantize_int8(x)
        return q, s
    if dtype == "fp16":
        return (g.standard_normal((n_parts, elements)) * 100).astype(np.float16), None
    # BF16 by truncating float32 (not rounding): the low half of each value is simply dropped.
    x = (g.standard_normal((n_parts, elements)) * 1e3).astype(np.float32)
    return (x.view(np.uint32) >> 16).astype(np.uint16), None


def flag_word(generation, status=0):
    """The completion flag a descriptor must leave: ``generation`` and ``status`` bits."""
    return pack(flag_layout(), generation=generation, status=int(status))


def counters(dut):
    """The ISA's counters (its ``counters`` port) as a dict."""
    return read_counters(dut.counters)


async def start_isa(dut):
    """The ISA with an endpoint model on every port (random pauses on every stream unless the
    config says ``stalls: false``) and a descriptor loader, out of reset:
    ``(params, ports, rng, eps, loader)``."""
    cfg = tb_config()
    params = isa_params(cfg)
    ports = params.fabric.ports
    rng = tb_rng(dut)
    pauses = (lambda: random_pauses(rng, 0.2)) if cfg.get("stalls", True) else None
    # Drivers first, so no input is X when reset ends.
    eps = [EndpointModel(dut, params.fabric, i, MEM, rng, pauses=pauses) for i in range(ports)]
    loader = StreamSource(dut, "load")
    await start(dut)
    return params, ports, rng, eps, loader
