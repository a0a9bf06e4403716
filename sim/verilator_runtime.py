"""Verilator's runtime objects, compiled once and shared by every model built the same way.

Each Verilator model links the same few runtime objects (``verilated.o``, ``verilated_vpi.o``,
``verilated_threads.o``: ``VM_GLOBAL_FAST``/``VM_GLOBAL_SLOW`` of the generated makefile). They
do not depend on the design, only on how Verilator configured the build, yet every build compiled
them again: about 8 s of CPU each, some 3 minutes of a suite of two dozen models. Here the first
build of a configuration stores them in ``.build/verilator/runtime-<key>/`` and later builds start
from a copy, so ``make`` finds them up to date.

The key (:func:`runtime_key`) is a hash of everything their compile commands are made of: the
generated ``Vtop.mk`` (Verilator's root and version, the user flags; the toplevel's name left
out) and the scalar settings of ``Vtop_classes.mk`` (C++ standard, tracing, timing, coverage)
with the list of runtime objects, the make variables and compiler flags in the environment
(``MAKEFLAGS``: ``OPT_GLOBAL``, see :mod:`scin.sim.toolchain`), the command line of ``make`` and
the compiler's version. A configuration that differs in any of them gets runtime objects of its
own. Objects are copied in after Verilator has written the makefiles (``make`` rebuilds anything
older than ``Vtop.mk``) and stored after a successful build, atomically.
"""

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path


__all__ = ["runtime_objects", "runtime_key", "seed", "store"]

_SCALAR = re.compile(r"^VM_\w+ = \S*$", re.M)
_ENVIRONMENT = ("MAKEFLAGS", "CXX", "CXXFLAGS", "CPPFLAGS", "OPT", "OPT_GLOBAL")


def runtime_objects(build_dir):
    """The runtime object names of the model in ``build_dir`` (``verilated.o``, ...), from the
    ``VM_GLOBAL_FAST`` and ``VM_GLOBAL_SLOW`` lists of its ``Vtop_classes.mk``."""
    text = (Path(build_dir) / "Vtop_classes.mk").read_text()
    names = []
    for group in re.findall(r"^VM_GLOBAL_(?:FAST|SLOW) \+= \\\n((?:  \S+ \\\n)*)", text, re.M):
        names += [f"{line.split()[0]}.o" for line in group.splitlines()]
    return names


def _compiler_version(env):
    cxx = env.get("CXX", "c++")
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, env=env).stdout
    except OSError:
        return cxx
    return out.splitlines()[0] if out else cxx


def runtime_key(build_dir, make_command, env):
    """A 16-digit hex key of what the runtime objects of ``build_dir`` are compiled from."""
    build_dir = Path(build_dir)
    makefile = (build_dir / "Vtop.mk").read_text()
    # The toplevel's name appears only as the make goal and the executable's rule.
    makefile = re.sub(r"^default: \S+$", "default: <top>", makefile, flags=re.M)
    makefile = re.sub(r"^\S+(: \$\(VK_USER_OBJS\))", r"<top>\1", makefile, flags=re.M)
    classes = (build_dir / "Vtop_classes.mk").read_text()
    description = [makefile, _SCALAR.findall(classes), runtime_objects(build_dir),
                   [f"{name}={env.get(name, '')}" for name in _ENVIRONMENT],
                   [arg for arg in make_command if arg not in ("-C", str(build_dir))],
                   _compiler_version(env)]
    return hashlib.sha256(repr(description).encode()).hexdigest()[:16]


def _cache_dir(root, key):
    return Path(root) / f"runtime-{key}"


def seed(build_dir, root, key):
    """Copy the stored runtime objects of ``key`` (and their dependency files) into
    ``build_dir``, newer than its makefiles. Returns the names copied (none if not stored yet)."""
    cache = _cache_dir(root, key)
    if not (cache / "stored").exists():
        return []
    copied = [name for name in runtime_objects(build_dir) if (cache / name).exists()]
    for name in copied:
        for path in (cache / name, (cache / name).with_suffix(".d")):
            if path.exists():
                shutil.copyfile(path, Path(build_dir) / path.name)   # mtime: now
    return copied


def store(build_dir, root, key):
    """After a successful build: keep its runtime objects under ``key`` if none are stored
    (written to a temporary directory, then renamed, so readers see all or nothing)."""
    cache = _cache_dir(root, key)
    names = runtime_objects(build_dir)
    if (cache / "stored").exists() or not all((Path(build_dir) / n).exists() for n in names):
        return
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache.parent, prefix=cache.name + ".tmp"))
    for name in names:
        for path in (Path(build_dir) / name, (Path(build_dir) / name).with_suffix(".d")):
            if path.exists():
                shutil.copyfile(path, tmp / path.name)
    (tmp / "stored").write_text("\n".join(names) + "\n")
    try:
        os.rename(tmp, cache)
    except OSError:            # another build stored the same objects first
        shutil.rmtree(tmp, ignore_errors=True)
