"""Evaluation images: pull a list through a mirror and retag to the canonical names; list what is here.

Pulls go through the Docker Engine API. With a mirror prefix, ``<prefix>/<name>`` is pulled and
tagged as ``<name>`` (the SWE-bench / SWE-Gym name), then the mirror's tag is dropped, as the seed's
pull script does. Images already present are skipped, so a rerun resumes a long pull (and the engine
itself keeps the layers an interrupted pull already fetched).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from swe_rl.envs.cache import EnvCache
from swe_rl.errors import ConfigError

PullStatus = Literal["pulled", "present", "failed"]


class PullResult(BaseModel):
    name: str = Field(description="Canonical image name.")
    status: PullStatus
    source: str = Field(description="What was pulled (the mirror's name, or the canonical one).")
    seconds: float = 0.0
    error: str | None = None


class ImageEntry(BaseModel):
    """One image of the inventory: a Docker image and/or an env imported from it."""

    name: str
    docker: bool = Field(description="Present on this Docker engine.")
    size: int | None = Field(default=None, description="Bytes, for Docker images.")
    env: str | None = Field(default=None, description="Key of the env imported from it (`env import-image`).")


def read_image_list(path: Path) -> list[str]:
    """Image names, one a line; blank lines and # comments skipped; duplicates dropped."""
    if not path.is_file():
        raise ConfigError(f"image list not found: {path}")
    names: list[str] = []
    for line in path.read_text().splitlines():
        name = line.split("#")[0].strip()
        if name and name not in names:
            names.append(name)
    return names


def split_name(name: str) -> tuple[str, str]:
    """('repo', 'tag') of an image name; the tag defaults to latest."""
    repo, sep, tag = name.rpartition(":")
    if not sep or "/" in tag:
        return name, "latest"
    return repo, tag


def pull_images(
    client: Any,
    names: Sequence[str],
    *,
    mirror: str | None = None,
    jobs: int = 4,
    on_done: Callable[[PullResult], None] | None = None,
) -> list[PullResult]:
    """Pull every image (at most ``jobs`` at once); a failure is recorded, the others go on."""

    def one(name: str) -> PullResult:
        result = _pull_one(client, name, mirror)
        if on_done is not None:
            on_done(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, names))


def _pull_one(client: Any, name: str, mirror: str | None) -> PullResult:
    import docker.errors

    source = f"{mirror.rstrip('/')}/{name}" if mirror else name
    started = time.monotonic()
    try:
        client.images.get(name)
        return PullResult(name=name, status="present", source=source)
    except docker.errors.ImageNotFound:
        pass
    repo, tag = split_name(source)
    try:
        for event in client.api.pull(repo, tag=tag, stream=True, decode=True):
            if "error" in event:
                raise RuntimeError(event["error"])
        if mirror:
            canon_repo, canon_tag = split_name(name)
            client.api.tag(source, canon_repo, canon_tag)
            client.api.remove_image(source, noprune=True)
    except Exception as exc:  # the engine reports registry faults as several exception types
        return PullResult(
            name=name,
            status="failed",
            source=source,
            seconds=round(time.monotonic() - started, 2),
            error=f"{type(exc).__name__}: {exc}",
        )
    return PullResult(name=name, status="pulled", source=source, seconds=round(time.monotonic() - started, 2))


def image_inventory(
    cache: EnvCache | None, client: Any | None, *, pattern: str = "sweb.eval."
) -> list[ImageEntry]:
    """Evaluation images on the Docker engine (names containing ``pattern``) and envs imported from images."""
    entries: dict[str, ImageEntry] = {}
    if client is not None:
        for image in client.images.list():
            for tag in image.tags:
                if pattern in tag:
                    entries[tag] = ImageEntry(name=tag, docker=True, size=image.attrs.get("Size"))
    if cache is not None:
        for spec in cache.records():
            if spec.image:
                old = entries.get(spec.image)
                entries[spec.image] = ImageEntry(
                    name=spec.image, docker=old is not None, size=old.size if old else None, env=spec.key
                )
    return [entries[k] for k in sorted(entries)]
