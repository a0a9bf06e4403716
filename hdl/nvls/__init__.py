"""NVLink-SHARP (NVLS) baseline mode of the switch.

NVLS's ``multimem.ld_reduce`` accumulates FP16/BF16 elements in FP32, in the order the members'
responses arrive, and rounds once per result. The golden model is :mod:`scin.sim.nvls`; the
arithmetic blocks are :class:`~scin.hdl.nvls.fp32_add.Fp32Adder` (one IEEE binary32 adder) and
:class:`~scin.hdl.nvls.reducer.NvlsReducer` (a flit of every member in, the reduced flit out).
"""
