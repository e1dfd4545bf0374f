"""Evaluation image names, exactly as SWE-bench and SWE-Gym name them."""

from __future__ import annotations

from typing import Literal

ImageFlavor = Literal["swebench", "swegym"]


# Docker Hub's own names for itself: ``docker.io/swebench/x`` and ``swebench/x`` are one image.
_HUB_PREFIXES = ("docker.io/", "index.docker.io/", "registry-1.docker.io/")


def canonical_image(name: str) -> str:
    """``name`` without a Docker Hub registry prefix (and ``library/``), lower-cased, with a tag: the seed
    names images ``docker.io/xingyaoww/sweb.eval...`` and tags pulled ones so; both mean the same image."""
    name = name.strip()
    for prefix in _HUB_PREFIXES:
        if name.lower().startswith(prefix):
            name = name[len(prefix) :]
            break
    if name.lower().startswith("library/"):
        name = name[len("library/") :]
    if "@" not in name and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name.lower()


def image_name(instance_id: str, flavor: ImageFlavor = "swebench", arch: str = "x86_64") -> str:
    """``swebench/sweb.eval.x86_64.<id, "__" -> "_1776_">:latest`` (lower-cased), or SWE-Gym's ``_s_``."""
    if flavor == "swebench":
        return f"swebench/sweb.eval.{arch}.{instance_id.replace('__', '_1776_')}:latest".lower()
    if flavor == "swegym":
        return f"xingyaoww/sweb.eval.{arch}.{instance_id.replace('__', '_s_')}:latest".lower()
    raise ValueError(f"unknown image flavor {flavor!r} (expected 'swebench' or 'swegym')")
