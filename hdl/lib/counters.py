"""The counter convention of every block that counts: wrapping counters in a ``counters`` member.

A block that counts has a ``counters`` member, ``Out`` of :func:`counters_layout` of the names it
counts, and increments its own fields (``c.x.eq(c.x + n)`` in the sync domain). The component
that joins the blocks drives its own ``counters`` with :func:`sum_counters`, each field the sum of
the blocks' fields of that name.
"""

from amaranth.lib import data


__all__ = ["COUNTER_BITS", "counters_layout", "sum_counters"]

#: Width of every performance and error counter (a choice: wrapping 32-bit counters).
COUNTER_BITS = 32


def counters_layout(names, known=None):
    """A struct of ``COUNTER_BITS``-bit fields named ``names``; with ``known``, every name must be
    one of ``known``."""
    names = tuple(names)
    if known is not None:
        unknown = set(names) - set(known)
        if unknown:
            raise ValueError(f"names must be among {tuple(known)}, not {sorted(unknown)}")
    return data.StructLayout({name: COUNTER_BITS for name in names})


def sum_counters(m, counters, blocks, constant=()):
    """Drive each field of ``counters`` (combinationally) with the sum of the ``counters`` fields
    of that name of ``blocks``; the names in ``constant`` are driven with 0. Every field must have
    a source, and every block's field a destination."""
    terms = {name: [0] for name in constant}
    for block in blocks:
        for name, _ in block.counters.shape():
            terms.setdefault(name, []).append(block.counters[name])
    names = [name for name, _ in counters.shape()]
    if sorted(terms) != sorted(names):
        raise ValueError(f"counters without a source: {sorted(set(names) - set(terms))}; "
                         f"without a destination: {sorted(set(terms) - set(names))}")
    for name in names:
        m.d.comb += counters[name].eq(sum(terms[name]))
