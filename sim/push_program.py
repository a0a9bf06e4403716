"""A participant's side of a pushed collective (docs/ISA.md, Push mode): the accelerator commands
that write its input into the ISA's reserved space.

Each participant copies its input from local memory into its sync resource's push space with
REDUCE_SEND commands in push mode (``push = 1``: inc=1 WRITEs, posted, no READ at the ISA's
initiative; :class:`~scin.hdl.endpoint.kernel.ReduceSend`): for INT8 first its block scales, a
slot's worth (``scale_bytes_per_slot``, 128 bytes) per WRITE, then its data, ``max_payload``
bytes per WRITE. Every WRITE starts on a slot of the space (the ISA's rule), so a short last
packet goes in a command of its own and no byte past the input is sent. What is pushed is what
the ISA would read of the participant (:func:`~scin.hdl.isa.push_input_bytes`), always from the
start of the space: an AllGather's shard (in place: the participant's own slice of the buffer,
rank x ``C`` in), a Broadcast's input from the root alone (the others push nothing).
"""

from ..hdl.codec import pack
from ..hdl.endpoint.accelerator import AccOp
from ..hdl.isa import Op, ReadKind, push_addr_layout, push_input_bytes
from ..hdl.isa.plan import ranks

__all__ = ["push_commands"]


def push_commands(isa_params, desc, port, tag):
    """The command dicts (:func:`~scin.hdl.endpoint.accelerator.command_layout` fields) with which
    the participant on ``port`` pushes its input for the descriptor ``desc`` (a dict of
    integers), each carrying ``tag``."""
    int8 = desc["dtype"] == 2       # DType.INT8
    order = ranks(desc["participants"])
    if desc["op"] == Op.BROADCAST.value and port != order[desc.get("root", 0)]:
        return []
    data_bytes = push_input_bytes(desc)
    elements = data_bytes if int8 else data_bytes // 2
    layout = push_addr_layout(isa_params)
    page, spage = isa_params.fabric.max_payload, isa_params.scale_bytes_per_slot
    # In place, an AllGather rank's shard is its slice of the result buffer.
    at = (order.index(port) * data_bytes if desc["op"] == Op.ALLGATHER.value
          and desc["src_addr"] == desc["dst_addr"] else 0)
    parts = []
    if int8:
        parts.append((ReadKind.SCALE, desc["src_scale_addr"] + at // 32, elements // 32, spage))
    parts.append((ReadKind.DATA, desc["src_addr"] + at, data_bytes, page))
    cmds = []
    for kind, src, nbytes, step in parts:
        full, tail = divmod(nbytes, step)
        for at, length, count in ((0, step, full), (full * step, tail, 1)):
            if length and count:
                cmds.append(dict(op=AccOp.REDUCE_SEND, tag=tag, dst=port, push=1,
                                 addr=src + at, length=length, count=count,
                                 dest=pack(layout, offset=at, kind=kind, sync=desc["sync"])))
    return cmds
