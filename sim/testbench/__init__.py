"""Code that runs inside the simulator, shared by the tests (``tb/``) and the CLI (``scripts/``).

One module per thing: ``env`` (clock, reset, configuration, seeded randomness, reading signals),
``streams`` (stream drivers, monitors and pause generators), ``traffic`` (packets as flits),
``endpoint_model`` (a Python endpoint for ISA-level tests), ``isa_program`` (loading descriptors,
reading the ISA's counters), and the benches behind ``scin allreduce`` (``allreduce_bench``),
``scin soak`` (``soak_bench``) and ``scin bench-port`` (``port_bench``).
"""
