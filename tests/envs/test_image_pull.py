"""``images pull`` through a mirror (a real registry on loopback), retag, skip-present; ``images ls`` and /images."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from tests.conftest import available_factory

from swe_rl.envs.cache import EnvCache
from swe_rl.envs.images.pull import image_inventory, pull_images, split_name
from swe_rl.sandbox.docker import BASE_IMAGE

pytestmark = pytest.mark.docker
NAMES = [
    "swebench/sweb.eval.x86_64.acme_1776_widget-9:latest",
    "xingyaoww/sweb.eval.x86_64.acme_s_widget-10:latest",
]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A Docker registry (Debian's docker-registry) on a loopback port, holding the two images."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.skip("docker-registry is not installed (apt-get install docker-registry)")
    docker = available_factory("docker")
    client = docker._client
    root, port = tmp_path_factory.mktemp("registry"), _port()
    config = root / "config.yml"
    config.write_text(
        f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    proc = subprocess.Popen(
        [binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        mirror = f"127.0.0.1:{port}/cache"
        for name in NAMES:
            remote_repo, tag = split_name(f"{mirror}/{name}")
            client.api.tag(BASE_IMAGE, remote_repo, tag)
            for event in client.api.push(remote_repo, tag=tag, stream=True, decode=True):
                assert "error" not in event, event
            client.api.remove_image(f"{remote_repo}:{tag}", noprune=True)
        yield client, mirror
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for name in NAMES:
            with contextlib.suppress(Exception):
                client.api.remove_image(name, noprune=True)


def _present(client, name: str) -> bool:
    return any(name in image.tags for image in client.images.list())


def test_pull_through_mirror_retags_and_resumes(registry, tmp_path):
    client, mirror = registry
    for name in NAMES:
        assert not _present(client, name)
    listing = tmp_path / "images.txt"
    listing.write_text(
        "# wanted\n" + "\n".join(NAMES) + "\nswebench/sweb.eval.x86_64.nope_1776_nope-1:latest\n"
    )
    cmd = [
        sys.executable,
        "-m",
        "swe_rl.cli.app",
        "images",
        "pull",
        "--list",
        str(listing),
        "--mirror",
        mirror,
        "--json",
    ]
    first = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert first.returncode == 1, first.stderr  # the missing one failed; the others were pulled
    results = {r["name"]: r["status"] for r in json.loads(first.stdout)}
    assert results == {
        NAMES[0]: "pulled",
        NAMES[1]: "pulled",
        "swebench/sweb.eval.x86_64.nope_1776_nope-1:latest": "failed",
    }
    for name in NAMES:
        assert _present(client, name), "retagged to the canonical name"
        assert not _present(client, f"{mirror}/{name}"), "the mirror's tag is dropped"
    again = pull_images(client, NAMES, mirror=mirror)
    assert [r.status for r in again] == ["present", "present"]
    listed = {e.name for e in image_inventory(EnvCache(tmp_path / "envs"), client)}
    assert set(NAMES) <= listed
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "swe_rl.cli.app",
            "images",
            "ls",
            "--json",
            "--cache-dir",
            str(tmp_path / "envs"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert set(NAMES) <= {e["name"] for e in json.loads(shown.stdout)}
