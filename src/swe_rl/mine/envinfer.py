"""An environment for a repository swe-rl has no spec for, inferred from its files at the base commit.

No language model: the rules read packaging metadata as pip would.

- **Interpreter**: a Python this host has (:func:`swe_rl.envs.build.interpreters.find_python`, no download)
  that the project's ``requires-python`` / ``python_requires`` allows and, where it lists versions
  (``Programming Language :: Python :: 3.X`` classifiers, tox's envlist; where neither lists any, the
  versions its CI runs: ``.travis.yml``'s ``python``, GitHub workflows' ``python-version``), one of those;
  preferring the newest released by the commit's date (the Python its authors ran), then later ones,
  oldest first. The packaging metadata is the project's own word and comes first; a CI matrix is evidence
  of last resort (it often holds development versions allowed to fail).
  With the host's pytest, only the Python running swe-rl (that pytest is installed for it).
- **Install**: ``pip install -e .`` when a ``pyproject.toml``, ``setup.py`` or ``setup.cfg`` exists, with
  the first extra named ``test``, ``tests`` or ``testing`` it declares; every requirement file that exists
  among :data:`REQUIREMENT_FILES`, then the files tox.ini's ``[testenv]`` deps name or, where it names none,
  ``requirements/test*.txt`` but a file of minimum versions; tox.ini's ``[testenv]`` deps (plain
  requirements and ``-r`` files); then pytest. The env cache resolves all of it as of the task's
  ``created_at`` (uv ``--exclude-newer``), as for any row with an ``install``. ``pytest="host"`` copies
  the host's pytest into the env instead (offline, as ``tasks synth`` does).

The result is the task record's own env fields (``python``, ``install``, ``env_seed``, ``test_cmd``,
``log_parser``), which the env cache builds like any SWE-Gym-style row. Where the rules find no usable
interpreter, :class:`Inference` carries the reason and no env is guessed.
"""

from __future__ import annotations

import configparser
import contextlib
import functools
import re
import shlex
import sys
import tomllib
from collections.abc import Callable
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, Field

from swe_rl.envs.build.interpreters import find_python
from swe_rl.envs.build.recipe import PYTHON_RELEASED
from swe_rl.errors import ConfigError

# pytest-pretty (pydantic's tests) replaces the summary of -rA, where the log parser reads each test's status,
# and a configured --color=yes (dask's addopts) wraps each status in escape codes
TEST_CMD = "python -m pytest -rA -p no:cacheprovider -p no:pretty --color=no"
LOG_PARSER = "parse_log_pytest"
PYTHONS = ("3.13", "3.12", "3.11", "3.10", "3.9", "3.8", "3.7", "3.6")
TEST_EXTRAS = ("test", "tests", "testing")
REQUIREMENT_FILES = (
    "requirements.txt",
    "requirements-dev.txt",
    "requirements_dev.txt",
    "dev-requirements.txt",
    "test-requirements.txt",
    "test_requirements.txt",
    "requirements-test.txt",
    "requirements_test.txt",
    "requirements-tests.txt",
)
PACKAGING = ("pyproject.toml", "setup.py", "setup.cfg")
# git pathspecs of every file the install below reads: where none changed, neighbouring commits share an env
# (the interpreter is chosen from each base commit's own files, CI files too, and is part of the env's key)
DEPENDENCY_FILES = (*PACKAGING, "tox.ini", *REQUIREMENT_FILES, ":(glob)requirements/test*.txt")
CI_FILES = re.compile(r"\.travis\.yml|\.github/workflows/[^/]+\.ya?ml")
_CI_KEYS = ("python", "python-version", "python_version")
_CI_VERSION = re.compile(r"(3\.\d+)(\.\d+)?")  # "3.9", "3.10.4"; not "pypy-3.8", "3.x", "${{ matrix... }}"
_CLASSIFIER = re.compile(r"Programming Language :: Python :: (3\.\d+)\b")
_PY_REQUIRES = re.compile(r"python_requires\s*=\s*['\"]([^'\"]+)['\"]")
_FACTOR = re.compile(r"^[\w,{}.-]+:\s")  # tox's "py38: mock": a dependency of some envs only
_MINIMA = re.compile(r"[-_.]min(imum)?[-_.]")  # tests-pallets-min.txt, test-minimum-versions.txt
# a dict's key ({"test": [...]}) or an item assigned (dask: extras_require["test"] = [...])
_SETUP_PY_EXTRA = re.compile(r"['\"](test|tests|testing)['\"]\s*(?::|\]\s*=[^=])")
PytestSource = Literal["dated", "host"]
Read = Callable[[str], str | None]


class Inference(BaseModel):
    """The env fields of a task, or why none could be inferred (``reason``)."""

    fields: dict[str, Any] = Field(
        default_factory=dict, description="Task record fields: python, install, ..."
    )
    why: dict[str, str] = Field(default_factory=dict, description="Where each choice came from.")
    reason: str = Field(default="", description="Why inference failed ('' when it did not).")


def infer_env(read: Read, files: list[str], *, as_of: str = "", pytest: PytestSource = "dated") -> Inference:
    """The env of a repository whose file ``path`` reads as ``read(path)`` and whose paths are ``files``, for a
    commit of date ``as_of`` (RFC 3339; '' for no date preference)."""
    texts = {name: read(name) for name in PACKAGING if name in files}
    try:
        pyproject = tomllib.loads(texts["pyproject.toml"] or "") if "pyproject.toml" in texts else {}
    except tomllib.TOMLDecodeError as exc:
        return Inference(reason=f"pyproject.toml does not parse ({exc})")
    cfg = _setup_cfg(texts.get("setup.cfg") or "")
    tox = _tox(read("tox.ini") if "tox.ini" in files else None, files)
    # the host's pytest is installed for the Python running swe-rl: only that one can take a copy of it
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    pythons = (running,) if pytest == "host" else by_date(as_of)
    listing = {**texts, "tox.ini": tox.envlist}
    if not any(_CLASSIFIER.search(text or "") for text in listing.values()):
        listing["CI"] = _ci_versions(read, files)
    python, python_why = _python(pyproject, cfg, listing, pythons)
    if not python:
        return Inference(reason=python_why)
    steps: list[str] = []
    why = {"python": python_why}
    if texts:
        extra = _test_extra(pyproject, cfg, texts.get("setup.py") or "")
        target = f".[{extra}]" if extra else "."
        steps.append(f"python -m pip install -e {shlex.quote(target)}")
        why["install"] = f"{', '.join(sorted(texts))}" + (f"; test extra [{extra}]" if extra else "")
    requirements = [f for f in REQUIREMENT_FILES if f in files]
    # tox's [testenv] files where it names some (Flask's requirements/ also holds tests-pallets-min.txt, the
    # oldest versions its setup allows, pinned for one tox env only: installing it too broke every test);
    # else the folder's test files, a file of minimum versions left out
    named = [*tox.requirement_files, *_read_by_setup_py(texts.get("setup.py") or "", files)]
    requirements += [f for f in _with_siblings(named, files) if f not in requirements] or sorted(
        f for f in files if re.fullmatch(r"requirements/test[^/]*\.txt", f) and not _MINIMA.search(f)
    )
    steps += [f"python -m pip install -r {shlex.quote(f)}" for f in requirements]
    if requirements:
        why["requirements"] = ", ".join(requirements)
    if tox.deps:
        steps.append("python -m pip install " + " ".join(shlex.quote(d) for d in tox.deps))
        why["tox"] = "[testenv] deps: " + ", ".join(tox.deps)
    if pytest == "dated":
        steps.append("python -m pip install pytest")
    fields = {
        "python": python,
        "install": " && ".join(steps),
        "env_seed": ["pytest"] if pytest == "host" else [],
        "test_cmd": TEST_CMD,
        "log_parser": LOG_PARSER,
    }
    return Inference(fields=fields, why=why)


def _ci_versions(read: Read, files: list[str]) -> str:
    """The CPython versions the CI files run (``.travis.yml``'s ``python``, a workflow's ``python-version``,
    anywhere in the file: top level, a matrix, its ``include``), as classifier lines; a file that does not
    parse says nothing. Scalars are read as strings (YAML's 3.10 is the float 3.1)."""
    import yaml

    versions: set[str] = set()

    def walk(node: object, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, str(k))
        elif isinstance(node, list):
            for item in node:
                walk(item, key)
        elif key in _CI_KEYS and isinstance(node, str) and (m := _CI_VERSION.fullmatch(node.strip())):
            versions.add(m.group(1))

    for name in sorted(f for f in files if CI_FILES.fullmatch(f)):
        with contextlib.suppress(yaml.YAMLError):
            walk(yaml.load(read(name) or "", Loader=yaml.BaseLoader))
    return "\n".join(f"Programming Language :: Python :: {v}" for v in sorted(versions))


def _read_by_setup_py(text: str, files: list[str]) -> list[str]:
    """Requirement files setup.py reads (Conan's ``get_requires("conans/requirements.txt")``), that exist."""
    found = re.findall(r"['\"]([\w./-]*requirements[\w.-]*\.txt)['\"]", text)
    return [f for f in dict.fromkeys(found) if f in files]


def _with_siblings(named: list[str], files: list[str]) -> list[str]:
    """``named`` requirement files and the ``*requirements*.txt`` beside them (Conan's tox and setup.py name
    conans/requirements_dev.txt; its tests import the server's, in conans/requirements_server.txt beside it,
    which its CI installs too), but files of documentation or minimum versions; in that order."""
    folders = {f.rpartition("/")[0] for f in named}
    siblings = sorted(
        f
        for f in files
        if f.rpartition("/")[0] in folders
        and re.fullmatch(r"[^/]*requirements[^/]*\.txt", f.rpartition("/")[2])
        and not _MINIMA.search(f)
        and "doc" not in f.rpartition("/")[2]
    )
    return [*named, *(f for f in siblings if f not in named)]


def by_date(as_of: str) -> tuple[str, ...]:
    """:data:`PYTHONS` in the order to prefer for a commit of date ``as_of``: those released by then, newest
    first (the Python its authors ran), then later ones, oldest first (the least change)."""
    if not as_of:
        return PYTHONS
    released = [v for v in PYTHONS if PYTHON_RELEASED.get(v, "") <= as_of]
    return (*released, *reversed([v for v in PYTHONS if v not in released]))


class _Tox(BaseModel):
    deps: list[str] = Field(default_factory=list)
    requirement_files: list[str] = Field(default_factory=list)
    envlist: str = Field(default="", description="Its envlist as classifier lines, for the interpreter.")


def _tox(text: str | None, files: list[str]) -> _Tox:
    """tox.ini's ``[testenv]`` deps (plain requirements, and ``-r`` files that exist; factor-conditional and
    substituted ones left out) and its envlist's Python versions."""
    cfg = _setup_cfg(text or "")
    out = _Tox()
    raw = cfg.get("testenv", "deps", fallback="")
    for line in (x.split("#")[0].strip() for x in raw.splitlines()):
        if line.startswith("-r"):
            name = line[2:].strip().removeprefix("{toxinidir}/")
            if name in files and "{" not in name:
                out.requirement_files.append(name)
        elif line and "{" not in line and not line.startswith(("-", ".")) and not _FACTOR.match(line):
            out.deps.append(line)
    envlist = cfg.get("tox", "envlist", fallback="")
    versions = {f"{m[0]}.{m[1:]}" for m in re.findall(r"py(3\d+)", envlist)}
    versions |= {
        f"3.{m}" for group in re.findall(r"py\{([^}]*)\}", envlist) for m in re.findall(r"\b3(\d+)\b", group)
    }
    out.envlist = "\n".join(f"Programming Language :: Python :: {v}" for v in sorted(versions))
    return out


def _setup_cfg(text: str) -> configparser.ConfigParser:
    cfg = configparser.ConfigParser(interpolation=None)
    # an unreadable setup.cfg says nothing here; pip fails on it, and the env build says so
    with contextlib.suppress(configparser.Error):
        cfg.read_string(text)
    return cfg


def _python(
    pyproject: dict[str, Any],
    cfg: configparser.ConfigParser,
    texts: dict[str, str | None],
    pythons: tuple[str, ...],
) -> tuple[str, str]:
    """(version, why): the first host Python in ``pythons``' order that the metadata allows; ('', reason)
    when none. Versions listed (classifiers, tox's envlist) narrow the choice where any of them qualifies."""
    spec_text = str(pyproject.get("project", {}).get("requires-python") or "")
    where = "requires-python"
    if not spec_text and cfg.has_option("options", "python_requires"):
        spec_text, where = cfg.get("options", "python_requires"), "python_requires (setup.cfg)"
    if not spec_text and (m := _PY_REQUIRES.search(texts.get("setup.py") or "")):
        spec_text, where = m.group(1), "python_requires (setup.py)"
    try:
        allowed = SpecifierSet(spec_text.strip())
    except InvalidSpecifier:
        return "", f"{where} {spec_text!r} is not a version specifier"
    listed = sorted({m for text in texts.values() for m in _CLASSIFIER.findall(text or "")})
    label = "versions its CI runs" if texts.get("CI") else "listed versions"
    versions = [v for v in pythons if allowed.contains(f"{v}.0", prereleases=True)]
    if listed:
        versions = [v for v in versions if v in listed] or versions
    for version in versions:
        if not host_has(version):
            continue
        said = [f"{where} {spec_text}"] if spec_text else []
        said += [f"{label} {', '.join(listed)}"] if listed else []
        return version, f"{version}: the first on this host (by the commit's date) that " + (
            " and ".join(said) + " allow" if said else "is found (no constraint declared)"
        )
    return "", f"no Python on this host satisfies {spec_text or 'the metadata'}" + (
        f" ({label} {', '.join(listed)})" if listed else ""
    )


@functools.cache
def host_has(version: str) -> bool:
    """Whether this host has Python ``version`` (found without downloading; remembered per process)."""
    try:
        find_python(version)
    except ConfigError:
        return False
    return True


def _test_extra(pyproject: dict[str, Any], cfg: configparser.ConfigParser, setup_py: str) -> str:
    declared: set[str] = set(pyproject.get("project", {}).get("optional-dependencies", {}) or {})
    if cfg.has_section("options.extras_require"):
        declared |= set(cfg.options("options.extras_require"))
    declared |= set(_SETUP_PY_EXTRA.findall(setup_py))
    return next((name for name in TEST_EXTRAS if name in declared), "")
