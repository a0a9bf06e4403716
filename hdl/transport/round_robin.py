"""Round-robin selection logic shared by the flit-level class mux and the packet arbiters."""

from amaranth.hdl import Signal, Cat


__all__ = ["round_robin"]


def round_robin(m, requests, last):
    """Add to ``m`` a combinational round-robin choice among ``requests``.

    Parameters
    ----------
    m : Module
    requests : list of 1-bit values
    last : Signal(range(len(requests)))
        The index granted most recently; the search starts just after it, so every requester gets
        a turn within ``len(requests)`` grants (no starvation).

    Returns
    -------
    (grant, any) : (Signal, Signal)
        ``grant`` is the chosen index (meaningful only while ``any`` is high).
    """
    n = len(requests)
    grant = Signal(range(n) if n > 1 else 1)
    any_ = Signal()
    m.d.comb += any_.eq(Cat(*requests).any())
    if n == 1:
        return grant, any_
    with m.Switch(last):
        for prev in range(n):
            with m.Case(prev):
                # Lowest priority first: the last matching assignment wins, and the input right
                # after ``last`` has the highest priority.
                for off in reversed(range(1, n + 1)):
                    k = (prev + off) % n
                    with m.If(requests[k]):
                        m.d.comb += grant.eq(k)
    return grant, any_
