"""The environment cache: content-addressed testbeds and venvs, built once, shared read-only.

Layout under the cache root (default ``~/.cache/swe-rl/envs``)::

    testbeds/<key>/        repo at base_commit, no later history        (one per repo + commit)
    venvs/<key>/           virtualenv built from an EnvRecipe              (one per recipe)
    records/<key>.json     EnvSpec of an env = testbed + venv
    resolved/<key>.txt     the lock (resolved package set) of a venv build; a rebuild installs under it
    rootfs/<key>/          root filesystem of an env imported from an image (see imports.py)
    images/<digest>.json   image name -> key of the env imported from it
    locks/<key>.lock       flock held while building that key
    uv-cache/              uv's download and build cache (UV_CACHE_DIR in the environment wins)
    .tmp/                  builds in progress; moved into place with rename(2) when complete

A build that crashes leaves only a directory in ``.tmp`` (removed by ``gc``), never a half env.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from swe_rl.envs.dating import Widening
from swe_rl.envs.disk import DiskUsage, disk_usage
from swe_rl.envs.installer import InstallRun
from swe_rl.envs.interpreters import find_python, provider
from swe_rl.envs.lock import LOCK_NAME, lock_difference
from swe_rl.envs.recipe import EnvRecipe, InstallOptions, recipe_for
from swe_rl.envs.repos import find_repo_source
from swe_rl.envs.testbed import make_testbed
from swe_rl.envs.venv import (
    compile_venv,
    create_venv,
    ensure_pip,
    point_editables_at,
    relocate_venv,
    seed_from_host,
)
from swe_rl.errors import EnvBuildError
from swe_rl.fileio import atomic_write_json, atomic_write_text
from swe_rl.paths import cache_dir
from swe_rl.sandbox.base import TESTBED, EnvSpec
from swe_rl.sandbox.identity import SANDBOX_UID, own_testbed
from swe_rl.tasks.images import canonical_image, image_name
from swe_rl.tasks.model import Task

_T = TypeVar("_T")
ENV_PARTS = ("testbeds", "venvs", "rootfs", "records")
"""The directories that hold built envs; the others are download caches, logs and locks."""


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _keep_log(exc: EnvBuildError, log: Path, keep: Path) -> str:
    """The error's message with the install log moved out of the build dir (which is removed)."""
    keep.parent.mkdir(parents=True, exist_ok=True)
    target = keep.with_suffix(".install.log")
    if log.is_file():
        shutil.copyfile(log, target)
    return str(exc).replace(str(log), str(target))


class EnvCache:
    """Builds and finds environments for tasks."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        repo_cache: Path | None = None,
        allow_network: bool = False,
        options: InstallOptions | None = None,
    ) -> None:
        # absolute: installers run in the testbed and read the venv path from their own working directory
        self.root = (root or cache_dir() / "envs").expanduser().absolute()
        self.repo_cache = repo_cache
        self.allow_network = allow_network
        self.options = options or InstallOptions()

    # -- public API -------------------------------------------------------------------------------
    def ensure(self, task: Task) -> EnvSpec:
        """The env of ``task``: one imported from its official image, else built now if not cached yet."""
        imported = self.imported_for(task)
        if imported is not None:
            return imported
        recipe = recipe_for(task, self.options)
        python, prefix = self._interpreter(recipe)
        testbed_key, venv_key, key = self._keys(task, recipe, python)
        built = self.get(key)
        if built is not None and _present(built):
            return built
        # not built, or its testbed or venv was deleted by hand since: build what is missing
        testbed = self._ensure_dir("testbeds", testbed_key, lambda d, _: self._build_testbed(task, d))
        venv = self._ensure_dir(
            "venvs",
            venv_key,
            lambda d, final: self._build_venv(recipe, python, d, final, testbed, self._source(task)),
        )
        spec = EnvSpec(
            key=key,
            repo=task.repo,
            base_commit=task.base_commit,
            testbed=testbed,
            venv=venv,
            python=python,
            python_prefix=prefix,
        )
        atomic_write_json(self.root / "records" / f"{key}.json", json.loads(spec.model_dump_json()))
        return spec

    def get(self, key: str) -> EnvSpec | None:
        """The built env with this key, or None (one file read, not a scan)."""
        if not key.isalnum():
            return None
        record = self.root / "records" / f"{key}.json"
        return EnvSpec.model_validate_json(record.read_text()) if record.is_file() else None

    def key_for(self, task: Task) -> str:
        """The key ``ensure(task)`` gives, without building anything."""
        imported = self.imported_for(task)
        if imported is not None:
            return imported.key
        recipe = recipe_for(task, self.options)
        return self._keys(task, recipe, self._interpreter(recipe)[0])[2]

    def _keys(self, task: Task, recipe: EnvRecipe, python: Path) -> tuple[str, str, str]:
        testbed_key = _digest(task.repo, task.base_commit)
        venv_key = recipe.digest(python)
        return testbed_key, venv_key, _digest(testbed_key, venv_key)

    def imported_for(self, task: Task) -> EnvSpec | None:
        """The env imported from the task's evaluation image (`swe-rl env import-image`), if any."""
        names = [task.image_name] if task.image_name else []
        names += [image_name(task.instance_id), image_name(task.instance_id, "swegym")]
        for name in names:
            key = self.image_key(name)
            if key is not None:
                return self.get(key)
        return None

    def image_key(self, image: str) -> str | None:
        index = self._image_index(image)
        if not index.is_file():
            return None
        return str(json.loads(index.read_text())["key"])

    def index_image(self, image: str, key: str) -> None:
        atomic_write_json(self._image_index(image), {"image": image, "key": key})

    def _image_index(self, image: str) -> Path:
        """Where an image's env key is kept: one file per image, whatever registry prefix names it."""
        return self.root / "images" / f"{_digest(canonical_image(image))}.json"

    def records(self) -> list[EnvSpec]:
        return [
            EnvSpec.model_validate_json(p.read_text()) for p in sorted((self.root / "records").glob("*.json"))
        ]

    def disk_usage(self) -> DiskUsage:
        """Disk the built envs take: testbeds, venvs, rootfs and records (not uv-cache, locks or pythons).

        One measure over all four, so a file hard-linked between a testbed and a venv counts once."""
        return disk_usage({kind: self.root / kind for kind in ENV_PARTS})

    def gc(self, *, keep: set[str] | None = None) -> list[Path]:
        """Remove unfinished builds, and envs not in ``keep`` when it is given. Returns what was removed."""
        removed: list[Path] = []
        tmp = self.root / ".tmp"
        for leftover in sorted(tmp.glob("*")) if tmp.is_dir() else []:
            with self._lock(leftover.name.split(".")[0], blocking=False) as held:
                if held:
                    shutil.rmtree(leftover, ignore_errors=True)
                    removed.append(leftover)
        if keep is None:
            return removed
        used: set[Path] = set()
        for spec in self.records():
            if spec.key in keep:
                used.update(p for p in (spec.testbed, spec.venv, spec.rootfs) if p)
                continue
            (self.root / "records" / f"{spec.key}.json").unlink(missing_ok=True)
            removed.append(self.root / "records" / f"{spec.key}.json")
        for kind in ("testbeds", "venvs", "rootfs"):
            for path in sorted((self.root / kind).glob("*")):
                if path not in used:
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path)
        return removed

    # -- building ---------------------------------------------------------------------------------
    def _interpreter(self, recipe: EnvRecipe) -> tuple[Path, Path]:
        return find_python(recipe.python, fetch=self.options.fetch_python, store=self.root / "pythons")

    def _ensure_dir(self, kind: str, key: str, build: Callable[[Path, Path], None]) -> Path:
        """``final`` built by ``build(tmp, final)`` into a temp dir then renamed, under a lock."""
        final = self.root / kind / key
        if final.is_dir():
            return final
        with self._lock(key):
            if final.is_dir():  # another process built it while we waited
                return final
            (self.root / ".tmp").mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(dir=self.root / ".tmp", prefix=f"{key}."))
            try:
                build(work / "out", final)
                final.parent.mkdir(parents=True, exist_ok=True)
                os.rename(work / "out", final)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        return final

    def _build_testbed(self, task: Task, dest: Path) -> None:
        make_testbed(self._source(task), task.base_commit, dest)

    def _source(self, task: Task) -> str:
        return task.repo_source or find_repo_source(
            task.repo, self.repo_cache, allow_network=self.allow_network
        )

    def _build_venv(
        self, recipe: EnvRecipe, python: Path, dest: Path, final: Path, testbed: Path, source: str | None
    ) -> None:
        started = time.monotonic()
        create_venv(python, dest)
        seeded = seed_from_host(dest, recipe.seed) if recipe.seed else []
        installer = None
        lock_file = self.root / "resolved" / f"{final.name}.txt"
        previous = lock_file.read_text().splitlines() if lock_file.is_file() else None
        run: InstallRun | None = None
        if recipe.installs:
            ensure_pip(dest)
            first = run = self._install(recipe, dest, testbed, final, previous, source=source)
            installer = run.kind
            lock = run.lock
            if previous is None and (widen := self._guard(run, lambda: first.widening(lock), final)):
                # the dated resolution fell back for lack of releases the index no longer has: build again
                log = (dest / "swe-rl-install.log").read_bytes()
                shutil.rmtree(dest)
                create_venv(python, dest)
                seeded = seed_from_host(dest, recipe.seed) if recipe.seed else []
                ensure_pip(dest)
                (dest / "swe-rl-install.log").write_bytes(
                    log + b"\nswe-rl: building again with the widening\n"
                )
                run = self._install(recipe, dest, testbed, final, previous, source=source, widen=tuple(widen))
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
        atomic_write_json(
            dest / "swe-rl-env.json",
            {
                "recipe": recipe.model_dump(),
                "python": str(python),
                "python_provider": provider(python),
                "installer": installer,
                "locked_from": str(lock_file) if previous is not None else None,
                "seeded": seeded,
                "widened": [w.model_dump() for w in run.widened] if run else [],
                "pip_fallbacks": list(run.fallbacks) if run else [],
                "read_at_base_commit": list(run.read_at_base) if run else [],
                "skipped_conda_packages": list(run.skipped) if run else [],
                "build_seconds": round(time.monotonic() - started, 3),
            },
        )
        compile_venv(dest)
        relocate_venv(dest, final)

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
        )
        self._guard(run, lambda: run.build(previous), final)
        return run

    def _guard(self, run: InstallRun, step: Callable[[], _T], final: Path) -> _T:
        try:
            return step()
        except EnvBuildError as exc:
            raise EnvBuildError(_keep_log(exc, run.log, self.root / "logs" / final.name)) from None

    @contextmanager
    def _lock(self, key: str, *, blocking: bool = True) -> Iterator[bool]:
        lock_dir = self.root / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        with open(lock_dir / f"{key}.lock", "w") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _present(spec: EnvSpec) -> bool:
    return spec.testbed.is_dir() and (spec.venv is None or spec.venv.is_dir())
