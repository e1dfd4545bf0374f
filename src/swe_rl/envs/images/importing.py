"""An env-cache entry from an evaluation image: its /testbed and its Python environment, no Docker at run time.

``import_image`` exports the image's filesystem once (``docker export`` of a created, never started
container) into ``rootfs/<key>``; its /testbed becomes ``testbeds/<key>`` with the working tree kept
exactly (built extensions, edits the image made) and a fresh .git holding only the base commit and
its ancestors (the official images keep the whole history). The record names the image too, so the
docker backend runs the image itself and the ns backend runs the same files as its root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from swe_rl.envs.build.testbed import make_testbed
from swe_rl.envs.cache import EnvCache, _digest
from swe_rl.errors import ConfigError, EnvBuildError
from swe_rl.fileio import atomic_write_json
from swe_rl.gitutil import git
from swe_rl.sandbox.base import TESTBED, EnvSpec
from swe_rl.tasks.image_names import canonical_image

# Where official images keep the task's Python environment (SWE-bench: conda env "testbed").
PYTHON_ENV_CANDIDATES = (
    "/opt/miniconda3/envs/testbed",
    "/opt/conda/envs/testbed",
    "/opt/venv",
    "/testbed/.venv",
)
_SKIP = ("dev/*", "proc/*", "sys/*")


def instance_from_image(image: str) -> str | None:
    """The instance id an official image name encodes (SWE-bench ``_1776_``, SWE-Gym ``_s_``), or None."""
    match = re.match(r"^(?:[^/]+/)*sweb\.eval\.[^.]+\.(?P<iid>[^:]+)(?::.*)?$", canonical_image(image))
    if match is None:
        return None
    iid = match.group("iid")
    for sep in ("_1776_", "_s_"):
        if sep in iid:
            return iid.replace(sep, "__", 1)
    return None


def import_image(
    cache: EnvCache, image: str, *, repo: str | None = None, python_env: str | None = None
) -> EnvSpec:
    """Import ``image`` into ``cache`` (once per image id); returns its env. Needs the docker extra."""
    from swe_rl.sandbox.docker import docker_client

    client = docker_client()
    attrs = _inspect(client, image)
    key = _digest("image", attrs["Id"])
    existing = cache.get(key)
    if existing is not None:
        _index(cache, image, attrs, key)
        return existing
    repo = repo or _repo_from(image)
    with cache._lock(key):
        work = Path(tempfile.mkdtemp(dir=_tmp(cache), prefix=f"{key}."))
        try:
            root = work / "root"
            _export(client, image, root)
            testbed = work / "testbed"
            _take_testbed(root, testbed)
            base_commit = git(["rev-parse", "HEAD"], testbed).strip()
            venv = _find_python_env(root, attrs, python_env)
            final_root, final_testbed = cache.root / "rootfs" / key, cache.root / "testbeds" / key
            for src, dst in ((root, final_root), (testbed, final_testbed)):
                dst.parent.mkdir(parents=True, exist_ok=True)
                if dst.exists():
                    shutil.rmtree(dst)
                os.rename(src, dst)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        spec = EnvSpec(
            key=key,
            repo=repo,
            base_commit=base_commit,
            testbed=final_testbed,
            venv=Path(venv),
            python=Path(venv) / "bin" / "python",
            image=image,
            rootfs=final_root,
        )
        atomic_write_json(cache.root / "records" / f"{key}.json", json.loads(spec.model_dump_json()))
    _index(cache, image, attrs, key)
    return spec


def _tmp(cache: EnvCache) -> Path:
    path = cache.root / ".tmp"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _inspect(client: Any, image: str) -> dict[str, Any]:
    import docker.errors

    try:
        return dict(client.api.inspect_image(image))
    except docker.errors.ImageNotFound:
        raise ConfigError(
            f"no image {image!r} on this Docker engine; pull it first (`swe-rl images pull`)"
        ) from None


def _index(cache: EnvCache, image: str, attrs: dict[str, Any], key: str) -> None:
    for name in {image, *(attrs.get("RepoTags") or [])}:
        cache.index_image(name, key)


def _repo_from(image: str) -> str:
    iid = instance_from_image(image)
    match = re.match(r"^(?P<owner>.+?)__(?P<name>.+)-\d+$", iid or "")
    if match is None:
        raise ConfigError(f"cannot tell the repository of {image!r}; pass --repo owner/name")
    return f"{match.group('owner')}/{match.group('name')}"


def _export(client: Any, image: str, root: Path) -> None:
    """The image's filesystem, unpacked by GNU tar (owners, links and modes kept; device nodes skipped)."""
    root.mkdir(parents=True)
    container = client.containers.create(image, command=["true"], network_disabled=True)
    try:
        tar = subprocess.Popen(
            ["tar", "-x", "--numeric-owner", "-C", str(root), *(f"--exclude={p}" for p in _SKIP)],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert tar.stdin is not None
        try:
            for chunk in container.export():
                tar.stdin.write(chunk)
        finally:
            tar.stdin.close()
            err = tar.stderr.read().decode(errors="replace") if tar.stderr else ""
            code = tar.wait()
        if code != 0:
            raise EnvBuildError(f"cannot unpack the filesystem of {image}: {err.strip()[-1000:]}")
    finally:
        container.remove(force=True)


def _take_testbed(root: Path, testbed: Path) -> None:
    """Move the image's /testbed out of the root and give it a fresh .git (base commit and ancestors only)."""
    source = root / TESTBED.lstrip("/")
    if not (source / ".git").exists():
        raise ConfigError(f"the image has no git repository at {TESTBED}")
    os.rename(source, testbed)
    source.mkdir()  # the mount point stays in the root
    head = git(["rev-parse", "HEAD"], testbed).strip()
    fresh = testbed.parent / "fresh"
    make_testbed(str(testbed), head, fresh)
    shutil.rmtree(testbed / ".git")
    os.rename(fresh / ".git", testbed / ".git")
    shutil.rmtree(fresh)
    git(["update-index", "-q", "--refresh"], testbed, check=False)


def _find_python_env(root: Path, attrs: dict[str, Any], wanted: str | None) -> str:
    """The image's Python environment (a venv or conda env), as a path inside the image."""
    candidates = [wanted] if wanted else list(PYTHON_ENV_CANDIDATES)
    if not wanted:
        env = dict(e.split("=", 1) for e in (attrs.get("Config") or {}).get("Env") or [] if "=" in e)
        candidates += [str(Path(p).parent) for p in env.get("PATH", "").split(":") if p.endswith("/bin")]
    for path in candidates:
        inside = root / path.lstrip("/")
        if (inside / "bin" / "python").exists() or (inside / "bin" / "python").is_symlink():
            return path
    raise ConfigError(
        f"no Python environment found in the image (looked at {', '.join(candidates)}); pass --python-env PATH"
    )
