"""NVLink-SHARP (NVLS) baseline mode of the switch.

NVLS's ``multimem.ld_reduce`` accumulates FP16/BF16 elements in FP32, in the order the members'
responses arrive, and rounds once per result. The golden model is :mod:`scin.sim.nvls`.

Blocks (one per module), joined in :class:`~.engine.NvlsEngine` by the signatures of
:mod:`.interfaces`:

* :class:`~.requests.RequestUnit` -- takes the GPUs' multimem requests, round robin, and fans
  them out to the group's members; :class:`~.table.MulticastTable` is its address lookup.
* :class:`~.responses.ResponseBuffer` -- the reduction table, filled by the members' READ_RESPs.
* :class:`~.sequencer.ReduceSequencer` -- answers each ``ld_reduce`` in request order through
  :class:`~.reducer.NvlsReducer` (a flit of every member in, the reduced flit out), built on
  :class:`~.fp32_add.Fp32Adder` (one IEEE binary32 adder).
* :class:`~.acks.AckTable` -- gathers the members' WRITE_RESPs of each ``st`` and ``red``.
* :class:`~.outputs.NvlsOutputs` -- the per-port, per-class output queues.
"""
