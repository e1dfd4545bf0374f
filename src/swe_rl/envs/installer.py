"""Running a recipe's installs in a venv: uv (pip as fallback), a date to resolve as of, constraints, locks.

Install commands are shell (a spec's ``python -m pip install -e .``, a record's own setup). They run
in bash with two functions in front, ``pip`` and ``python``, that send ``pip install`` and
``python -m pip install`` to the chosen installer with the recipe's options, so a date and the
constraints apply to every install, whoever wrote the command. After the build the resolved set is
written as a lock (``pip freeze`` format); a rebuild of the same recipe installs under that lock.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from swe_rl.envs.dating import WIDENED, Resolver, Widening, unreachable, widened_in
from swe_rl.envs.recipe import EnvRecipe, Installer
from swe_rl.errors import ConfigError, EnvBuildError
from swe_rl.sandbox.shell import base_environment
from swe_rl.tasks.specs import check_system, conda_env_packages

LOCK_NAME = "swe-rl-lock.txt"
# Requirements that no longer install, and what replaces them (types-pkg_resources was yanked from PyPI;
# the SWE-bench harness makes the same substitution).
REPLACED_REQUIREMENTS = {"types-pkg_resources": "types-setuptools", "types-pkg-resources": "types-setuptools"}

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
SKIPPED = (
    "# swe-rl: skipped conda package: "  # a lock line: a conda environment's package pip could not install
)
# a lock line per install command that built only with the build tools of the task's date
DATED_BUILD_TOOLS = "# swe-rl: build tools as of the task's date (a build failed with 2024's): "
FALLBACK = "# swe-rl: pip fallback: "  # a lock line: an install command that uv could not build and pip ran
# uv's failure on a build backend without PEP 660 editable support (setuptools < 64)
_FILTERED = re.compile(r"`([A-Za-z0-9._-]+)` was filtered by `exclude-newer(?:-package)?`")
# uv's hint when a dependency's sdist fails to compile for want of a C library's header
_NO_LIBRARY = re.compile(r"need to install a library that provides `([^`]+)` for `([A-Za-z0-9._-]+)@([^`]+)`")
# Debian packages of the headers that SWE-bench's dependencies' sdists are known to compile against
HEADER_PACKAGES = {
    "libmemcached/memcached.h": "libmemcached-dev",
    "ffi.h": "libffi-dev",
    "libxml/xmlversion.h": "libxml2-dev",
    "libxslt/xsltconfig.h": "libxslt1-dev",
    "jpeglib.h": "libjpeg-dev",
    "zlib.h": "zlib1g-dev",
    "ft2build.h": "libfreetype-dev",
    "png.h": "libpng-dev",
    "openssl/ssl.h": "libssl-dev",
    "pg_config.h": "libpq-dev",
    "mysql.h": "default-libmysqlclient-dev",
    "tiffio.h": "libtiff-dev",
}
# uv's words for a failed build (of a dependency, or of the project itself), and for one of a local project
_BUILD_FAILED = re.compile(r"Failed to build|The build backend returned an error")
_DEPENDENCY_FAILED = re.compile(r"Failed to build `([A-Za-z0-9._-]+)==([^`]+)`")
_LOCAL_BUILD_FAILED = re.compile(
    r"Failed to build `[^`]+ @ file://|^error: The build backend returned an error", re.M
)
# (not any failed call of the hook: `setuptools.build_meta.build_editable` failed is an ordinary build error)
_NO_PEP660 = re.compile(
    r"has no attribute 'build_editable'|does not support editable|Editable installs? .*not supported"
)

_PASS_VARS = {
    "PIP_CERT",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_NO_INDEX",
    "PIP_TRUSTED_HOST",
    "PIP_DEFAULT_TIMEOUT",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
}

_SHIMS = r"""
swe_rl_install() { eval "$SWE_RL_INSTALL" '"$@"'; }
pip() { if [ "${1:-}" = install ]; then shift; swe_rl_install "$@"; else command pip "$@"; fi; }
pip3() { pip "$@"; }
python() {
  if [ "${1:-}" = -m ] && [ "${2:-}" = pip ] && [ "${3:-}" = install ]; then shift 3; swe_rl_install "$@";
  else command python "$@"; fi
}
export -f swe_rl_install pip pip3 python
"""


def uv_binary() -> str | None:
    """uv from the ``uv`` wheel installed with swe-rl, else one on PATH."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def choose_installer(wanted: Installer, recipe: EnvRecipe) -> tuple[Installer, str | None]:
    """(installer, uv path); uv falls back to pip, which cannot resolve as of a date."""
    uv = uv_binary() if wanted == "uv" else None
    if uv is not None:
        return "uv", uv
    if recipe.exclude_newer:
        raise ConfigError(
            "resolving packages as of the task's date needs uv (`pip install uv`); "
            "or build with --latest (today's releases)"
        )
    return "pip", None


UV_LOCK_TIMEOUT_S = "7200"  # the host's UV_LOCK_TIMEOUT, when set, wins


class InstallRun:
    """Runs install commands for one venv build; everything goes to one log file."""

    def __init__(
        self,
        recipe: EnvRecipe,
        venv: Path,
        testbed: Path,
        log: Path,
        *,
        installer: Installer,
        cache: Path,
        widen: tuple[Widening, ...] = (),
        source: str | None = None,
    ) -> None:
        self.recipe, self.venv, self.testbed, self.log = recipe, venv, testbed, log
        self.kind, self.uv = choose_installer(installer, recipe)
        self.cache = cache
        self.constraints = venv / "swe-rl-constraints.txt"
        self.widened: list[Widening] = list(widen)
        self.fallbacks: list[str] = []  # install commands that uv could not build and pip ran
        self.source = source  # the repo's git source: requirement files are read from it
        # build tools as of the task's date for the command running (after a build failed with 2024's); the
        # next command starts again from 2024's: the repo's own editable install needs setuptools >= 64
        self.dated_build_tools = False
        self.dated_commands: list[str] = []  # the commands that built only with them
        self._tried_dated, self._reverted, self._failed_with_2024 = False, False, ""  # per command (run)
        self.skipped: list[str] = []  # conda packages pip could not install
        self.lock: list[str] = []  # the resolved set of the last build, with the widening and fallback notes
        self.pytest_floor = False  # pytest held to PYTEST_RA_FLOOR, resolved as of PYTEST_RA_AS_OF

    def install_command(self) -> str:
        opts: list[str] = []
        if self.constraints.is_file():
            opts += ["-c", str(self.constraints)]
        if self.kind == "uv":
            assert self.uv is not None
            head = [self.uv, "pip", "install", "--python", str(self.venv / "bin" / "python")]
            if self._setup_py_only():
                # pip installs a project without pyproject.toml with `setup.py develop`: the repo's root on
                # sys.path (tools like pylint map files to modules by it). uv always builds PEP 660 editables;
                # setuptools' compat mode gives the same path entry.
                opts += ["-C", "editable_mode=compat"]
            if self.recipe.exclude_newer:
                opts += ["--exclude-newer", self.recipe.exclude_newer]
                tools_as_of = self.build_tools_as_of()
                if tools_as_of > self.recipe.exclude_newer:
                    for tool in BUILD_TOOLS:
                        opts += ["--exclude-newer-package", f"{tool}={tools_as_of}"]
                # a spec's exact pins name versions on purpose, sometimes newer than the task
                undated = [*undated_packages(self.recipe), *(w.package for w in self.widened)]
                if self.pytest_floor and "pytest" not in undated:
                    opts += ["--exclude-newer-package", f"pytest={PYTEST_RA_AS_OF}"]
                for name in undated:
                    opts += ["--exclude-newer-package", f"{name}={UNDATED}"]
        else:
            head = [str(self.venv / "bin" / "python"), "-m", "pip", "install"]
        return " ".join(shlex.quote(p) for p in [*head, *opts])

    def build_tools_as_of(self) -> str:
        """The date setuptools and wheel are resolved as of: 2024's, or after a build failed with those, the
        task's own date held to the PEP 517 default build requirement's first release."""
        if self.dated_build_tools:
            return max(self.recipe.exclude_newer, DATED_BUILD_TOOLS_FLOOR)
        return max(self.recipe.exclude_newer, BUILD_TOOLS_AS_OF)

    def environ(self) -> dict[str, str]:
        """The environment of install commands: the venv first on PATH, the host's network settings."""
        from swe_rl.sandbox.base import EnvSpec

        spec = EnvSpec(key="build", repo="", base_commit="", testbed=self.testbed, venv=self.venv)
        environ = base_environment(spec, home=str(self.venv.parent), tmpdir=str(self.venv.parent))
        environ["PIP_CONFIG_FILE"] = (
            "/dev/null"  # a host pip config can send old Pythons into long backtracking
        )
        environ["UV_CACHE_DIR"] = str(self.cache)
        # builds in parallel share the cache: one waits while another compiles the same sdist (pandas 1.1.2
        # for Python 3.9 takes over 20 minutes on 2 cores), longer than uv's default of 300 s
        environ["UV_LOCK_TIMEOUT"] = UV_LOCK_TIMEOUT_S
        # the testbed may belong to the ns sandboxes' uid already: git (setuptools-scm, versioneer) must
        # still answer here, where root runs the install
        environ.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="safe.directory", GIT_CONFIG_VALUE_0="*")
        # the host's network settings (proxy, CA bundle, index) are needed to reach an index at all
        environ.update({k: v for k, v in os.environ.items() if k in _PASS_VARS or k.startswith("UV_")})
        return environ

    def run(self, command: str) -> None:
        """Run ``command`` in the testbed with the venv first on PATH and the install shims defined.

        A failure is retried while :meth:`_remedied` changes the resolution. When uv still cannot build the repo
        itself (a build backend without PEP 660, e.g. astroid's ``setuptools~=62.6``, or any other build error of
        the local project), pip runs the command, as the official images' pip did.
        """
        dated_before = self.dated_build_tools
        self._tried_dated = self.dated_build_tools  # the task date's build tools, tried for this command
        self._failed_with_2024 = ""  # what 2024's build tools gave before those were tried
        self._reverted = False
        code, output = self._run(command, self.install_command())
        said = output
        while code != 0 and self.kind == "uv" and self._remedied(output, command):
            # each remedy applies once (per package, or once for the build tools), so this ends
            code, output = self._run(command, self.install_command())
            said += output
        no_pep660 = _NO_PEP660.search(output) is not None
        if code != 0 and self.kind == "uv" and (no_pep660 or _LOCAL_BUILD_FAILED.search(output)):
            # the repo itself: the official harness installed it with pip, whose build isolation takes today's
            # build tools, all of one time (uv's build envs follow the date, where setuptools-scm 6 met a
            # setuptools without pkg_resources). Not for dependencies: pip knows no date, and would bring
            # today's releases beside the dated ones (matplotlib without register_cmap under a 2022 seaborn)
            self.dated_build_tools = dated_before  # the retry with the task date's did not help
            why = "the build backend has no build_editable" if no_pep660 else "a build failed"
            self._note(f"swe-rl: uv cannot build `{command}` ({why}); pip runs it")
            self.fallbacks.append(command)
            code, output = self._run(command, self._pip_command())
        if code != 0:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise EnvBuildError(
                f"install command exited {code} (log {self.log}):\n{tail}{_missing_library(said)}"
            )
        if self.dated_build_tools:
            self.dated_commands.append(command)
        self.dated_build_tools = False

    def _remedied(self, output: str, command: str) -> bool:
        """Change the resolution for what a failed uv install says, if anything: True when retrying may help.

        In order: a dependency uv says no release old enough satisfies, or whose dated sdist lacks a C library's
        header, is taken from today's index; a failed build is retried once with the task date's build tools;
        a dependency whose dated release still does not build here (no wheel for this Python, a download in its
        setup.py) is taken from today's index, as the official images, resolved in 2024, got one that installs.
        When the task date's build tools cannot make the repo's own editable install, 2024's come back, and the
        dependency whose build had failed with them is taken from today's index instead.
        Each applies once (per package, or once for the build tools), so retrying ends.
        """
        if (
            self.dated_build_tools
            and not self._reverted
            and self._failed_with_2024
            and _NO_PEP660.search(output)
        ):
            # the task date's build tools cannot make the repo's editable install (setuptools < 64): back to
            # 2024's, with the dependency whose build failed under those taken from today's index (pvlib 0.6's
            # netcdf4 1.5.4: no wheel for Python 3.9, an sdist that needs HDF5's headers)
            self._reverted = True
            self.dated_build_tools = False
            found = self._to_widen(self._failed_with_2024, command, dependencies=True)
            if found is not None:
                self.widened.append(found)
            self._note(
                f"swe-rl: the task date's build tools cannot build `{command}` editable; 2024's again"
                + (f", with {found.package} widened: {found.detail()}" if found is not None else "")
            )
            return True
        tools_too_new = self._build_tools_too_new(output)
        found = self._to_widen(output, command, dependencies=not tools_too_new)
        if found is not None:
            self.widened.append(found)
            self._note(f"swe-rl: widened {found.package}: {found.detail()}")
            return True
        if tools_too_new:
            # an sdist of the task's time builds only with the setuptools of its time (setuptools.Feature, ...)
            self.dated_build_tools = self._tried_dated = True
            self._failed_with_2024 = output
            self._note(
                f"swe-rl: a build failed with 2024's build tools; `{command}` again with the task date's"
            )
            return True
        return False

    def _to_widen(self, output: str, command: str, *, dependencies: bool) -> Widening | None:
        """The first dependency, not widened or undated yet, that a dated build should take from today's index:
        one uv says the date filtered out, one whose dated sdist lacks a C library's header (pylibmc 1.6.1,
        django 4.x's py3.txt as of 2021, needs libmemcached's; the official images, resolved in 2024, got
        1.6.3's wheel), and with ``dependencies`` one whose dated release uv failed to build at all."""
        if not self.recipe.exclude_newer:
            return None
        candidates = [Widening(package=name, needed_by=f"`{command}`") for name in _FILTERED.findall(output)]
        candidates += [
            Widening(
                package=name,
                needed_by=f"{name}=={version}",
                reason=f"the dated sdist does not build here (no {header})",
            )
            for header, name, version in _NO_LIBRARY.findall(output)
        ]
        if dependencies:
            candidates += [
                Widening(
                    package=name,
                    needed_by=f"{name}=={version}",
                    reason="the dated release does not build here",
                )
                for name, version in _DEPENDENCY_FAILED.findall(output)
            ]
        done = {w.package for w in self.widened} | set(undated_packages(self.recipe))
        return next((w for w in candidates if w.package not in done), None)

    def _run(self, command: str, install: str) -> tuple[int, str]:
        environ = self.environ()
        environ["SWE_RL_INSTALL"] = install
        with self.log.open("ab") as out:
            out.write(f"\n$ {command}\n".encode())
            out.flush()
            start = out.tell()
            proc = subprocess.run(
                ["bash", "-c", _SHIMS + command],
                cwd=self.testbed,
                env=environ,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        with self.log.open("rb") as log:
            log.seek(start)
            return proc.returncode, log.read().decode(errors="replace")

    def _runner_floor(self) -> list[str]:
        """pytest >= 4.6 for a date before it: older pytest lists no passed test under ``-rA``, and SWE-bench's
        log parsers read that list (the official images ran pytest from their own build time, 2023-24).
        Not when the recipe pins pytest itself."""
        if not self.recipe.exclude_newer or self.recipe.exclude_newer >= PYTEST_RA_AS_OF:
            return []
        named = [p for p in [*self.recipe.pip, *self.recipe.constraints] if re.match(r"pytest\s*[=<>!~]", p)]
        if named:
            return []
        self._note(
            f"swe-rl: {PYTEST_RA_FLOOR} as of {PYTEST_RA_AS_OF[:10]} (older pytest lists no passed test under -rA)"
        )
        self.pytest_floor = True
        return [PYTEST_RA_FLOOR]

    def _setup_py_only(self) -> bool:
        return (self.testbed / "setup.py").is_file() and not (self.testbed / "pyproject.toml").is_file()

    def _build_tools_too_new(self, output: str) -> bool:
        return (
            self.kind == "uv"
            and not self._tried_dated
            and BUILD_TOOLS_AS_OF > self.recipe.exclude_newer > ""
            and _BUILD_FAILED.search(output) is not None
            and not _NO_PEP660.search(output)
        )

    def _pip_command(self) -> str:
        """pip in the venv, held to what is installed already (pip cannot resolve as of a date)."""
        held = self.venv / "swe-rl-pip-constraints.txt"
        held.write_text("".join(f"{line}\n" for line in _pinned(self.freeze())))
        python = str(self.venv / "bin" / "python")
        head = [python, "-m", "pip", "install", "--disable-pip-version-check", "-c", str(held)]
        if self.constraints.is_file():
            head += ["-c", str(self.constraints)]
        return " ".join(shlex.quote(p) for p in head)

    def _note(self, line: str) -> None:
        with self.log.open("a") as out:
            out.write(line + "\n")

    def widening(self, lock: list[str]) -> list[Widening]:
        """Dependencies a dated build must take from today's index (:mod:`swe_rl.envs.dating`)."""
        if self.kind != "uv" or not self.recipe.exclude_newer or self.uv is None:
            return []
        resolver = Resolver(self.uv, self.venv / "bin" / "python", self.recipe.exclude_newer, self.environ())
        found = unreachable(
            resolver, lock, set(undated_packages(self.recipe)) | {w.package for w in self.widened}
        )
        for item in found:
            self._note(f"swe-rl: widened {item.package}: {item.lock_line()[len(WIDENED) :]}")
        return found

    def build(self, lock: list[str] | None) -> list[str]:
        """Install the recipe; with ``lock`` (a previous build's resolved set), under it. Returns the new lock."""
        recipe = self.recipe
        check_system(recipe.system, f"this env ({recipe.source})")
        known = {w.package for w in self.widened}
        self.widened += [
            Widening(package=name, needed_by="the lock")
            for name in widened_in(lock or [])
            if name not in known
        ]
        lines = [*recipe.constraints, *(_pinned(lock) if lock else []), *self._runner_floor()]
        if lines:
            self.constraints.write_text("".join(f"{line}\n" for line in lines))
        if self.kind == "pip":
            # an old interpreter's bundled pip may not read today's wheels (Python 3.6's pip 18)
            self.run("python -m pip install -q --upgrade 'pip<25'")
        # the repo's requirements, then the spec's packages, which win where both pin (as the official
        # env scripts install requirement files before pip_packages)
        requirements = self._requirement_files()
        if requirements:
            self.run("python -m pip install " + " ".join(shlex.quote(p) for p in requirements))
        self._install_best_effort(self._conda_packages())
        if recipe.pip:
            self.run("python -m pip install " + " ".join(shlex.quote(p) for p in recipe.pip))
        for command in recipe.pre_install:
            self.run(command)
        if recipe.install:
            self.run(recipe.install)
        notes = [w.lock_line() for w in self.widened]
        notes += [f"{FALLBACK}{command}" for command in self.fallbacks]
        notes += [f"{SKIPPED}{package}" for package in self.skipped]
        notes += [f"{DATED_BUILD_TOOLS}{command}" for command in self.dated_commands]
        self.lock = [*self.freeze(), *notes]
        return self.lock

    def _requirement_files(self) -> list[str]:
        """The lines of the recipe's requirement file (the first of its names that exists)."""
        if not self.recipe.requirements:
            return []
        name = self._first_file(self.recipe.requirements, "requirements file")
        return read_requirements(name, self._read)

    def _conda_packages(self) -> list[str]:
        """The dependencies of the recipe's conda environment file, as pip requirements."""
        if not self.recipe.env_yml:
            return []
        name = self._first_file(self.recipe.env_yml, "conda environment file")
        try:
            return conda_env_packages(self._read(name) or "")
        except ValueError as exc:
            raise EnvBuildError(f"{name}: {exc}") from None

    def _install_best_effort(self, packages: list[str]) -> None:
        """Conda's packages with pip: all at once, else one by one, skipping (and logging) what pip cannot install
        (conda-only names, libraries pip would have to build without their C dependencies)."""
        if not packages:
            return
        try:
            self.run("python -m pip install " + " ".join(shlex.quote(p) for p in packages))
            return
        except EnvBuildError:
            self._note(
                "swe-rl: the conda environment's packages do not install together with pip; one by one"
            )
        for package in packages:
            try:
                self.run(f"python -m pip install {shlex.quote(package)}")
            except EnvBuildError:
                self.skipped.append(package)
                self._note(f"swe-rl: skipped conda package {package}: pip cannot install it here")

    def _read(self, name: str) -> str | None:
        """A file of the repo at the commit the recipe reads requirements at (swebench reads them at the
        environment setup commit), from the repo's source; else the testbed's copy."""
        if self.source and self.recipe.requirements_at:
            proc = subprocess.run(
                [
                    "git",
                    "-c",
                    "safe.directory=*",
                    "-C",
                    self.source,
                    "show",
                    f"{self.recipe.requirements_at}:{name}",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode == 0:
                return proc.stdout
        path = self.testbed / name
        return path.read_text() if path.is_file() else None

    def _first_file(self, names: list[str], what: str) -> str:
        for name in names:
            if self._read(name) is not None:
                return name
        raise EnvBuildError(
            f"no {what} ({', '.join(names)}) in the repo at {self.recipe.requirements_at[:12]}"
        )

    def freeze(self) -> list[str]:
        if self.kind == "uv":
            assert self.uv is not None
            cmd = [self.uv, "pip", "freeze", "--python", str(self.venv / "bin" / "python")]
        else:
            cmd = [str(self.venv / "bin" / "python"), "-m", "pip", "freeze", "--all"]
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PIP_CONFIG_FILE": "/dev/null"},
        )
        if proc.returncode != 0:
            raise EnvBuildError(
                f"cannot list the installed packages of {self.venv}: {proc.stderr.strip()[-1000:]}"
            )
        return sorted(line.strip() for line in proc.stdout.splitlines() if line.strip())


def read_requirements(name: str, read: Callable[[str], str | None]) -> list[str]:
    """Requirement lines of a file (comments, options and nested files resolved), with replacements."""
    text = read(name)
    if text is None:
        raise EnvBuildError(f"requirements file {name} not found in the repo")
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            out += read_requirements(
                posixpath.normpath(posixpath.join(posixpath.dirname(name), line.split()[1])), read
            )
            continue
        if line.startswith("-"):
            continue  # index options and editable installs: the spec's install covers the repo itself
        name = re.split(r"[<>=!~ ;\[]", line, maxsplit=1)[0]
        out.append(REPLACED_REQUIREMENTS.get(name, line))
    return out


def _missing_library(output: str) -> str:
    """What to install on the host when a build failed for want of a C library's header."""
    lines = []
    for header, name, version in dict.fromkeys(_NO_LIBRARY.findall(output)):
        package = HEADER_PACKAGES.get(header)
        where = f"the Debian package {package}" if package else f"the -dev package that provides {header}"
        lines.append(f"\n{name} {version} compiles against {header}: install {where} on the host")
    return "".join(lines)


def undated_packages(recipe: EnvRecipe) -> list[str]:
    """Packages exempt from the date: the recipe's ``undated`` and every exact ``name==version`` pin."""
    names = list(recipe.undated)
    for requirement in [*recipe.pip, *recipe.constraints]:
        name, sep, version = requirement.partition("==")
        if sep and re.fullmatch(r"[A-Za-z0-9._-]+", name.strip()) and version.strip():
            names.append(name.strip())
    return sorted(set(names))


def _pinned(lock: list[str]) -> list[str]:
    """The lock's ``name==version`` lines (editable and local installs are rebuilt from the repo)."""
    return [line for line in lock if "==" in line and " @ " not in line and not line.startswith(("-", "#"))]


def lock_difference(expected: list[str], got: list[str]) -> list[str]:
    """Pinned lines that differ between two locks (added with +, missing with -)."""
    a, b = set(_pinned(expected)), set(_pinned(got))
    return sorted([f"-{x}" for x in a - b] + [f"+{x}" for x in b - a])
