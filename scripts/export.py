"""Verilog export: one ``.v`` file and one ports description (``.json``) per registered block.

The JSON description of a top (``<name>.ports.json``) is::

    {"top": "switch", "description": "...", "clock": "clk", "reset": "rst",
     "reset_kind": "synchronous, active high",
     "params": {"flit_width": 256, "ports": 4, ...},
     "ports": [{"name": "link__0__tx__valid", "direction": "output", "width": 1}, ...]}

Port names follow Amaranth's convention: the signature path joined with ``__``.
"""

import dataclasses
import json
from pathlib import Path

from ..hdl.catalog import BLOCKS, SIMULATION_ONLY
from ..hdl.paper import FLIT_WIDTH, PORTS
from ..hdl.toplevel import toplevel_ports
from ..sim.runner import extra_sources, verilog_for
from .options import default_out, integer, out_dir
from .outputs import write_text


__all__ = ["select_blocks", "port_list", "export_verilog", "fabric_arguments", "fabric_params",
           "add_arguments", "run"]


def select_blocks(names=None, synthesizable=False):
    """The registered blocks to work on: all of them (only synthesizable ones if asked), or
    ``names`` (checked)."""
    if not names:
        return {n: b for n, b in BLOCKS.items() if not (synthesizable and n in SIMULATION_ONLY)}
    unknown = [n for n in names if n not in BLOCKS]
    if unknown:
        raise ValueError(f"argument --block: unknown block(s) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(BLOCKS))}")
    return {n: BLOCKS[n] for n in names}


def port_list(component):
    """``[{name, direction, width}]`` for every port of a component's signature, plus
    clock/reset."""
    ports = [{"name": "clk", "direction": "input", "width": 1},
             {"name": "rst", "direction": "input", "width": 1}]
    from amaranth.hdl._ir import PortDirection
    for name, (value, direction) in toplevel_ports(component).items():
        ports.append({"name": name,
                      "direction": "input" if direction == PortDirection.Input else "output",
                      "width": len(value)})
    return ports


def export_verilog(out_dir, params, names=None, log=print):
    """Write ``<name>.v`` and ``<name>.ports.json`` for each selected block into ``out_dir``.

    Returns the list of written Verilog paths.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (factory, description) in select_blocks(names).items():
        component = factory(params)
        path = verilog_for(lambda: component, name, repr(params))
        target = out_dir / f"{name}.v"
        write_text(target, path.read_text())
        write_text(out_dir / f"{name}.ports.json", json.dumps({
            "top": name, "description": description, "clock": "clk", "reset": "rst",
            "reset_kind": "synchronous, active high",
            "params": dataclasses.asdict(params),
            "ports": port_list(component),
        }, indent=2) + "\n")
        log(f"{name:16s} {target}  ({description})")
        written.append(target)
        for extra in extra_sources(path):
            # Hand-written simulation models the design instantiates (e.g. scin_sim_ram).
            write_text(out_dir / extra.name, extra.read_text())
            log(f"{'':16s} {out_dir / extra.name}  (instantiated by {name})")
    return written


# -- `scin verilog` -------------------------------------------------------------------------------

def fabric_arguments(parser):
    """The fabric options shared by ``scin verilog``, ``synth`` and ``lint``."""
    group = parser.add_argument_group("fabric parameters")
    group.add_argument("--ports", type=integer(2, 16), default=PORTS, metavar="N",
                       help="switch ports / endpoints, 2 to 16 (default: %(default)s)")
    group.add_argument("--flit-width", type=int, default=FLIT_WIDTH, metavar="BITS",
                       choices=(64, 128, 256, 512),
                       help="flit width in bits (default: %(default)s)")


def fabric_params(args):
    """The :class:`~scin.hdl.packet.FabricParams` that :func:`fabric_arguments`' options give."""
    from ..hdl.packet import FabricParams
    return FabricParams.default_for(flit_width=args.flit_width, ports=args.ports)


def add_arguments(p):
    """The options of ``scin verilog``."""
    p.add_argument("--out", type=out_dir, default=default_out("verilog"), metavar="DIR",
                   help="output folder (default: out/verilog/)")
    p.add_argument("--block", action="append", metavar="NAME", choices=sorted(BLOCKS),
                   help="only this block (repeatable; default: all)")
    fabric_arguments(p)


def run(args):
    """``scin verilog``: write every selected block's Verilog and port description."""
    written = export_verilog(args.out, fabric_params(args), args.block)
    print(f"wrote {len(written)} block(s) to {args.out}")
    return 0
