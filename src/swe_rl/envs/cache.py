"""The environment cache: content-addressed testbeds and venvs, built once, shared read-only.

Layout under the cache root (default ``~/.cache/swe-rl/envs``)::

    testbeds/<key>/        repo at base_commit, no later history        (one per repo + commit)
    gitpacks/<digest>/     a repository's packs, hard-linked into its testbeds (gitpacks.py)
    venvs/<key>/           virtualenvs: a version's shared one (its recipe less the repo's own install,
                           resolved as of its environment setup commit), and per instance a clone of it
                           (hard links, venvbuild.py and venv_clones.py) with the repo installed
    venvfiles/             one copy of each file content the venvs have, linked into them (venv_clones.py)
    records/<key>.json     EnvSpec of an env = testbed + venv
    resolved/<key>.txt     the lock (resolved package set) of a venv build; a rebuild installs under it
    rootfs/<key>/          root filesystem of an env imported from an image (see imports.py)
    images/<digest>.json   image name -> key of the env imported from it
    packed/<id>.sqfs       finished testbeds and venvs packed into a read-only image (`env pack`, packing.py),
                           mounted at packed/<id>/; each packed tree's path is a symbolic link into it
    locks/<key>.lock       flock held while building that key
    uv-cache/              uv's download and build cache (UV_CACHE_DIR in the environment wins)
    .tmp/                  builds in progress; moved into place with rename(2) when complete

A build that crashes leaves only a directory in ``.tmp`` (removed by ``gc``), never a half env; a packed tree's
copy-out (``fileio.thaw_link``) killed mid-way leaves a hidden ``.<name>.thaw-*`` beside its link, and a make of
packs a ``.tmp-*`` in its store (``gc`` removes both).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from swe_rl.envs.build.build_settings import provided_freetype
from swe_rl.envs.build.interpreters import find_python
from swe_rl.envs.build.recipe import EnvRecipe, InstallOptions, recipe_for
from swe_rl.envs.build.repo_sources import find_repo_source
from swe_rl.envs.build.testbed import make_testbed
from swe_rl.envs.build.venvbuild import VenvBuilder, shared_env_of
from swe_rl.envs.store.disk_usage import DiskUsage, disk_usage
from swe_rl.envs.store.gitpacks import PackStore, drop_leftovers, is_shared, share_files
from swe_rl.envs.store.pack_images import PACKED, collect_trash, drop_unused_images, ensure_mounted
from swe_rl.envs.store.packing import PackResult, pack, pack_lock, store_files
from swe_rl.envs.store.slim import slim_build_output
from swe_rl.envs.store.venv_clones import VENV_FILES
from swe_rl.errors import SweRlError
from swe_rl.fileio import atomic_write_json, remove_leftover, thaw_leftovers, thaw_link
from swe_rl.locks import exclusive
from swe_rl.paths import cache_dir
from swe_rl.sandbox.base import EnvSpec
from swe_rl.tasks.image_names import canonical_image, image_name
from swe_rl.tasks.model import Task

_T = TypeVar("_T")
ENV_PARTS = ("testbeds", "venvs", "gitpacks", VENV_FILES, "rootfs", "records", PACKED)
"""The directories that hold built envs; the others are download caches, logs and locks."""


class _Keys(NamedTuple):
    testbed: str  # repo at base_commit
    shared: str  # the version's venv (the recipe without the repo's own install)
    venv: str  # the instance's venv: the shared one, or its clone with the repo installed
    env: str  # testbed + venv


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


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
        self._dates: dict[tuple[str, str], str] = {}
        self._venvs = VenvBuilder(self.root, self.options, repo_cache)

    # -- public API -------------------------------------------------------------------------------
    def ensure(self, task: Task) -> EnvSpec:
        """The env of ``task``: one imported from its official image, else built now if not cached yet."""
        imported = self.imported_for(task)
        if imported is not None:
            return imported
        with pack_lock(self.root, exclusive=False):  # a pack waits for builds, and they for it
            return self._ensure(task)

    def _ensure(self, task: Task) -> EnvSpec:
        recipe, as_of = self._recipe(task)
        python, prefix = self._interpreter(recipe)
        keys = self._keys(task, recipe, python)
        built = self.get(keys.env)
        if built is not None and _present(built):
            return built
        # not built, or its testbed or venv was deleted by hand since: build what is missing
        source = self._source(task)
        packs = PackStore(self.root, source)
        testbed = self._ensure_dir(
            "testbeds", keys.testbed, lambda d, _: make_testbed(source, task.base_commit, d, packs)
        )
        notes = {"as_of_from": as_of}
        shared = self._ensure_dir(
            "venvs",
            keys.shared,
            lambda d, final: self._venvs.build(recipe.shared(), python, d, final, testbed, source, notes),
        )
        own, venv = recipe.own(), shared
        if own is not None and shared.is_symlink() and not (self.root / "venvs" / keys.venv).exists():
            with self._lock(keys.shared):  # packed: copied out once, so that clones hard-link it again
                thaw_link(shared)
        if own is not None:  # the repo's own install, in the instance's clone of the shared venv
            venv = self._ensure_dir(
                "venvs",
                keys.venv,
                lambda d, final: self._venvs.build(
                    own, python, d, final, testbed, source, notes, base=shared
                ),
            )
        with self._lock(keys.testbed):  # its install has run: nothing writes into it again
            if not is_shared(testbed):
                slim_build_output(testbed)
            share_files(packs.dir / "files", testbed)
        spec = EnvSpec(
            key=keys.env,
            repo=task.repo,
            base_commit=task.base_commit,
            testbed=testbed,
            venv=venv,
            python=python,
            python_prefix=prefix,
        )
        atomic_write_json(self.root / "records" / f"{keys.env}.json", json.loads(spec.model_dump_json()))
        return spec

    def get(self, key: str) -> EnvSpec | None:
        """The built env with this key, or None (one file read, not a scan)."""
        if not key.isalnum():
            return None
        record = self.root / "records" / f"{key}.json"
        if not record.is_file():
            return None
        spec = EnvSpec.model_validate_json(record.read_text())
        ensure_mounted(self.root, (spec.testbed, spec.venv))  # a packed env after a reboot
        return spec

    def key_for(self, task: Task) -> str:
        """The key ``ensure(task)`` gives, without building anything."""
        imported = self.imported_for(task)
        if imported is not None:
            return imported.key
        recipe = self._recipe(task)[0]
        return self._keys(task, recipe, self._interpreter(recipe)[0]).env

    def _recipe(self, task: Task) -> tuple[EnvRecipe, str]:
        """The task's recipe, and where its as-of date comes from. A task that names an environment setup
        commit (one env per repo, version and setup commit, as the harness has it) is resolved as of that
        commit's date, so all of a version's instances share one env; a setup commit the source lacks, as of
        its stand-in's date (the version's newest base commit), else the base commit's; a task without one, and
        a row that carries its own spec, as of the task's own date."""
        recipe = recipe_for(task, self.options)
        commit = task.environment_setup_commit
        own_spec = recipe.source == "builtin" or recipe.source.startswith(
            "row:"
        )  # its row's, not a version's
        if not (self.options.as_of_date and commit) or own_spec:
            return recipe, "the task's created_at"
        source = self._source(task)
        if when := self._commit_date(source, commit):
            return recipe_for(task, self.options, as_of=when), f"environment setup commit {commit[:12]}"
        # a mirror without it (a fork's snapshot): the base commit of the version's newest instance stands in
        # for it (Task.setup_stand_in, from the rows loaded with the task; the newest row is its own), for the
        # date and the requirement files, so the version's instances still share one env (django 3.0 and 3.2,
        # scikit-learn 0.20-0.22). A base commit is nearer the env than a created_at (scikit-learn-9288 of
        # version 0.22 was opened in 2017, its base commit is of 2019).
        stand_in = task.setup_stand_in or task.base_commit
        if when := self._commit_date(source, stand_in):
            whose = "base commit" if stand_in == task.base_commit else "the version's newest base commit"
            why = f"{whose} {stand_in[:12]} ({commit[:12]} is not in the repo's source)"
            return recipe_for(task, self.options, as_of=when, read_at=stand_in), why
        return recipe, f"the task's created_at ({commit[:12]} is not in the repo's source)"

    def _commit_date(self, source: str, commit: str) -> str:
        """The committer date of ``commit`` in ``source`` (UTC, RFC 3339), '' when it is not there."""
        memo = (source, commit)
        if memo not in self._dates:
            proc = subprocess.run(
                ["git", "-c", "safe.directory=*", "-C", source, "show", "-s", "--format=%ct", commit, "--"],
                capture_output=True,
                text=True,
                check=False,
            )
            seconds = proc.stdout.strip()
            self._dates[memo] = (
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(seconds)))
                if proc.returncode == 0 and seconds.isdigit()
                else ""
            )
        return self._dates[memo]

    def _keys(self, task: Task, recipe: EnvRecipe, python: Path) -> _Keys:
        shared = recipe.shared().digest(python)
        if (recipe.requirements or recipe.env_yml) and not self._has_setup_commit(task, recipe):
            shared = _digest(shared, task.base_commit)  # its requirement files come from this testbed
        own = recipe.own()
        if own is None:
            testbed = _digest(task.repo, task.base_commit)
            return _Keys(testbed, shared, shared, _digest(testbed, shared))
        # the install writes into the testbed (in-place builds, version files): one testbed per install,
        # which is then never written again, so its files can be shared (gitpacks.share_files)
        testbed = _digest(task.repo, task.base_commit, shared, own.digest(python), *self._provided(task))
        venv = _digest(shared, testbed)
        return _Keys(testbed, shared, venv, _digest(testbed, venv))

    def _provided(self, task: Task) -> tuple[str, ...]:
        """What the repo cache gives the repo's own build besides the repo (a FreeType release for matplotlib's:
        build_settings.local_freetype); empty where nothing, so that other keys stay as they were."""
        try:
            given = provided_freetype(self._source(task), task.base_commit, self.repo_cache)
        except SweRlError:
            return ()
        return (f"freetype {given}",) if given else ()

    def _has_setup_commit(self, task: Task, recipe: EnvRecipe) -> bool:
        """Whether the recipe's requirement files are read at its commit (else from the testbed)."""
        try:
            return bool(self._commit_date(self._source(task), recipe.requirements_at))
        except SweRlError:
            return False

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

    def pack(self, **options: Any) -> PackResult:
        """Move every finished testbed and venv into one compressed read-only image (packing.py)."""
        return pack(self.root, du=lambda paths: disk_usage({str(p): p for p in paths}).total, **options)

    def gc(self, *, keep: set[str] | None = None) -> list[Path]:
        """Remove unfinished builds, and envs not in ``keep`` when it is given. Returns what was removed.
        Packed envs: their links; an image goes when no link into it is left. Removing envs waits for a pack
        and holds builds (pack_lock); the rest runs beside them."""
        with pack_lock(self.root, exclusive=True) if keep is not None else contextlib.nullcontext():
            removed = self._gc(keep)
            removed += drop_unused_images(self.root)
            collect_trash(self.root)
            return removed

    def _gc(self, keep: set[str] | None) -> list[Path]:
        removed: list[Path] = []
        tmp = self.root / ".tmp"
        for leftover in sorted(tmp.glob("*")) if tmp.is_dir() else []:
            with self._lock(leftover.name.split(".")[0], blocking=False) as held:
                if held:
                    shutil.rmtree(leftover, ignore_errors=True)
                    removed.append(leftover)
        for name, leftover in thaw_leftovers(self.root / "venvs"):  # a shared venv's thaw holds its lock
            with self._lock(name, blocking=False) as held:
                if held:
                    remove_leftover(leftover)
                    removed.append(leftover)
        removed += drop_leftovers(self.root)
        if keep is None:
            return removed
        used: set[Path] = set()
        for spec in self.records():
            if spec.key in keep:
                used.update(p for p in (spec.testbed, spec.venv, spec.rootfs) if p)
                if spec.venv is not None and (shared := shared_env_of(spec.venv)):
                    used.add(self.root / "venvs" / shared)  # what the next instance of its version clones
                continue
            (self.root / "records" / f"{spec.key}.json").unlink(missing_ok=True)
            removed.append(self.root / "records" / f"{spec.key}.json")
        for kind in ("testbeds", "venvs", "rootfs"):
            for path in sorted((self.root / kind).glob("*")):
                if path not in used:
                    if path.is_symlink():  # a packed tree: its image goes with its last link
                        path.unlink()
                    else:
                        shutil.rmtree(path, ignore_errors=True)
                    removed.append(path)
        # shared files no testbed or venv links any more (the packs stay: later testbeds chain onto them)
        for kept in store_files(self.root):
            if kept.stat().st_nlink == 1:
                kept.unlink()
                removed.append(kept)
        return removed

    # -- building ---------------------------------------------------------------------------------
    def _interpreter(self, recipe: EnvRecipe) -> tuple[Path, Path]:
        return find_python(recipe.python, fetch=self.options.fetch_python, store=self.root / "pythons")

    def _ensure_dir(self, kind: str, key: str, build: Callable[[Path, Path], None]) -> Path:
        """``final`` built by ``build(tmp, final)`` into a temp dir then renamed, under a lock."""
        final = self.root / kind / key
        ensure_mounted(self.root, (final,))
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

    def _source(self, task: Task) -> str:
        return task.repo_source or find_repo_source(
            task.repo, self.repo_cache, allow_network=self.allow_network
        )

    def _lock(self, key: str, *, blocking: bool = True) -> AbstractContextManager[bool]:
        (self.root / "locks").mkdir(parents=True, exist_ok=True)
        return exclusive(self.root / "locks" / f"{key}.lock", blocking=blocking)


def _present(spec: EnvSpec) -> bool:
    return spec.testbed.is_dir() and (spec.venv is None or spec.venv.is_dir())
