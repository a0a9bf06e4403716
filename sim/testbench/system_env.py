"""Starting the simulated system (``hdl/system.py``) for a bench that a host-side job drives with a
JSON plan (``scin allreduce``, ``scin soak``), and reading its state at the end.
"""

from dataclasses import dataclass
from pathlib import Path

from ..system_config import SystemConfig
from .env import tb_config, start, read_int, report_progress
from .isa_program import read_counters
from .streams import StreamSource, StreamSink


__all__ = ["SystemRun", "start_system", "accelerator_streams", "counters", "switch_errors"]


@dataclass
class SystemRun:
    """A started system and its plan.

    Members
    -------
    plan : dict
        The plan the host side passed (``SCIN_TB_CONFIG``).
    params : SystemParams
        The hardware parameters the plan describes (``plan["hw"]``, a
        :class:`~scin.sim.system_config.SystemConfig`).
    run_dir : Path
        Where the bench writes its results.
    cmds, events : list of StreamSource, list of StreamSink
        Each accelerator's command and event streams.
    isa_load : StreamSource
        The ISA's descriptor load port.
    """
    plan: dict
    params: object
    run_dir: Path
    cmds: list
    events: list
    isa_load: StreamSource


async def start_system(dut):
    """Start the system of the plan with the memory backdoor idle.

    The memories are loaded and dumped through files (see hdl/endpoint/sim_ram.v); the stream
    backdoor stays idle (driven, so Icarus does not see Z on it). The cycles reached are noted in
    the run folder for the CLI's progress (:func:`~scin.sim.testbench.env.report_progress`)."""
    plan = tb_config()
    params = SystemConfig.from_json(plan["hw"]).params()
    cmds, events, isa_load = accelerator_streams(dut, params.fabric.ports)
    report_progress(plan["run_dir"])
    await start(dut)
    return SystemRun(plan, params, Path(plan["run_dir"]), cmds, events, isa_load)


def accelerator_streams(dut, n):
    """Drive the memory backdoors idle (so Icarus does not see Z on them) and return every
    endpoint's command source, event sink and the ISA's load source: ``(cmds, events,
    isa_load)``."""
    for i in range(n):
        getattr(dut, f"load__{i}__valid").value = 0
        getattr(dut, f"dump_req__{i}__valid").value = 0
        getattr(dut, f"dump_data__{i}__ready").value = 0
    cmds = [StreamSource(dut, f"cmd__{i}") for i in range(n)]
    events = [StreamSink(dut, f"events__{i}") for i in range(n)]
    return cmds, events, StreamSource(dut, "isa_load")


def counters(dut):
    """The ISA's counters of the system under test."""
    return read_counters(dut.counters)


def switch_errors(dut, n):
    """Each switch port's error word."""
    return [read_int(getattr(dut, f"errors__{i}")) for i in range(n)]
