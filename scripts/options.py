"""Option types and checks shared by every ``scin`` command.

Each type below is an argparse ``type=``: it turns the text into a value or raises
``argparse.ArgumentTypeError`` with what is allowed, which :class:`Parser` reports as one line
naming the option (``scin NAME: error: argument --size: ...``), exit status 2, before any work.
Output paths are checked the same way: an output folder must not be a file and its nearest
existing parent must be a writable folder; an output file must not be a folder, likewise.

The conventions every command follows (docs/CLI.md, "Option names"):

* ``--out DIR`` is the folder a command writes its files into; commands that write reports
  default to ``out/<command>/`` (:func:`default_out`), the tracked ``docs/`` only with ``--doc``;
* a sweep takes a comma list of the values its one-run option takes (``--endpoints 4,8``).
"""

import argparse
import os
import tempfile
from pathlib import Path

from ..sim.toolchain import REPO_ROOT


__all__ = ["OUT_ROOT", "Parser", "integer", "real", "size", "integer_list", "size_list",
           "out_dir", "out_file", "json_file", "default_out", "add_out_doc", "doc_folder",
           "doc_target", "choice_list", "checked"]

#: The work folder of the commands that write reports: ``out/`` under the checkout (environment
#: ``SCIN_OUT_DIR``), one folder per command.
OUT_ROOT = Path(os.environ.get("SCIN_OUT_DIR", REPO_ROOT / "out"))


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that refuses abbreviated options and reports a bad option as one line
    ``PROG: error: MESSAGE`` on standard error with exit status 2 (no usage block)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _fail(text, allowed):
    raise argparse.ArgumentTypeError(f"{allowed}, not {text!r}")


def wave_window(text):
    """The type of ``--waves``: ``START:END`` cycles as a :class:`~scin.sim.waves.Waves`."""
    from ..sim.waves import parse_window
    try:
        return parse_window(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def integer(low=None, high=None):
    """The type of an integer option from ``low`` to ``high`` (either may be None: unbounded)."""
    if low is not None and high is not None:
        allowed = f"must be an integer from {low} to {high}"
    elif low is not None:
        allowed = f"must be an integer of at least {low}"
    else:
        allowed = "must be an integer"

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            _fail(text, allowed)
        if (low is not None and value < low) or (high is not None and value > high):
            _fail(text, allowed)
        return value
    parse.__name__ = "integer"
    return parse


def real(low=None, high=None, positive=False):
    """The type of a decimal option from ``low`` to ``high`` (either may be None: unbounded);
    ``positive``: above zero."""
    bounds = [f"at least {low}" if low is not None else "", f"at most {high}" if high else ""]
    allowed = ("must be a positive number" if positive else "must be a number") + \
        (" " + " and ".join(b for b in bounds if b) if any(bounds) else "")

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            _fail(text, allowed)
        if value != value or (low is not None and value < low) or \
                (high is not None and value > high) or (positive and value <= 0):
            _fail(text, allowed)
        return value
    parse.__name__ = "number"
    return parse


def size(low=0, even=False):
    """The type of a size option: a number of bytes with an optional unit (B, KiB, MiB), at
    least ``low`` bytes, and with ``even`` a whole number of 16-bit elements (a message size);
    a negative size is refused with what is allowed."""
    from ..sim.allreduce import parse_size
    allowed = ("must be " + ("an even " if even else "a ")
               + "number of bytes with an optional unit (B, KiB, MiB), e.g. 4KiB"
               + (f", of at least {low} B" if low else ""))

    def parse(text):
        try:
            value = parse_size(text)
        except ValueError:
            _fail(text, allowed)
        if value < low or (even and value % 2):
            _fail(text, allowed)
        return value
    parse.__name__ = "size"
    return parse


def _items(text):
    items = [item.strip() for item in str(text).split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"must be a comma list without empty items, "
                                         f"not {text!r}")
    return items


def integer_list(low=None, high=None):
    """The type of a comma list of integers, each from ``low`` to ``high``."""
    one = integer(low, high)

    def parse(text):
        return [one(item) for item in _items(text)]
    parse.__name__ = "integer list"
    return parse


def size_list(low=0, even=False):
    """The type of a comma list of sizes (:func:`size`)."""
    one = size(low, even)

    def parse(text):
        return [one(item) for item in _items(text)]
    parse.__name__ = "size list"
    return parse


def _check_writable(folder):
    # A file made and removed at once: the only test that holds for every user (root included)
    # and every file system (read-only mounts, /proc).
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot write into {str(folder)!r} "
                                         f"({exc.strerror or exc})") from None


def choice_list(choices):
    """The type of a comma list of values from ``choices``."""
    def parse(text):
        items = _items(text)
        bad = [item for item in items if item not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"must be a comma list of {', '.join(choices)}, "
                                             f"not {text!r}")
        return items
    parse.__name__ = "list"
    return parse


def checked(parse):
    """The type that checks the text with ``parse`` (one of the types above) and keeps the text,
    for an option its command reads as text."""
    def keep(text):
        parse(text)
        return text
    keep.__name__ = parse.__name__
    return keep


def _writable_parent(path):
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{str(parent)!r} is a file, not a folder")
    _check_writable(parent)


def out_dir(text):
    """The type of an output folder: not an existing file, its nearest existing parent a writable
    folder (it is made when the command writes)."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"must be a folder, but {text!r} is a file")
    if path.is_dir():
        _check_writable(path)
    else:
        _writable_parent(path)
    return path


def out_file(text):
    """The type of an output file: not an existing folder, its folder writable (made if needed)."""
    path = Path(text)
    if not text or path.is_dir() or text.endswith(os.sep):
        raise argparse.ArgumentTypeError(f"must be a file, but {text!r} is a folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text!r} (permission denied)")
    _writable_parent(path)
    return path


def json_file(text):
    """The type of ``--json [FILE]``: ``-`` (standard output) or an output file."""
    return "-" if text == "-" else out_file(text)


def default_out(command):
    """``out/<command>/``: where a command writes its reports without ``--out`` or ``--doc``."""
    return OUT_ROOT / command


def add_out_doc(parser, command, docs_out, doc_file):
    """Add ``--out DIR`` and ``--doc [FILE]`` to a command that writes files and a section of a
    tracked Markdown file: without either its files go to ``out/<command>/`` and the section into
    a copy of ``doc_file`` there; ``--doc`` writes the files into ``docs_out`` (a tracked folder of
    ``docs/``, or None when the command writes no other file) and the section into ``doc_file``
    (or FILE)."""
    rel_doc = Path(doc_file).relative_to(REPO_ROOT)
    where = ("" if docs_out is None
             else f"; with --doc: {Path(docs_out).relative_to(REPO_ROOT)}/")
    parser.add_argument("--out", type=out_dir, default=None, metavar="DIR",
                        help=f"folder of the written files (default: out/{command}/{where})")
    parser.add_argument("--doc", type=out_file, nargs="?", const=Path(doc_file), default=None,
                        metavar="FILE",
                        help=f"write the section into the tracked {rel_doc} (or FILE) and the "
                             "files into docs/ (default: a copy of the document in the --out "
                             "folder)")


def doc_folder(args, command, docs_out):
    """The folder a command writes its files into: ``--out``, else ``docs_out`` with ``--doc``,
    else ``out/<command>/``."""
    if args.out is not None:
        return Path(args.out)
    if args.doc is not None and docs_out is not None:
        return Path(docs_out)
    return default_out(command)


def doc_target(args, command, doc_file):
    """The Markdown file whose section a command rewrites: ``--doc`` (FILE or the tracked
    ``doc_file``), else a copy of ``doc_file`` in the ``--out`` folder (made from the tracked
    one the first time)."""
    from ..sim.runner import atomic_write
    if args.doc is not None:
        return Path(args.doc)
    target = doc_folder(args, command, None) / Path(doc_file).name
    if not target.exists():
        atomic_write(target, Path(doc_file).read_text())
    return target
