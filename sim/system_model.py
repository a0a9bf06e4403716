"""The closed-form system model of SCIN, NVLS and ring collectives, calibrated from the RTL, under
one name: every public name of the modules it is built from, which say what each form is.

* :mod:`scin.sim.fabric_model`: the fabrics (:class:`Fabric`, :data:`RTL_FABRIC`,
  :func:`nvlink_fabric`), the :class:`Calibration` and its store, the link arithmetic.
* :mod:`scin.sim.scin_model`, :mod:`scin.sim.nvls_model`, :mod:`scin.sim.ring_model`: the
  closed forms of SCIN (pull and push, fp16 and INT8), NVLS and the ring, in seconds.
* :mod:`scin.sim.closed_forms`: :func:`collective_time`, one entry point over the three, and the
  model of a ``scin compare`` row.
* :mod:`scin.sim.bench_csv`: the benches' CSVs read back.
* :mod:`scin.sim.calibration` and :mod:`scin.sim.compare_fit`: the constants fitted to the
  measurements and the model checked against them.
"""

from .bench_csv import read_bench_csv, read_compare_csv, read_push_csv
from .calibration import fit_calibration, fit_push, validate, write_calibration
from .closed_forms import COMPARE_ALGORITHMS, collective_time, compare_model, compare_modelled
from .compare_fit import COMPARE_CONSTANTS, fit_compare, validate_compare
from .fabric_model import (CALIBRATION_PATH, COMPARE_PATH, HOP_OWN, MODES, NVLINK_ATOMIC_S,
                           NVLINK_HOP_S, NVLINK_ISA_HZ, NVLINK_MEM_S, OPS, PUSH_PATH, RTL_FABRIC,
                           Calibration, Fabric, bus_bandwidth, load_calibration, nvlink_fabric,
                           packet_flits, packets, rtl_fabric)
from .nvls_model import (NVLS_BARRIER_OWN, NVLS_ISSUE_CYCLES, NVLS_PACKET_BYTES,
                         NVLS_REQUEST_CYCLES, NVLS_SEQUENCER_CYCLES, NVLS_WINDOW, nvls_ceiling,
                         nvls_time)
from .ring_model import RING_SLICES, ring_time
from .scin_model import protocol_ceiling, push_link_flits, scin_time

__all__ = ["Fabric", "RTL_FABRIC", "Calibration", "OPS", "MODES",
           "packets", "packet_flits", "scin_time", "nvls_time", "ring_time", "collective_time",
           "protocol_ceiling", "bus_bandwidth", "fit_calibration", "write_calibration",
           "load_calibration", "validate", "read_bench_csv", "CALIBRATION_PATH",
           "nvlink_fabric", "NVLINK_HOP_S", "NVLINK_MEM_S", "NVLINK_ISA_HZ", "NVLINK_ATOMIC_S",
           "HOP_OWN", "nvls_ceiling", "read_compare_csv", "compare_model", "fit_compare",
           "validate_compare", "compare_modelled", "COMPARE_CONSTANTS", "COMPARE_PATH",
           "COMPARE_ALGORITHMS", "NVLS_PACKET_BYTES", "NVLS_BARRIER_OWN", "NVLS_ISSUE_CYCLES",
           "NVLS_REQUEST_CYCLES", "NVLS_SEQUENCER_CYCLES",
           "PUSH_PATH", "read_push_csv", "fit_push", "push_link_flits",
           "NVLS_WINDOW", "RING_SLICES", "rtl_fabric"]
