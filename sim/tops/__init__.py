"""Simulation-only tops: components that wire real ``hdl/`` blocks together for a testbench or a
benchmark, and are not part of the design (:mod:`.fabric`: transport pair, port and switch
harnesses, the port benchmark; :mod:`.endpoint`: the endpoint blocks with flat AXI ports).

They import only ``hdl/``. Each is elaborated with :func:`scin.sim.runner.verilog_for`'s
``top_module`` set to its module, which puts that module's code into the Verilog cache key.
"""
