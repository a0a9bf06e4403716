"""The host side's hardware description (sim/system_config.py) and the memory images of
sim/system_run.py, without a simulation."""

import json

import pytest

from scin.hdl.paper import FLIT_WIDTH, MEM_LATENCY, ONE_WAY_LATENCY
from scin.sim.allreduce import CollectiveConfig
from scin.sim.nvls_run import NvlsSystem
from scin.sim.soak import SoakConfig
from scin.sim.system_config import NvlsEngine, SystemConfig
from scin.sim.system_run import Dump, flit_loads, read_memh, write_memh


@pytest.mark.parametrize("cfg", [SystemConfig(), SoakConfig().system(),
                                 CollectiveConfig.from_fields(endpoints=8, mode="push").system(),
                                 NvlsSystem(mem_size=1 << 16, entries=8, acks=8).system()])
def test_json_round_trip(cfg):
    text = json.dumps(cfg.to_json())
    assert SystemConfig.from_json(json.loads(text)) == cfg
    assert repr(SystemConfig.from_json(json.loads(text)).params()) == repr(cfg.params())


def test_defaults_are_the_papers_link_model():
    cfg = SystemConfig()
    assert (cfg.flit_width, cfg.one_way_latency, cfg.mem_latency) == \
        (FLIT_WIDTH, ONE_WAY_LATENCY, MEM_LATENCY)


def test_unknown_field_and_bad_engine_are_refused():
    with pytest.raises(ValueError, match="unknown SystemConfig field.*waves"):
        SystemConfig.from_json({"endpoints": 4, "waves": 8})
    with pytest.raises(ValueError, match="nvls must be an NvlsEngine"):
        SystemConfig(nvls={"entries": 8})


def test_views_describe_the_same_hardware():
    """A collective on the soak's hardware is the soak's system (one build for both); an
    NvlsSystem is the system with its engine and no push space."""
    soak = SoakConfig()
    same = CollectiveConfig.from_fields(
        capacity=soak.capacity, outstanding=soak.waves, reorder=True,
        push_capacity=soak.push_capacity, trains=soak.trains, gather_pairs=soak.gather_pairs)
    assert same.system() == soak.system()
    assert CollectiveConfig.from_fields().system() != soak.system()
    nvls = NvlsSystem(entries=8, acks=8).system()
    assert nvls.nvls == NvlsEngine(entries=8, acks=8) and nvls.push_capacity == 0
    params = nvls.params()
    assert params.nvls.entries == 8 and params.isa.push_resources == 0


def test_loads_are_whole_flits_and_the_dump_file_reads_back(tmp_path):
    """Two regions sharing a flit land at their bytes; the rest of the flit stays zero; a
    ``$readmemh`` file written for word addresses reads back as the same bytes."""
    fb = 32
    regions = [(4, b"\x01\x02"), (10, b"\x03")]
    loads = flit_loads(regions, 64, fb)
    assert [a for a, _ in loads] == [0, 0]
    want = bytearray(32)
    want[4:6], want[10] = b"\x01\x02", 3
    assert loads[0][1] == bytes(want) == loads[1][1]
    write_memh(tmp_path / "m.hex", [(1, bytes(want))], fb)
    assert read_memh(tmp_path / "m.hex", fb).tobytes() == bytes(want)
    assert Dump().nbytes == 0
