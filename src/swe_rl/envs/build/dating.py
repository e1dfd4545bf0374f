"""Resolving as of a date on today's index, which no longer holds everything that existed then.

A dated resolution (uv ``--exclude-newer``) can fall back silently. Every pytest from 3.6 to 5.3 requires
``atomicwrites``, whose releases before 2020 were deleted from PyPI: as of a 2019 date no atomicwrites
survives, so the resolver settles on pytest 3.5.1, which predates that requirement and prints no ``-rA``
summary. After a dated build, :func:`unreachable` finds such cases: an installed package older than its
newest release as of the date, whose newest release needs a dependency with no release as old as the
date. Only that dependency is then taken from today's index (``--exclude-newer-package``), recorded
in the build log, the env's record and its lock (``# swe-rl: widened ...`` lines).

A date can also pick a release with no wheel for the env's Python: as of Python 3.9's release, numpy,
pandas and scipy had none, and uv would compile them (hours). :meth:`Resolver.first_wheel` finds the
earliest later release that has one; the dependency is then resolved as of that release's upload.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, Field

# Build tools are not resolved as of the task's date: setuptools older than 64 cannot make the editable
# installs (PEP 660) that uv performs, and the official images built every repo with a 2024 setuptools.
# An sdist that builds only with the setuptools of its time (setuptools.Feature, gone in 46) makes the
# build retry with the task date's build tools (recorded).
BUILD_TOOLS_AS_OF = "2024-06-01T00:00:00Z"  # setuptools 70.0 (the SWE-bench specs' own pin), wheel 0.43
# setuptools' plugins go with it: setuptools-scm as of a 2021 task (6.0, which reads pkg_resources.packaging)
# does not load in 2024's setuptools (70 dropped that), where the official images had a 2024 setuptools-scm
BUILD_TOOLS = ("setuptools", "wheel", "setuptools-scm")
# ...but never older than what a project without pyproject.toml builds with: PEP 517's default build
# requirement, which uv and pip apply, is setuptools>=40.8.0 (uploaded 2019-02-05).
DATED_BUILD_TOOLS_FLOOR = "2019-02-06T00:00:00Z"

UNDATED = "2100-01-01T00:00:00Z"
PYTEST_RA_FLOOR = "pytest>=4.6"  # 4.5 (2019-05) first listed passed tests under -rA; 4.6 is its LTS line
# the floor's own date: 4.6.0-4.6.2 were uploaded 2019-06-01..03. pytest is resolved as of it, not from today:
# a 2019 env's plugins (pytest-rerunfailures 7.0 imports _pytest.resultlog, gone in 6.1) need a 2019 pytest
PYTEST_RA_AS_OF = "2019-06-04T00:00:00Z"

WIDENED = "# swe-rl: widened "
BOUNDED = "# swe-rl: bounded "
REPLACED = "# swe-rl: pin replaced "  # numpy==1.19.2 by 1.19.3 (...)


class Widening(BaseModel):
    """A dependency taken from today's index: nothing as old as the date survives, or none of those builds here."""

    package: str = Field(description="The dependency with no release as old as the date.")
    needed_by: str = Field(description="The release (as of the date) that requires it, e.g. pytest==4.3.1.")
    reason: str = Field(
        default="no release as old as the date survives", description="Why the date could not hold it."
    )
    as_of: str = Field(
        default="",
        description="The time it is resolved as of instead (RFC 3339): the upload of the earliest release with "
        "a wheel for this Python; '' for today's index.",
    )
    release: str = Field(
        default="",
        description="The release it must be (a next release taken for one that fails at import): installed as "
        "such where the venv already has another (an instance's clone of its version's venv).",
    )
    replaces: str = Field(
        default="",
        description="The exact pin it replaces (numpy==1.19.2), '' for none: the install commands name "
        "``package==release`` in its place.",
    )

    def detail(self) -> str:
        return f"(needed by {self.needed_by}; {self.reason})"

    def lock_line(self) -> str:
        if self.replaces:
            return f"{REPLACED}{self.replaces} by {self.release} {self.detail()}"
        return f"{WIDENED}{self.package} {self.detail()}"


class Bounding(Widening):
    """A dependency resolved as of an earlier time than the task's (``as_of``): the releases of the time of a
    release that fails to import beside a later one (:mod:`swe_rl.envs.build.import_check`)."""

    def lock_line(self) -> str:
        return f"{BOUNDED}{self.package} {self.detail()}"


class WheelRelease(NamedTuple):
    """A release with a wheel for the env's Python."""

    version: str
    uploaded: str  # just after the upload of its first such wheel (RFC 3339); '' when the index gives no time
    compiled: bool  # a platform wheel (not ``py3-none-any``): the package has compiled extensions


def widened_in(lock: list[str]) -> list[str]:
    """Package names a lock records as widened."""
    return [line[len(WIDENED) :].split()[0] for line in lock if line.startswith(WIDENED)]


def widenings_in(lock: list[str], needed_by: str) -> list[Widening]:
    """The widenings a lock records, as a build under it applies them again (``needed_by`` says where they come
    from): a widened package exempt from the date, a replaced pin named in its place again."""
    found = [Widening(package=name, needed_by=needed_by) for name in widened_in(lock)]
    for line in lock:
        if line.startswith(REPLACED) and len(words := line[len(REPLACED) :].split()) >= 3:
            pin, release = words[0], words[2]
            name = pin.partition("==")[0]
            why = "the pin replaced as the lock records"
            found.append(
                Widening(package=name, needed_by=needed_by, reason=why, release=release, replaces=pin)
            )
    return found


class Resolver:
    """``uv pip compile`` queries for one venv's Python, as of one date."""

    def __init__(self, uv: str, python: Path, date: str, environ: dict[str, str]) -> None:
        self.uv, self.python, self.date, self.environ = uv, python, date, environ
        self._newest: dict[str, str | None] = {}

    def compile(
        self, requirements: list[str], *, dated: bool, deps: bool, lowest: bool = False
    ) -> dict[str, str] | None:
        """name -> version of a resolution (None when it has no solution); with ``lowest``, the lowest versions
        of the requirements named that satisfy them."""
        cmd = [self.uv, "pip", "compile", "-", "--python", str(self.python), "--quiet", "--no-header"]
        cmd += ["--no-annotate", "--no-strip-extras"] + (["--resolution", "lowest-direct"] if lowest else [])
        if dated:
            cmd += ["--exclude-newer", self.date]
        if not deps:
            cmd.append("--no-deps")
        proc = subprocess.run(
            cmd,
            input="\n".join(requirements) + "\n",
            capture_output=True,
            text=True,
            env=self.environ,
            check=False,
        )
        if proc.returncode != 0:
            return None
        pins = (line.split("==", 1) for line in proc.stdout.splitlines() if "==" in line)
        return {norm(name.split("[")[0]): version.split(";")[0].strip() for name, version in pins}

    def newest(self, names: list[str]) -> dict[str, str | None]:
        """Each package's newest release as of the date (None: no release that old survives)."""
        todo = [n for n in names if n not in self._newest]
        if todo:
            found = self.compile(todo, dated=True, deps=False)
            for name in todo:
                if found is not None:
                    self._newest[name] = found.get(name)
                else:  # one of them has no release as old as the date: ask one by one
                    alone = self.compile([name], dated=True, deps=False)
                    self._newest[name] = alone.get(name) if alone else None
        return {n: self._newest[n] for n in names}

    def first_wheel(self, name: str, after: str, below: str = "") -> WheelRelease | None:
        """The earliest release of ``name`` after version ``after`` (any, with '') and before ``below`` (any, with
        ''), on today's index, that has a wheel for this Python (None: none has). uv matches the tags and reports
        the files (its pylock.toml output)."""
        extra = ["--only-binary", name, "--resolution", "lowest"]
        bounds = [f">{after}" if after else "", f"<{below}" if below else ""]
        for package in self._pylock(name + ",".join(b for b in bounds if b), extra):
            wheels = package.get("wheels", [])
            if norm(str(package.get("name", ""))) != norm(name) or not wheels:
                continue
            files = [_file_name(w) for w in wheels]
            return WheelRelease(
                version=str(package["version"]),
                uploaded=_first_upload(wheels),
                compiled=not all(f.endswith("-none-any.whl") for f in files),
            )
        return None

    def uploaded(self, name: str, version: str) -> str:
        """Just after the first upload of release ``version`` of ``name`` (its wheel for this Python, or its
        sdist), RFC 3339; '' when the index does not say."""
        for package in self._pylock(f"{name}=={version}", []):
            if norm(str(package.get("name", ""))) == norm(name):
                return _first_upload([*package.get("wheels", []), package.get("sdist") or {}])
        return ""

    def _pylock(self, requirement: str, extra: list[str]) -> list[dict[str, Any]]:
        """The packages of uv's pylock.toml for ``requirement`` alone (no dependencies) on today's index."""
        cmd = [self.uv, "pip", "compile", "-", "--python", str(self.python), "--quiet", "--no-header"]
        cmd += ["--no-deps", *extra, "--format", "pylock.toml"]
        proc = subprocess.run(
            cmd, input=f"{requirement}\n", capture_output=True, text=True, env=self.environ, check=False
        )
        try:
            lock = tomllib.loads(proc.stdout) if proc.returncode == 0 else {}
        except tomllib.TOMLDecodeError:  # a uv too old for pylock.toml output
            return []
        return [p for p in lock.get("packages", []) if isinstance(p, dict)]

    def python_tag(self) -> str:
        """``cp39`` for a CPython 3.9 venv."""
        proc = subprocess.run(
            [str(self.python), "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        return proc.stdout.strip() or "this Python's"


def unreachable(resolver: Resolver, lock: list[str], undated: set[str]) -> list[Widening]:
    """Dependencies to widen so that the lock's held-back packages can have their dated newest release."""
    installed = pinned_versions(lock)
    candidates = [n for n in installed if n not in undated]
    newest = resolver.newest(candidates)
    out: dict[str, Widening] = {}
    for name in candidates:
        best = newest.get(name)
        if best is None or not _older(installed[name], best):
            continue
        if resolver.compile([f"{name}=={best}"], dated=True, deps=True) is not None:
            continue  # reachable as of the date: held back by the other pins, on purpose
        needs = resolver.compile([f"{name}=={best}"], dated=False, deps=True) or {}
        deps = [d for d in needs if d != name and d not in installed and d not in undated]
        for dep, version in resolver.newest(deps).items():
            if version is None and dep not in out:
                out[dep] = Widening(package=dep, needed_by=f"{name}=={best}")
    return list(out.values())


def to_wheel(resolver: Resolver, name: str, needed_by: str) -> Widening | str:
    """``name`` resolved as of its earliest release after the date with a platform wheel for this Python, or why
    it stays as of the date: a pure-Python package (its first wheel is ``none-any``) builds from its sdist in
    seconds, and one with no wheel at all would be built from source whatever the date."""
    dated = resolver.newest([name]).get(name)
    release = resolver.first_wheel(name, dated or "")
    if release is None:
        return "no later release has a wheel for this Python"
    if not release.compiled:
        return f"pure Python: its first wheel, {release.version}, is for any platform"
    return Widening(
        package=name,
        needed_by=f"{name}=={dated}" if dated else needed_by,
        reason=f"no {resolver.python_tag()} wheel as of the date; earliest with one: {release.version}",
        as_of=release.uploaded or "",
    )


def pinned_versions(lines: list[str]) -> dict[str, str]:
    """name (PEP 503) -> version of the ``name==version`` lines of a lock or a freeze (editable, local and
    comment lines left out)."""
    return {norm(name): version for name, version in _pins(lines)}


def _pins(lock: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for line in lock:
        if line.startswith(("#", "-")) or " @ " in line or "==" not in line:
            continue
        name, version = line.split("==", 1)
        pairs.append((name.strip(), version.strip()))
    return pairs


def _older(have: str, best: str) -> bool:
    try:
        return Version(have) < Version(best)
    except InvalidVersion:
        return False


def _file_name(wheel: dict[str, object]) -> str:
    """A pylock.toml wheel entry's file name (its ``name``, else the last part of its url or path)."""
    where = str(wheel.get("name") or wheel.get("url") or wheel.get("path") or "")
    return unquote(urlparse(where).path).rsplit("/", 1)[-1]


def _first_upload(files: list[dict[str, Any]]) -> str:
    """Just after the earliest upload time of pylock.toml file entries (uv's times are to the second)."""
    times = [_utc(f["upload-time"]) for f in files if isinstance(f.get("upload-time"), datetime)]
    return (min(times) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ") if times else ""


def _utc(when: datetime) -> datetime:
    return when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)


def norm(name: str) -> str:
    """A package name as PEP 503 normalizes it."""
    return re.sub(r"[-_.]+", "-", name).lower()
