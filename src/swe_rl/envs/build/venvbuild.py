"""Building one venv of the environment cache: a version's shared venv from its interpreter, or an
instance's as a clone of it (venv_clones.py) with the repo's own install steps run in it. Each build installs
under its lock when it has one (a rebuild must come out the same), widens what a dated resolution cannot
hold (dating.py) and records what it did in the venv's ``swe-rl-env.json``."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from swe_rl.envs.build.dating import Widening, widenings_in
from swe_rl.envs.build.install_tools import forget_cached
from swe_rl.envs.build.installer import InstallRun
from swe_rl.envs.build.interpreters import provider
from swe_rl.envs.build.pins import LOCK_NAME, lock_difference
from swe_rl.envs.build.recipe import EnvRecipe, InstallOptions
from swe_rl.envs.build.venv import (
    compile_venv,
    create_venv,
    ensure_pip,
    point_editables_at,
    relocate_venv,
    seed_from_host,
)
from swe_rl.envs.store.venv_clones import VENV_FILES, Clone, clone_venv, holds_inode, owners, share_venv_files
from swe_rl.errors import EnvBuildError
from swe_rl.fileio import atomic_write_json, atomic_write_text
from swe_rl.sandbox.base import TESTBED
from swe_rl.sandbox.identity import SANDBOX_UID, own_testbed

_T = TypeVar("_T")


class VenvBuilder:
    """Builds venvs into the cache at ``root`` (its resolved/, logs/ and uv-cache/ directories)."""

    def __init__(self, root: Path, options: InstallOptions, repo_cache: Path | None = None) -> None:
        self.root, self.options, self.repo_cache = root, options, repo_cache

    def build(
        self,
        recipe: EnvRecipe,
        python: Path,
        dest: Path,
        final: Path,
        testbed: Path,
        source: str | None,
        notes: dict[str, str],
        *,
        base: Path | None = None,
    ) -> None:
        """A new venv from ``python`` (the shared one of a version), or with ``base`` an instance's: a clone of
        the shared venv ``base`` (venv_clones.py) with the recipe's own install steps run in it."""
        started = time.monotonic()
        clone, seeded = self._new_venv(python, recipe, dest, base)
        lock_file = self.root / "resolved" / f"{final.name}.txt"
        previous = lock_file.read_text().splitlines() if lock_file.is_file() else None
        run: InstallRun | None = None
        if recipe.installs:
            ensure_pip(dest)
            inherited = _widened_by(base)
            first = run = self._install(
                recipe, dest, testbed, final, previous, source=source, widen=inherited
            )
            lock = run.lock
            if previous is None and (widen := self._guard(run, lambda: first.widening(lock), final)):
                # the dated resolution fell back for lack of releases the index no longer has: build again
                log = (dest / "swe-rl-install.log").read_bytes()
                shutil.rmtree(dest)
                clone, seeded = self._new_venv(python, recipe, dest, base)
                ensure_pip(dest)
                (dest / "swe-rl-install.log").write_bytes(
                    log + b"\nswe-rl: building again with the widening\n"
                )
                both = (*inherited, *widen)
                run = self._install(recipe, dest, testbed, final, previous, source=source, widen=both)
                lock = run.lock
            point_editables_at(dest, testbed, TESTBED)
            if testbed.lstat().st_uid == SANDBOX_UID:  # ns sandboxes own it: so must what this build wrote
                own_testbed(testbed, again=True)
            if previous is not None and (drift := lock_difference(previous, lock)):
                raise EnvBuildError(
                    f"rebuild of {final.name} differs from its lock {lock_file}: {drift[:10]}"
                )
            atomic_write_text(dest / LOCK_NAME, "".join(f"{line}\n" for line in lock))
            if previous is None:
                atomic_write_text(lock_file, "".join(f"{line}\n" for line in lock))
        if clone is not None:
            self._check_clone(clone)
        about = {"python": str(python), "shared_env": base.name if base is not None else None, **notes}
        about["locked_from"] = str(lock_file) if previous is not None else None
        atomic_write_json(dest / "swe-rl-env.json", _description(recipe, about, run, seeded, started))
        compile_venv(dest)
        share_venv_files(self.root / VENV_FILES, dest, linked_too=base is None)
        relocate_venv(dest, final)

    def _new_venv(
        self, python: Path, recipe: EnvRecipe, dest: Path, base: Path | None
    ) -> tuple[Clone | None, list[str]]:
        """An empty venv (seeded as the recipe says), or a clone of ``base``."""
        if base is not None:
            return clone_venv(base, dest), []
        create_venv(python, dest)
        return None, seed_from_host(dest, recipe.seed) if recipe.seed else []

    def _check_clone(self, clone: Clone) -> None:
        """A clone whose install wrote into the shared venv in place: the shared venv, every venv cloned
        from it, every other venv holding a changed file and uv's cached copies of the packages it belongs to
        are removed (built again when next needed), and this build fails."""
        changed = clone.changed()
        if not changed:
            return
        inodes = set(changed.values())
        forget_cached(owners(clone.base, set(changed)), self.root / "uv-cache")
        # the changed inodes are also in other versions' venvs that have the same content (share_venv_files)
        for venv in sorted((self.root / "venvs").glob("*/")):
            if venv.is_symlink():
                continue  # packed (envs/store/packing.py): its image holds copies, which no write reached
            if shared_env_of(venv) == clone.base.name or holds_inode(venv, inodes):
                shutil.rmtree(venv, ignore_errors=True)
        for kept in (self.root / VENV_FILES).glob("*/*"):
            if kept.stat().st_ino in inodes:
                kept.unlink()
        shutil.rmtree(clone.base, ignore_errors=True)
        raise clone.error(changed)

    def _install(
        self,
        recipe: EnvRecipe,
        dest: Path,
        testbed: Path,
        final: Path,
        previous: list[str] | None,
        *,
        source: str | None,
        widen: tuple[Widening, ...] = (),
    ) -> InstallRun:
        """The recipe installed into ``dest`` (its lock in ``run.lock``); a failure keeps the log."""
        run = InstallRun(
            recipe,
            dest,
            testbed,
            dest / "swe-rl-install.log",
            installer=self.options.installer,
            cache=self.root / "uv-cache",
            widen=widen,
            source=source,
            repo_cache=self.repo_cache,
        )
        self._guard(run, lambda: run.build(previous), final)
        return run

    def _guard(self, run: InstallRun, step: Callable[[], _T], final: Path) -> _T:
        try:
            return step()
        except EnvBuildError as exc:
            raise EnvBuildError(_keep_log(exc, run.log, self.root / "logs" / final.name)) from None


def _keep_log(exc: EnvBuildError, log: Path, keep: Path) -> str:
    """The error's message with the install log moved out of the build dir (which is removed)."""
    keep.parent.mkdir(parents=True, exist_ok=True)
    target = keep.with_suffix(".install.log")
    if log.is_file():
        shutil.copyfile(log, target)
    return str(exc).replace(str(log), str(target))


def _widened_by(base: Path | None) -> tuple[Widening, ...]:
    """The packages the shared venv ``base`` took from today's index: its clone's install holds them too."""
    lock = base / LOCK_NAME if base is not None else None
    if lock is None or not lock.is_file():
        return ()
    return tuple(widenings_in(lock.read_text().splitlines(), "the shared env"))


def _description(
    recipe: EnvRecipe, about: dict[str, str | None], run: InstallRun | None, seeded: list[str], started: float
) -> dict[str, object]:
    """What ``swe-rl-env.json`` says of a venv build."""
    return {
        "recipe": recipe.model_dump(),
        "python_provider": provider(Path(str(about["python"]))),
        **about,
        "installer": run.kind if run else None,
        "seeded": seeded,
        "widened": [w.model_dump() for w in run.widened] if run else [],
        "pip_fallbacks": list(run.fallbacks) if run else [],
        "read_at_base_commit": list(run.read_at_base) if run else [],
        "skipped_conda_packages": list(run.skipped) if run else [],
        "build_seconds": round(time.monotonic() - started, 3),
    }


def skipped_conda_packages(venv: Path | None) -> list[str]:
    """The conda packages of the env's recipe that have no PyPI release and were not installed (cdms2 for xarray
    0.12), the venv's own and its shared venv's (where an instance clone's packages come from); none without a
    venv."""
    names: list[str] = []
    if venv is None:
        return names
    for path in (venv, *([venv.parent / shared] if (shared := shared_env_of(venv)) else [])):
        try:
            names += json.loads((path / "swe-rl-env.json").read_text()).get("skipped_conda_packages") or []
        except (OSError, ValueError, AttributeError):
            continue
    return list(dict.fromkeys(names))


def shared_env_of(venv: Path) -> str | None:
    """The key of the shared venv that ``venv`` was cloned from; None for a venv of its own."""
    try:
        shared = json.loads((venv / "swe-rl-env.json").read_text()).get("shared_env")
    except (OSError, ValueError, AttributeError):
        return None
    return shared if isinstance(shared, str) else None
