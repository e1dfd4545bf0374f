"""Disk use as ``du -s`` counts it: blocks allocated, a file hard-linked twice (even across parts) once."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from swe_rl.envs.cache import ENV_PARTS, EnvCache
from swe_rl.envs.store.disk_usage import disk_usage


def _du(*paths: Path) -> list[int]:
    """``du -s -B1`` of the paths in ONE invocation (it counts a hard-linked file in the first path only)."""
    out = subprocess.run(["du", "-s", "-B1", *map(str, paths)], capture_output=True, text=True, check=True)
    return [int(line.split("\t")[0]) for line in out.stdout.splitlines()]


def _tree(root: Path, payload: bytes) -> Path:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "big.bin").write_bytes(payload)
    (root / "pkg" / "sub" / "small.txt").write_text("x\n")
    (root / "pkg" / "empty").touch()
    os.symlink("big.bin", root / "pkg" / "link")  # counted as a link, not followed
    return root


def test_hard_links_count_once_within_and_across_parts_as_du_counts_them(tmp_path: Path) -> None:
    payload = os.urandom(200_000)
    testbeds = _tree(tmp_path / "testbeds", payload)
    venvs = _tree(tmp_path / "venvs", b"y" * 50_000)
    os.link(testbeds / "pkg" / "big.bin", testbeds / "pkg" / "sub" / "again.bin")  # within a part
    os.link(testbeds / "pkg" / "big.bin", venvs / "pkg" / "shared.bin")  # across parts
    usage = disk_usage({"testbeds": testbeds, "venvs": venvs})
    assert list(usage.parts.values()) == _du(testbeds, venvs)
    assert usage.total == sum(_du(testbeds, venvs))
    # the control: the linked file is big enough that counting it twice would show
    assert usage.parts["testbeds"] >= len(payload) and usage.total < sum(_du(testbeds)) + sum(_du(venvs))
    assert disk_usage({"missing": tmp_path / "nothing here"}).total == 0


def test_the_env_cache_measures_its_envs_and_not_its_download_cache(tmp_path: Path) -> None:
    cache = EnvCache(tmp_path / "envs")
    for kind in ENV_PARTS:
        _tree(cache.root / kind / "k1", os.urandom(30_000))
    _tree(cache.root / "uv-cache" / "wheels", os.urandom(500_000))
    os.link(cache.root / "testbeds" / "k1" / "pkg" / "big.bin", cache.root / "venvs" / "k1" / "pkg" / "t.bin")
    usage = cache.disk_usage()
    assert list(usage.parts) == list(ENV_PARTS)
    assert list(usage.parts.values()) == _du(*(cache.root / kind for kind in ENV_PARTS))
    assert usage.total < 500_000  # uv-cache is not in it
