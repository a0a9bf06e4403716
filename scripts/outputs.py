"""Writing a command's output files whole or not at all.

Every file a ``scin`` command writes (CSV, JSON, Markdown, PNG) goes through :func:`replacing`:
it is written under a temporary name in its folder and renamed over the target only when the
writing succeeded, so an error or an interrupt leaves the previous file as it was, never a part.
"""

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


__all__ = ["replacing", "write_text", "save_figure", "emit_json"]


@contextmanager
def replacing(path):
    """Yield a temporary path beside ``path`` (its folder made); on a clean exit rename it to
    ``path``, on an exception remove it and re-raise."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path, text):
    """Write ``text`` to ``path`` through :func:`replacing`."""
    with replacing(path) as tmp:
        tmp.write_text(text)


def save_figure(fig, path, **kwargs):
    """``fig.savefig(path, **kwargs)`` through :func:`replacing` (the format from ``path``)."""
    kwargs.setdefault("format", Path(path).suffix.lstrip(".") or "png")
    with replacing(path) as tmp:
        fig.savefig(tmp, **kwargs)


def emit_json(target, text):
    """A command's ``--json [FILE]``: ``text`` on standard output for ``-``, else into ``target``
    through :func:`replacing`."""
    if target == "-":
        print(text)
    else:
        write_text(target, text + "\n")
