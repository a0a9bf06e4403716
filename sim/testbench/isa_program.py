"""The ISA's control plane seen from a testbench: loading a program of descriptors into its
instruction buffer, and reading its counters.

Descriptors are dicts of :func:`~scin.hdl.isa.descriptor_layout` fields (enum members
or their values), packed with :mod:`scin.hdl.codec`.
"""

from scin.hdl.codec import pack, unpack
from scin.hdl.isa import descriptor_layout
from scin.hdl.isa import load_layout
from scin.hdl.isa import counters_layout

from .env import read_int


__all__ = ["load_words", "load_program", "read_counters"]


def load_words(isa_params, descriptors):
    """The load-port words of a program: descriptor ``j`` into slot ``j``, ``last`` on the final
    one (which fixes the program length)."""
    ll, dl = load_layout(isa_params), descriptor_layout()
    return [pack(ll, index=j, last=int(j == len(descriptors) - 1), desc=pack(dl, d))
            for j, d in enumerate(descriptors)]


def load_program(source, isa_params, descriptors):
    """Queue the program on ``source``, the :class:`StreamSource` of the ISA's load port."""
    source.send(*load_words(isa_params, descriptors))


def read_counters(handle):
    """The ISA's counters (a signal of :func:`counters_layout`) as a dict of integers."""
    return unpack(counters_layout(), read_int(handle))
