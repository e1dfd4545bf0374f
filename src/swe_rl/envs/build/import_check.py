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

from swe_rl.envs.build.dating import Bounding, Resolver, Widening, norm, pinned_versions
from swe_rl.envs.build.pins import IMPORT_FAILS

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

# what a release says at import on a Python newer than it was made for: names the standard library removed
PYTHON_MISMATCH = re.compile(
    r"cannot import name '\w+' from '(collections|typing|inspect|asyncio\.\w+|fractions|cgi)'"
    r"|No module named '(imp|distutils|asynchat|asyncore|smtpd|imghdr|cgi|pipes)'"
    r"|module '(collections|inspect|time|os|platform|base64)' has no attribute '\w+'",
)

# the probe (invenv/import_probe.py), fed to the venv's Python with -c: the testbed, its working directory, first on
# its path; one JSON line per module imported
PROBE = Path(__file__).with_name("invenv") / "import_probe.py"


class ImportFailure(NamedTuple):
    """A module of an installed distribution that does not import, and the last line its interpreter said."""

    name: str
    version: str
    module: str
    error: str
    culprit: str = (
        ""  # the installed distribution whose file raised it (the traceback's innermost in site-packages)
    )
    culprit_version: str = ""

    def lock_line(self) -> str:
        return f"{IMPORT_FAILS}`import {self.module}` ({self.name}=={self.version}) fails: {self.error}"

    @property
    def about_python(self) -> bool:
        """The error is a release using what the env's Python no longer has (``collections.Mapping``, gone in
        3.10; ``imp`` and ``distutils``, gone in 3.12; ``inspect.getargspec``, gone in 3.11)."""
        return PYTHON_MISMATCH.search(self.error) is not None

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
            [str(python), "-c", PROBE.read_text()],
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
            failures.append(
                ImportFailure(
                    item["name"],
                    item["version"],
                    item["module"],
                    item["error"],
                    item.get("culprit", ""),
                    item.get("culprit_version", ""),
                )
            )
            note(f"swe-rl: after the build, {failures[-1].lock_line()[len(IMPORT_FAILS) :]}")
    return failures


def numpy_bound(failures: list[ImportFailure], lock: list[str], resolver: Resolver) -> Bounding | None:
    """numpy resolved as of the upload of the first failing release whose error is a numpy check, when that release
    is older than the installed numpy (its metadata did not bound what came after it). None when no such failure,
    when the times are not known, or when numpy is older already (a release built for a later numpy)."""
    candidates = [f for f in failures if f.about_numpy and norm(f.name) != "numpy"]
    numpy = pinned_versions(lock).get("numpy")
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


def next_releases(
    failures: list[ImportFailure], lock: list[str], resolver: Resolver, held: set[str]
) -> list[Widening]:
    """For each failure raised in another installed distribution's files (its culprit, not in ``held``): that
    distribution resolved as of a later release, where the failure is one a later release can mend.

    - What the env's Python no longer has (:attr:`ImportFailure.about_python`): its next release with a wheel for
      this Python. A dated resolution takes the newest release as of the date, which can be one made before the
      Python it runs on (pydap 3.2.2 of 2017 on Python 3.10: ``from collections import Mapping``).
    - A check of numpy's version (:attr:`ImportFailure.about_numpy`) where numpy is held (the spec pins it, so
      :func:`numpy_bound` cannot move it): its first release whose metadata admits that numpy (numba 0.55.0
      beside xarray 0.12's numpy 1.23.0: 0.56.2).

    Once per build: a release that still fails stays, recorded in the lock."""
    numpy = pinned_versions(lock).get("numpy")
    out: dict[str, Widening] = {}
    for failure in failures:
        name = norm(failure.culprit)
        if not name or name in held or name in out or name == "numpy":
            continue
        if failure.about_numpy and numpy and "numpy" in held:
            after = f"{failure.culprit}>{failure.culprit_version}"
            fits = resolver.compile([after, f"numpy=={numpy}"], dated=False, deps=True, lowest=True)
            version = (fits or {}).get(name, "")
            uploaded = resolver.uploaded(failure.culprit, version) if version else ""
            why = f"refuses the numpy {numpy} the env holds; its first release whose metadata admits it"
        elif failure.about_python and (
            release := resolver.first_wheel(failure.culprit, failure.culprit_version)
        ):
            version, uploaded, why = (
                release.version,
                release.uploaded,
                "fails on this Python; its next release",
            )
        else:
            continue
        if not uploaded:
            continue
        out[name] = Widening(
            package=name,
            needed_by=f"`import {failure.module}` ({failure.name}=={failure.version})",
            reason=f"{failure.culprit} {failure.culprit_version} {why}, {version} ({failure.error[:160]})",
            as_of=uploaded,
            release=version,
        )
    return list(out.values())


def import_remedies(
    failures: list[ImportFailure],
    lock: list[str],
    resolver: Resolver,
    held: set[str],
    note: Callable[[str], None],
) -> list[Widening]:
    """What a build is made again with for its import failures: numpy bounded (:func:`numpy_bound`, unless
    ``held``), next releases (:func:`next_releases`); each said with ``note``."""
    found: list[Widening] = []
    if "numpy" not in held and (bound := numpy_bound(failures, lock, resolver)) is not None:
        note(f"swe-rl: bounded numpy: {bound.detail()}; building again")
        found.append(bound)
    for later in next_releases(failures, lock, resolver, held):
        note(f"swe-rl: widened {later.package}: {later.detail()}; building again")
        found.append(later)
    return found


def releases_to_take(widened: list[Widening], freeze: Callable[[], list[str]]) -> list[str]:
    """``name==release`` of each widening that names its release, where the venv (``freeze``) has another version of
    it: an instance's clone holds its version's resolution, which an install of the repo alone leaves as it is."""
    wanted = {norm(w.package): w.release for w in widened if w.release}
    if not wanted:
        return []
    have = pinned_versions(freeze())
    return [
        f"{name}=={release}" for name, release in wanted.items() if name in have and have[name] != release
    ]
