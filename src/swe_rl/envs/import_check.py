"""After a build: the installed packages that use numpy are imported, in the venv's Python.

A dated resolution can pair binaries that fail at import: an old release's metadata may lack the upper bound on
numpy that later releases declare (numba 0.53.1 says ``numpy>=1.15``; 0.57.1 says ``numpy<1.25,>=1.21``), so a
resolver that prefers the newest numpy backtracks to numba 0.53.1, which then refuses numpy 1.25 at import ("Numba
needs NumPy 1.20 or less"), and every test run of the env fails to collect. :func:`failed_imports` finds such
failures at build time: every distribution that requires numpy, and the repo's own (editable) package, imported
in a fresh interpreter. :func:`numpy_bound` chooses the remedy for one whose error is a check of numpy's version
(:data:`NUMPY_MISMATCH`): numpy resolved as of that release's own upload, the numpy of its time; the build is
then made again with that bound (recorded in the lock like a widening, as ``# swe-rl: bounded``).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from swe_rl.envs.dating import Bounding, Resolver, norm
from swe_rl.envs.lock import IMPORT_FAILS, pinned

IMPORT_TIMEOUT_S = 600

# what a numpy that does not fit says at import: a package's own check (numba 0.54 on: "Numba needs NumPy 1.20 or
# less"), numpy's check of a binary built for another numpy (its C API version, its array struct's size), or a
# compiled module of a package that requires numpy failing to initialize (numba 0.53.1 beside numpy 1.25:
# "SystemError: initialization of _internal failed without raising an exception")
NUMPY_MISMATCH = re.compile(
    r"(needs|requires) NumPy|NumPy [\d.]+ or (less|older|earlier)|compiled (against|using) (API version|NumPy)"
    r"|numpy\.core\.(_)?multiarray(_umath)? failed to import|_ARRAY_API not found"
    r"|numpy\.(dtype|ndarray|ufunc) size changed|initialization of \S+ (failed|raised)",
    re.IGNORECASE,
)

# Run by the venv's Python (3.5 and later: no f-strings): one JSON line per module imported, each in its own
# interpreter, so that one failure cannot change the next (a half-imported numba left in sys.modules)
PROBE = r"""
import json, subprocess, sys
try:
    from importlib import metadata
except ImportError:
    sys.exit(0)  # Python < 3.8: nothing checked

def needs_numpy(dist):
    for req in dist.requires or []:
        name = req.split(";")[0].strip()
        for sep in "<>=!~[ (":
            name = name.split(sep)[0]
        if name.strip().lower() == "numpy" and "extra" not in req.partition(";")[2]:
            return True
    return False

def editable(dist):
    text = dist.read_text("direct_url.json") or "{}"
    return bool(json.loads(text).get("dir_info", {}).get("editable"))

def modules(dist):
    text = dist.read_text("top_level.txt")
    if text:
        names = text.split()
    else:
        names = []
        for f in dist.files or []:
            top = str(f).split("/")[0]
            if top.endswith(".py"):
                top = top[:-3]
            if "." in top or top.startswith("__editable__") or top in ("..", "bin", "__pycache__"):
                continue
            names.append(top)
    if not names and editable(dist):
        names = [dist.metadata["Name"].replace("-", "_").lower()]
    return sorted(set(n for n in names if n.isidentifier() and not n.startswith("_")))

seen = set()
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if not name or name.lower() in seen or not (needs_numpy(dist) or editable(dist) or name.lower() == "numpy"):
        continue
    seen.add(name.lower())
    for module in modules(dist):
        try:
            proc = subprocess.run([sys.executable, "-c", "import " + module], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
        except subprocess.TimeoutExpired:
            error = "no answer in 120 s"
        else:
            lines = proc.stdout.strip().splitlines() or ["exit %d" % proc.returncode]
            error = "" if proc.returncode == 0 else lines[-1]
        print(json.dumps({"name": name, "version": dist.version, "module": module, "error": error}), flush=True)
"""


class ImportFailure(NamedTuple):
    """A module of an installed distribution that does not import, and the last line its interpreter said."""

    name: str
    version: str
    module: str
    error: str

    def lock_line(self) -> str:
        return f"{IMPORT_FAILS}`import {self.module}` ({self.name}=={self.version}) fails: {self.error}"

    @property
    def about_numpy(self) -> bool:
        """The error is a package's own check of numpy's version, or numpy's check of a binary's interface."""
        return NUMPY_MISMATCH.search(self.error) is not None


def failed_imports(
    python: Path, testbed: Path, environ: dict[str, str], note: Callable[[str], None]
) -> list[ImportFailure]:
    """The modules that fail to import (each logged with ``note``): of every distribution that requires numpy,
    numpy's own and the editable installs'. Run in ``testbed`` (the repo's root, as the tests run) with the
    install environment."""
    try:
        proc = subprocess.run(
            [str(python), "-c", PROBE],
            cwd=testbed,
            env={**environ, "PYTHONDONTWRITEBYTECODE": "1"},  # nothing written in the testbed
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    else:
        out = proc.stdout
    failures = []
    for line in out.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and item.get("error"):
            failures.append(ImportFailure(item["name"], item["version"], item["module"], item["error"]))
            note(f"swe-rl: after the build, {failures[-1].lock_line()[len(IMPORT_FAILS) :]}")
    return failures


def numpy_bound(failures: list[ImportFailure], lock: list[str], resolver: Resolver) -> Bounding | None:
    """numpy resolved as of the upload of the first failing release whose error is a numpy check, when that release
    is older than the installed numpy (its metadata did not bound what came after it). None when no such failure,
    when the times are not known, or when numpy is older already (a release built for a later numpy)."""
    candidates = [f for f in failures if f.about_numpy and norm(f.name) != "numpy"]
    numpy = {norm(n): v for n, _, v in (line.partition("==") for line in pinned(lock))}.get("numpy")
    if not candidates or numpy is None:
        return None
    numpy_uploaded = resolver.uploaded("numpy", numpy)
    for failure in candidates:
        uploaded = resolver.uploaded(failure.name, failure.version)
        if not uploaded or not numpy_uploaded or uploaded >= numpy_uploaded:
            continue
        return Bounding(
            package="numpy",
            needed_by=f"{failure.name}=={failure.version}",
            reason=f"`import {failure.module}` fails beside numpy {numpy} ({failure.error[:200]}); numpy as of "
            f"{failure.name} {failure.version}'s release",
            as_of=uploaded,
        )
    return None
