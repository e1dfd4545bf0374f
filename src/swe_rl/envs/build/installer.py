"""Running a recipe's installs in a venv: uv (pip as fallback), a date to resolve as of, constraints, locks.

Install commands are shell (a spec's ``python -m pip install -e .``, a record's own setup). They run
in bash with two functions in front, ``pip`` and ``python``, that send ``pip install`` and
``python -m pip install`` to the chosen installer with the recipe's options, so a date and the
constraints apply to every install, whoever wrote the command. After the build the resolved set is
written as a lock (``pip freeze`` format); a rebuild of the same recipe installs under that lock. When a
dated install fails, :mod:`swe_rl.envs.build.remedies` chooses what to take from today's index; it is retried.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from pathlib import Path

from swe_rl.envs.build.build_settings import project_name, remove_local_freetype, repo_build_settings
from swe_rl.envs.build.dating import (
    BUILD_TOOLS_AS_OF,
    DATED_BUILD_TOOLS_FLOOR,
    Resolver,
    Widening,
    norm,
    widenings_in,
)
from swe_rl.envs.build.import_check import ImportFailure, failed_imports, releases_to_take
from swe_rl.envs.build.install_tools import (
    PROBE_FAILED,
    SHIMS,
    choose_installer,
    freeze,
    install_environ,
    run_bounded,
)
from swe_rl.envs.build.pins import DATED_BUILD_TOOLS, FALLBACK, LOCK_NAME, READ_AT_BASE, SKIPPED, pinned
from swe_rl.envs.build.pip_fallback import missing_requirements, pip_command, requested_extras
from swe_rl.envs.build.pip_tool import PIP, pip_tool
from swe_rl.envs.build.recipe import EnvRecipe, Installer
from swe_rl.envs.build.remedies import (
    after_build,
    dated_options,
    held_to_first_wheel,
    probe_remedy,
    replace_pins,
    runner_floor,
    to_widen,
    tools_apart,
)
from swe_rl.envs.build.requirement_files import RecipeFiles, install_best_effort
from swe_rl.envs.build.uv_output import (
    BUILD_FAILED,
    LOCAL_BUILD_FAILED,
    NO_PEP660,
    PIP_ONLY_OPTION,
    missing_library,
)
from swe_rl.errors import EnvBuildError
from swe_rl.tasks.specs import check_system

SYSTEM_HINT = "; or as root: swe-rl env build --install-system-deps"


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
        repo_cache: Path | None = None,
    ) -> None:
        self.recipe, self.venv, self.testbed, self.log = recipe, venv, testbed, log
        self.kind, self.uv = choose_installer(installer, recipe)
        self.cache, self.repo_cache = cache, repo_cache  # repo_cache: mirrors of what a build would download
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
        self.read_at_base: list[str] = []  # repo files read at the base commit, not the recipe's (why)
        self.lock: list[str] = []  # the resolved set of the last build, with the widening and fallback notes
        self.pytest_floor = False  # pytest held to PYTEST_RA_FLOOR, resolved as of PYTEST_RA_AS_OF
        # a dated uv install is first resolved with wheels only (dry run) for the command running: a dependency
        # it would build from source is resolved as of its first release with a wheel for this Python instead
        self.probing = False
        self.probe_said = ""  # what the probe said when it stopped the last run
        self.from_source: set[str] = set()  # dependencies the probe lets build from their sdists
        self._pip_tool: Path | None = None  # the pip tool's directory (envs/build/pip_tool.py), once found
        self._taking_missing = False  # installing what pip was told not to (envs/build/pip_fallback.py)
        self.build_environ: dict[str, str] = {}  # what the repo's build reads (build_settings.py)
        self.settings_notes: list[str] = []  # the lock's lines on it (the version given to the build)
        self.import_failures: list[ImportFailure] = []  # after the build (swe_rl.envs.build.import_check)

    def install_command(self, *, probe: bool = False) -> str:
        """The installer with the build's options; with ``probe``, uv's dry run that builds nothing but the repo
        itself (editable) and the dependencies in :attr:`from_source`."""
        opts: list[str] = []
        if self.constraints.is_file():
            opts += ["-c", str(self.constraints)]
        if self.kind == "uv":
            assert self.uv is not None
            head = [self.uv, "pip", "install", "--python", str(self.venv / "bin" / "python")]
            if probe:
                head += ["--dry-run", "--only-binary", ":all:"]
                for name in sorted(self.from_source):
                    head += ["--no-binary", name]
            if (self.testbed / "setup.py").is_file() and not (self.testbed / "pyproject.toml").is_file():
                # pip installs a project without pyproject.toml with `setup.py develop`: the repo's root on
                # sys.path (tools like pylint map files to modules by it). uv always builds PEP 660 editables;
                # setuptools' compat mode gives the same path entry.
                opts += ["-C", "editable_mode=compat"]
            if self.recipe.exclude_newer:
                opts += dated_options(self.recipe, self.widened, self.build_tools_as_of(), self.pytest_floor)
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
        return {**install_environ(self.testbed, self.venv, self.cache), **self.build_environ}

    def run(self, command: str) -> None:
        """Run ``command`` in the testbed with the venv first on PATH and the install shims defined.

        A failure is retried while :meth:`_remedied` changes the resolution. When uv still cannot build the repo
        itself (a build backend without PEP 660, e.g. astroid's ``setuptools~=62.6``, or any other build error of
        the local project), pip runs the command, as the official images' pip did."""
        dated_before = self.dated_build_tools
        self._tried_dated = self.dated_build_tools  # the task date's build tools, tried for this command
        self._failed_with_2024 = ""  # what 2024's build tools gave before those were tried
        self._reverted = False
        self.probing = self.kind == "uv" and bool(self.recipe.exclude_newer)
        code, output = self._run(command, self.install_command())
        said = output
        # (a probe that stopped a command exits 86, though a subshell or `|| true` around it may hide that)
        while (code != 0 or self.probe_said) and self.kind == "uv" and self._remedied(output, command):
            # each remedy applies once (per package, or once for the build tools), so this ends
            code, output = self._run(command, self.install_command())
            said += output
        no_pep660, no_deps = NO_PEP660.search(output) is not None, False
        pip_only = PIP_ONLY_OPTION.search(output)
        if code != 0 and self.kind == "uv" and (no_pep660 or pip_only or LOCAL_BUILD_FAILED.search(output)):
            # the repo itself, as the official harness's pip built it (uv's build envs follow the date, where
            # setuptools-scm 6 met a setuptools without pkg_resources); its dependencies stay dated (_take_missing)
            self.dated_build_tools = dated_before  # the retry with the task date's did not help
            why = "the build backend has no build_editable" if no_pep660 else "a build failed"
            why = f"uv has no {pip_only[1]}" if pip_only else why
            self._note(f"swe-rl: uv cannot build `{command}` ({why}); pip runs it")
            self.fallbacks.append(command)
            self.probing = False
            no_deps = "--no-deps" in (pip := self._pip_command())
            code, output = self._run(command, pip)
        if code != 0:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise EnvBuildError(
                f"install command exited {code} (log {self.log}):\n{tail}{missing_library(said)}"
            )
        if self.dated_build_tools:
            self.dated_commands.append(command)
        self.dated_build_tools = False
        if no_deps:
            self._take_missing(command)

    def _remedied(self, output: str, command: str) -> bool:
        """Change the resolution for what a failed uv install says, if anything: True when retrying may help.

        In order: a dependency uv says no release old enough satisfies, or whose dated sdist lacks a C library's
        header, is taken from today's index; a failed build is retried once with the task date's build tools;
        a dependency whose dated release still does not build here (no wheel for this Python, a download in its
        setup.py) is resolved as of its first release with a wheel for this Python
        (:func:`~swe_rl.envs.build.remedies.held_to_first_wheel`), as the official images, resolved in 2024, got one
        that installs.
        When the task date's build tools cannot make the repo's own editable install, 2024's come back, and the
        dependency whose build had failed with them is widened instead.
        Each applies once (per package, or once for the build tools), so retrying ends.
        Before all of them, when the wheels-only probe stopped the command: :meth:`_to_wheel`.
        """
        if self.probe_said:
            return self._to_wheel(self.probe_said, command)
        if (
            self.dated_build_tools
            and not self._reverted
            and self._failed_with_2024
            and NO_PEP660.search(output)
        ):
            # the task date's build tools cannot make the repo's editable install (setuptools < 64): back to
            # 2024's, with the dependency whose build failed under those taken from today's index (pvlib 0.6's
            # netcdf4 1.5.4: no wheel for Python 3.9, an sdist that needs HDF5's headers)
            self._reverted = True
            self.dated_build_tools = False
            found = to_widen(self.recipe, self.widened, self._failed_with_2024, command, dependencies=True)
            if found is not None:
                found = held_to_first_wheel(found, self._resolver(), self.recipe.exclude_newer)
                self.widened.append(found)
            self._note(
                f"swe-rl: the task date's build tools cannot build `{command}` editable; 2024's again"
                + (f", with {found.package} widened: {found.detail()}" if found is not None else "")
            )
            return True
        tools_too_new = self._build_tools_too_new(output)
        found = to_widen(self.recipe, self.widened, output, command, dependencies=not tools_too_new)
        if found is not None:
            found = held_to_first_wheel(found, self._resolver(), self.recipe.exclude_newer)
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

    def _to_wheel(self, said: str, command: str) -> bool:
        """The probe stopped the command: apply :func:`~swe_rl.envs.build.remedies.probe_remedy`'s choice, or when
        there is none, run the command without the probe. Always True: retry."""
        resolver = self._resolver()
        assert resolver is not None  # the probe runs only for dated uv builds
        remedy = probe_remedy(said, command, self.recipe, resolver, self.widened, self.from_source)
        if remedy is None:
            self.probing = False
            self._note(f"swe-rl: the wheels-only probe does not resolve `{command}`; it runs without")
            return True
        if remedy.take_back is not None:
            self.widened.remove(remedy.take_back)  # taken back
        if isinstance(remedy.found, str):
            self.from_source.add(remedy.name)
            self._note(f"swe-rl: {remedy.name} builds from its sdist ({remedy.found})")
        else:
            self.widened.append(remedy.found)
            self._note(f"swe-rl: widened {remedy.name}: {remedy.found.detail()}")
        return True

    def _resolver(self) -> Resolver | None:
        if self.kind != "uv" or not self.recipe.exclude_newer or self.uv is None:
            return None
        return Resolver(self.uv, self.venv / "bin" / "python", self.recipe.exclude_newer, self.environ())

    def _run(self, command: str, install: str) -> tuple[int, str]:
        """Run ``command`` with ``install`` as its installer (and the probe before it while :attr:`probing`):
        the exit code and the output; what the probe said when it stopped the command in :attr:`probe_said`."""
        command = replace_pins(command, self.widened)  # a pin without a wheel for this Python, as replaced
        environ = self.environ()
        environ["SWE_RL_INSTALL"] = install
        probe_log = None
        if self.probing:
            handle, probe_log = tempfile.mkstemp(prefix="swe-rl-probe-", suffix=".log")
            os.close(handle)
            environ.update(SWE_RL_PROBE=self.install_command(probe=True), SWE_RL_PROBE_LOG=probe_log)
        self.probe_said = ""
        with self.log.open("ab") as out:
            out.write(f"\n$ {command}\n".encode())
            out.flush()
            start = out.tell()
            code = run_bounded(["bash", "-c", SHIMS + command], self.testbed, environ, out, self.venv.name)
        if probe_log is not None:
            said = Path(probe_log).read_text(errors="replace")
            os.unlink(probe_log)
            if PROBE_FAILED in said:
                self.probe_said = said
                self._note(f"swe-rl: stopped before installing; uv resolving with wheels only says:\n{said}")
        with self.log.open("rb") as log:
            log.seek(start)
            return code, log.read().decode(errors="replace")

    def _runner_floor(self) -> list[str]:
        """:func:`~swe_rl.envs.build.remedies.runner_floor`, logged."""
        floor, said = runner_floor(self.recipe, own=norm(project_name(self.testbed)) == "pytest")
        self.pytest_floor = bool(floor)
        if said:
            self._note(said)
        return floor

    def _build_tools_too_new(self, output: str) -> bool:
        return (
            self.kind == "uv"
            and not self._tried_dated
            and BUILD_TOOLS_AS_OF > self.recipe.exclude_newer > ""
            and BUILD_FAILED.search(output) is not None
            and not NO_PEP660.search(output)
        )

    def _pip_command(self) -> str:
        """pip from the pip tool (envs/build/pip_tool.py), held to the venv; dated: ``--no-deps`` (envs/build/pip_fallback.py)."""
        python = self.venv / "bin" / "python"
        tool = self._pip_tool = self._pip_tool or pip_tool(self.cache.parent, python, self.uv, self.environ())
        held, own = self.venv / "swe-rl-pip-constraints.txt", project_name(self.testbed)
        dated = bool(self.recipe.exclude_newer) and not self._taking_missing
        return pip_command(python, tool, held, self.freeze(), own, self.constraints, no_deps=dated)

    def _take_missing(self, command: str) -> None:
        """What pip left out of ``command`` (``--no-deps``), as of the date; if unreadable, pip's own, as before."""
        extras, python = requested_extras(command), self.venv / "bin" / "python"
        missing = missing_requirements(python, self._pip_tool, self.testbed, extras, self.environ())
        self._note(f"swe-rl: the requirements pip left out of `{command}` (None: unreadable): {missing}")
        self._taking_missing = True  # pip's fallback, where uv cannot, takes dependencies itself
        if missing is None and self._run(command, self._pip_command())[0] != 0:
            raise EnvBuildError(f"install command exited non-zero (log {self.log})")
        if missing:
            self.run("python -m pip install " + " ".join(shlex.quote(r) for r in missing))
        self._taking_missing = False

    def _note(self, line: str) -> None:
        with self.log.open("a") as out:
            out.write(line + "\n")

    def widening(self, lock: list[str]) -> list[Widening]:
        """What a dated build is made again with (:func:`~swe_rl.envs.build.remedies.after_build`)."""
        if (resolver := self._resolver()) is None:
            return []
        base = self.venv / LOCK_NAME  # a clone's, until its own is written: what its version's venv holds
        return after_build(self.recipe, self.widened, self.import_failures, lock, resolver, self._note, base)

    def build(self, lock: list[str] | None) -> list[str]:
        """Install the recipe; with ``lock`` (a previous build's resolved set), under it. Returns the new lock."""
        recipe = self.recipe
        check_system(recipe.system, f"this env ({recipe.source})", hint=SYSTEM_HINT)
        self.build_environ, self.settings_notes, said = repo_build_settings(
            self.testbed,
            self.venv,
            recipe.version,
            repo_cache=self.repo_cache,
            own_install=bool(recipe.install),
        )
        for line in said:
            self._note(line)
        known = {w.package for w in self.widened}
        self.widened += [w for w in widenings_in(lock or [], "the lock") if w.package not in known]
        lines = [*recipe.constraints, *(pinned(lock) if lock else []), *self._runner_floor()]
        if lines:
            self.constraints.write_text("".join(f"{line}\n" for line in lines))
        if self.kind == "pip":
            # an old interpreter's bundled pip may not read today's wheels (Python 3.6's pip 18)
            self.run(f"python -m pip install -q --upgrade '{PIP}'")
        # the repo's requirements, then the spec's packages, which win where both pin (as the official
        # env scripts install requirement files before pip_packages)
        files = RecipeFiles(recipe, self.testbed, self.source)
        requirements = files.requirements()
        if requirements:
            self.run("python -m pip install " + " ".join(shlex.quote(p) for p in requirements))
        self.skipped += install_best_effort(files.conda_packages(), self.run, self._note)
        self.read_at_base = [f"{name} ({why})" for name, why in files.read_at_base.items()]
        for note in self.read_at_base:
            self._note(f"swe-rl: read at the base commit: {note}")
        if recipe.pip:
            self.run("python -m pip install " + " ".join(shlex.quote(p) for p in recipe.pip))
        for command in recipe.pre_install:
            self.run(command)
        self._take_releases()
        if recipe.install:
            self.run(recipe.install)
            remove_local_freetype(self.testbed)
            if (tools := tools_apart(self.freeze())) is not None:
                self._note(
                    f"swe-rl: setuptools_scm >= 8 beside setuptools < 61: {tools}, of the build tools' date"
                )
                self.run(f"python -m pip install {shlex.quote(tools)}")
        self.import_failures = failed_imports(
            self.venv / "bin" / "python", self.testbed, self.environ(), self._note
        )
        notes = [w.lock_line() for w in self.widened] + self.settings_notes
        notes += [failure.lock_line() for failure in self.import_failures]
        notes += [f"{FALLBACK}{command}" for command in self.fallbacks]
        notes += [f"{READ_AT_BASE}{note}" for note in self.read_at_base]
        notes += [f"{SKIPPED}{package}" for package in self.skipped]
        notes += [f"{DATED_BUILD_TOOLS}{command}" for command in self.dated_commands]
        self.lock = [*self.freeze(), *notes]
        return self.lock

    def _take_releases(self) -> None:  # the releases widenings name, where the venv (a clone) has others
        for requirement in releases_to_take(self.widened, self.freeze):
            self.run(f"python -m pip install {shlex.quote(requirement)}")

    def freeze(self) -> list[str]:
        return freeze(self.kind, self.uv, self.venv)
