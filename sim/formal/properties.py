"""What every formal harness is built from: named properties, the stream contract, open blocks.

A *harness* (one module of this package per block under proof) is a :class:`wiring.Component`
whose ports are the block's environment, left free for the solver: every input port is whatever
the solver chooses in every cycle, within the harness's ``Assume``\\s. The harness states the
block's properties with a :class:`Properties` recorder, so that each assertion, assumption and
cover carries a name that survives the trip through RTLIL and Yosys: the formal flow
(:mod:`.prover`) reads the names back from what the solver reports.

Two kinds of assertion are kept apart:

* the **specification** (``kind="spec"``): what the block promises, stated at its ports against a
  small model of the harness's own (a shadow counter, a shadow bitmap);
* the **invariants** (``kind="invariant"``): strengthening assertions that tie the block's internal
  registers (read through :class:`OpenBlock`) to that model. They are what makes k-induction close
  (without them a state that no reset reaches, say an arbiter locked to an input the model thinks
  idle, can sit still for any number of cycles before it fails). A harness built with
  ``invariants=False`` leaves them out: its broken variants are checked on the specification alone,
  so that what fails is the promise, not a bookkeeping assertion.
"""

from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Fragment, Signal
from amaranth.hdl._ast import Assign, Switch

from ...hdl.params import check_choice


__all__ = ["Properties", "OpenBlock", "stream_contract", "check_broken", "PROPERTY_PREFIX"]

#: Every property's source location is rewritten to ``formal:<name>`` (line: the harness line
#: that stated it), so that Yosys's and smtbmc's reports name the property.
PROPERTY_PREFIX = "formal:"

_KINDS = {"assert": Assert, "assume": Assume, "cover": Cover}


class Properties:
    """The named properties of one harness.

    Call :meth:`spec`, :meth:`invariant`, :meth:`assume` and :meth:`cover` from the harness's
    ``elaborate``; each adds one comb-domain ``Assert``/``Assume``/``Cover`` to the module and
    records its name. A name may be stated several times (once per class, per port): it is one
    property, which fails if any of its instances fails; a cover is reached when any of its
    instances is.

    Members
    -------
    names : dict of str to str
        Every property stated so far, name to kind (``spec``, ``invariant``, ``assume``,
        ``cover``), in the order first stated.
    """

    def __init__(self, *, invariants=True):
        self._invariants = invariants
        self.names = {}

    def _add(self, m, kind, flavour, name, test):
        if any(c.isspace() or c in ":$" for c in name):
            raise ValueError(f"a property name must have no spaces, ':' or '$', not {name!r}")
        if self.names.setdefault(name, kind) != kind:
            raise ValueError(f"property {name!r} is stated both as {self.names[name]} and {kind}")
        stmt = _KINDS[flavour](test, name, src_loc_at=2)
        # Yosys copies a cell's source location into the SMT2 file, and smtbmc prints it for a
        # failed assertion or a reached cover: with the name in it, the report says what failed.
        stmt.src_loc = (PROPERTY_PREFIX + name, stmt.src_loc[1])
        m.d.comb += stmt

    def spec(self, m, name, test):
        """Assert ``test`` in every cycle: a property the block promises."""
        self._add(m, "spec", "assert", name, test)

    def invariant(self, m, name, test):
        """Assert ``test`` in every cycle, as an inductive strengthening (left out when the
        recorder was made with ``invariants=False``)."""
        if self._invariants:
            self._add(m, "invariant", "assert", name, test)

    def assume(self, m, name, test):
        """Assume ``test`` in every cycle: a promise of the environment."""
        self._add(m, "assume", "assume", name, test)

    def cover(self, m, name, test):
        """A cover: some trace from reset must reach a cycle where ``test`` holds."""
        self._add(m, "cover", "cover", name, test)

    def of_kind(self, kind):
        """The names of one kind, in order."""
        return [name for name, k in self.names.items() if k == kind]


def check_broken(broken, variants):
    """A harness's ``broken`` argument: ``None`` (the real block) or one of ``variants``;
    raises ``ValueError`` naming ``broken`` otherwise. Returns it."""
    if broken is not None:
        check_choice("broken", broken, tuple(variants))
    return broken


def stream_contract(m, props, stream, name, *, drives):
    """State the stream contract of ``amaranth.lib.stream`` on ``stream``: once ``valid`` is high
    it stays high until a transfer (``valid & ready``), and ``payload`` does not change meanwhile.

    ``drives="environment"`` assumes it (an input the solver drives), ``drives="block"`` asserts
    it as part of the specification (an output of the block under proof). The contract's other
    half, "``valid`` never depends on ``ready``", is structural and not checked here.
    """
    payload = stream.payload.as_value() if hasattr(stream.payload, "as_value") else stream.payload
    was_valid = Signal(name=f"{name}_was_valid")
    was_ready = Signal(name=f"{name}_was_ready")
    was_payload = Signal(len(payload), name=f"{name}_was_payload")
    m.d.sync += [was_valid.eq(stream.valid), was_ready.eq(stream.ready), was_payload.eq(payload)]
    held = stream.valid & (payload == was_payload)
    test = ~(was_valid & ~was_ready) | held
    if drives == "environment":
        props.assume(m, f"{name}_contract", test)
    elif drives == "block":
        props.spec(m, f"{name}_contract", test)
    else:
        raise ValueError(f"drives must be 'environment' or 'block', not {drives!r}")


class OpenBlock(Elaboratable):
    """A block elaborated by its harness, so the harness can read the block's internal registers.

    The harness adds the :class:`OpenBlock` as a submodule *instead of* the block (the block is
    elaborated once, here), and reads internal signals with :meth:`probe`, only to state
    invariants; a broken variant mutates the block with :meth:`tie`. A probe names a signal as
    Yosys does after flattening (``queue0.level``: signal ``level`` of the block's submodule
    ``queue0``), and must name exactly one signal that the block (or that submodule) assigns.

    Parameters
    ----------
    block : Elaboratable
    platform : the harness's ``platform``
    """

    def __init__(self, block, platform):
        self.block = block
        self._fragment = Fragment.get(block, platform)

    def elaborate(self, platform):
        return self._fragment

    def _fragment_at(self, subs, path):
        fragment = self._fragment
        for sub in subs:
            found = [f for f, n, _ in fragment.subfragments if n == sub]
            if len(found) != 1:
                raise NameError(f"{type(self.block).__name__} has no submodule {sub!r} "
                                f"(probe {path!r})")
            fragment = found[0]
        return fragment

    def submodule(self, path):
        """The elaboratable the block added as submodule ``path`` (``"queue0"``), to read its
        parameters."""
        return self._fragment_at(path.split("."), path).origins[0]

    def _find(self, path):
        *subs, name = path.split(".")
        fragment = self._fragment_at(subs, path)
        signals = {id(s): s for stmts in fragment.statements.values() for stmt in stmts
                   for s in stmt._lhs_signals() if s.name == name}
        if len(signals) != 1:
            raise NameError(f"probe {path!r} of {type(self.block).__name__} names "
                            f"{len(signals)} assigned signals, not one")
        return fragment, next(iter(signals.values()))

    def probe(self, path):
        """The internal signal at ``path`` (``"locked"``, ``"queue0.level"``)."""
        return self._find(path)[1]

    def tie(self, path, value):
        """Mutate the block: every assignment to the signal at ``path`` is taken out and the
        signal is driven with the constant ``value`` instead. This is how a broken variant
        removes one condition from a real block (a register that never moves, a flag that is
        never set) without a copy of its code."""
        fragment, signal = self._find(path)
        statements = fragment.statements
        fragment.statements = {}
        for domain, stmts in statements.items():
            kept = _without(stmts, signal, path)
            if kept:
                fragment.add_statements(domain, kept)
        fragment.add_statements("comb", signal.eq(value))


def _without(stmts, signal, path):
    """``stmts`` with every assignment to ``signal`` taken out (recursively into switches)."""
    out = []
    for stmt in stmts:
        if isinstance(stmt, Assign) and any(s is signal for s in stmt._lhs_signals()):
            if len(stmt._lhs_signals()) != 1:
                raise ValueError(f"cannot tie {path!r}: it is assigned together with other "
                                 f"signals")
            continue
        if isinstance(stmt, Switch):
            stmt = Switch(stmt.test, [(patterns, _without(body, signal, path), loc)
                                      for patterns, body, loc in stmt.cases], src_loc=stmt.src_loc)
        out.append(stmt)
    return out
