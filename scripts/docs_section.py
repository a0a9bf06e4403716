"""What every job that writes into ``docs/`` shares: one section writer and one commit finder.

A generated section of a Markdown document sits between two HTML comments named after the job,
``<!-- NAME:begin -->`` and ``<!-- NAME:end -->``; everything outside them is hand-written and kept
byte for byte.
"""

import subprocess
from pathlib import Path

from ..sim.toolchain import REPO_ROOT
from .outputs import write_text


__all__ = ["markers", "section_block", "rewrite_section", "current_commit"]


def markers(name):
    """The ``(begin, end)`` comments around the section called ``name``."""
    if not name or any(c in name for c in "<>\n") or "--" in name:
        raise ValueError(f"a section name must be a non-empty word without '<', '>', '--' or a "
                         f"newline, not {name!r}")
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def section_block(name, body):
    """``body`` between the section's markers, each on its own line: the text that
    :func:`rewrite_section` writes."""
    begin, end = markers(name)
    return f"{begin}\n{body}\n{end}"


def rewrite_section(path, name, body, *, title="Performance"):
    """Replace the section ``name`` of the Markdown file ``path`` with ``body``; return the block
    written (markers included).

    A file without the section gets it appended after a blank line; a missing file is created with
    the heading ``# {title}``.

    Raises
    ------
    ValueError
        The file has one of the section's markers but not the other, or the end before the begin:
        rewriting it would lose hand-written text.
    """
    path = Path(path)
    begin, end = markers(name)
    block = section_block(name, body)
    old = path.read_text() if path.exists() else f"# {title}\n"
    start, stop = old.find(begin), old.find(end)
    if start < 0 and stop < 0:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    elif start < 0 or stop < start:
        raise ValueError(f"{path}: the {name!r} section's markers are unpaired or out of order "
                         f"(expected {begin} ... {end}); fix the file by hand")
    else:
        new = old[:start] + block + old[stop + len(end):]
    write_text(path, new)
    return block


#: The code a measurement depends on: a change here that is not committed makes a figure's
#: commit ``<hash>-dirty``.
MEASURED_CODE = ("hdl", "sim", "scripts", "boards")


def current_commit(cwd=REPO_ROOT):
    """The short hash of the checked-out commit of the repository at ``cwd``, with ``-dirty``
    when a tracked file of :data:`MEASURED_CODE` differs from it (the figures then come from
    code no commit holds), or ``"unknown"`` outside a git checkout or without git."""
    try:
        result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=cwd)
        commit = result.stdout.strip()
        if not commit:
            return "unknown"
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                 *MEASURED_CODE], capture_output=True, text=True, cwd=cwd)
    except OSError:
        return "unknown"
    return commit + ("-dirty" if status.stdout.strip() else "")
