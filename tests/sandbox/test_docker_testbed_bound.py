"""A docker sandbox's testbed is bounded in inodes and bytes like the ns backend's writable layer (issue 58,
item 8): it is a tmpfs volume of the testbed's own size and file count plus ``Limits.disk_mb`` and
``Limits.inodes`` (sandbox/docker.py). It used to be the container's writable layer (overlay2 on the
engine's disk), where a command made 140,000 files.

On the real dockerd, for an env's testbed (copied in) and for an image's own testbed (copied by the engine):
the testbed is there and clean, creating files in it stops with ENOSPC at about ``Limits.inodes`` more
than it held, and a large write at about ``disk_mb``. The positive control: the same files are all made in
the container's writable layer, which is what the testbed was."""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import tarfile
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.sandbox.base import EnvSpec, Limits

pytestmark = pytest.mark.docker

LIMITS = Limits(disk_mb=16)  # 1,024 inodes
TRIES = LIMITS.inodes + 1000
# empty files made in $1 until one fails or TRIES exist: how many, then the failure's message
MANY = (
    'mkdir -p "$1" && cd "$1" && i=0; '
    f'while [ $i -lt {TRIES} ] && : 2>/tmp/err > "f$i"; do i=$((i+1)); done; echo "$i"; cat /tmp/err'
)


async def _fill(box, workdir: str) -> None:  # type: ignore[no-untyped-def]
    """Files and bytes in the testbed stop at its bound; the container's own layer has none (the control)."""
    total = int((await box.exec(f"df --output=itotal {workdir} | tail -1", timeout=30)).output)
    held = int((await box.exec(f"find {workdir} | wc -l", timeout=30)).output)
    assert held <= total - LIMITS.inodes <= held + 64, (held, total)

    made = await box.exec(f"bash -c '{MANY}' _ {workdir}/many", timeout=120)
    count, _, error = made.output.partition("\n")
    assert LIMITS.inodes - 64 <= int(count) <= LIMITS.inodes + 64, made.output
    assert "No space left on device" in error, made.output
    await box.exec(f"rm -rf {workdir}/many", timeout=60)
    big = await box.exec(
        f"head -c 100M /dev/zero > {workdir}/big; echo rc=$?; du -m {workdir}/big", timeout=60
    )
    assert "No space left on device" in big.output and "rc=1" in big.output, big.output
    assert int(big.output.split()[-2]) <= LIMITS.disk_mb + 2, big.output

    control = await box.exec(f"bash -c '{MANY}' _ /root/many", timeout=120)
    assert control.output.split("\n")[0] == str(TRIES), control.output  # no bound there: every file made


async def test_an_envs_testbed_is_bounded_in_inodes_and_bytes(textkit_env):
    factory = available_factory("docker")
    async with await factory.create(textkit_env, LIMITS) as box:
        state = await box.exec("git status --porcelain; ls README.md; stat -c %U .", timeout=30)
        assert state.output == "README.md\nroot\n", state.output  # the testbed, clean, root's
        await _fill(box, textkit_env.workdir)
        await box.exec(f"rm -f {textkit_env.workdir}/big", timeout=60)
        assert (await box.exec("git status --porcelain", timeout=30)).output == ""


def _userland_image(client, tag: str) -> None:  # type: ignore[no-untyped-def]
    """An image with bash, the coreutils the tests use (their libraries, the C.UTF-8 locale) and a testbed of its own at
    /testbed: 300 files in a git-less tree."""
    tools = ["bash", "timeout", "sleep", "ls", "df", "head", "du", "cat", "find", "wc", "mkdir", "rm", "tail"]
    paths = {Path(shutil.which(tool) or tool).resolve() for tool in tools}
    for binary in list(paths):
        for line in subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout.splitlines():
            words = line.split()
            lib = next((w for w in words if w.startswith("/")), None)
            if lib:
                paths.add(Path(lib))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("tmp", "root", "proc", "sys", "dev", "etc", "testbed/src", "usr/bin"):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
        for name in ("bin", "lib", "lib64"):
            if os.path.islink(f"/{name}"):
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(f"/{name}")
                tar.addfile(info)
        files = set()
        for path in paths:  # under the merged /usr: a path through the /lib symlink is its /usr/lib one
            in_usr = Path(os.path.realpath(path.parent)) / path.name
            files |= {in_usr, Path(os.path.realpath(in_usr))}
        for path in sorted(files):
            tar.add(str(path), arcname=str(path).lstrip("/"))
        if os.path.isdir("/usr/lib/locale/C.utf8"):  # the sandbox's LC_ALL
            tar.add("/usr/lib/locale/C.utf8", arcname="usr/lib/locale/C.utf8")
        for i in range(300):
            data = f"line {i}\n".encode() * 100
            info = tarfile.TarInfo(f"testbed/src/f{i}.py")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    client.api.import_image_from_data(buf.getvalue(), repository=tag.split(":")[0], tag=tag.split(":")[1])


async def test_an_images_own_testbed_is_copied_and_bounded(tmp_path):
    factory = available_factory("docker")
    tag = "swe-rl-test/testbed-image:1"
    _userland_image(factory._client, tag)
    env = EnvSpec(key="image-testbed", repo="none/none", base_commit="0" * 40, testbed=tmp_path, image=tag)
    try:
        async with await factory.create(env, LIMITS) as box:
            there = await box.exec("ls /testbed/src | wc -l; cat /testbed/src/f7.py | head -1", timeout=30)
            assert there.output == "300\nline 7\n", there.output  # the image's testbed, copied
            await _fill(box, "/testbed")
    finally:
        factory._client.images.remove(tag, force=True)


async def test_the_testbed_volume_goes_with_its_sandbox_and_a_dead_owners_is_reaped(textkit_env):
    from swe_rl.sandbox.docker import LABEL, OWNER_LABEL, DockerFactory

    factory = available_factory("docker")
    client = factory._client
    async with await factory.create(textkit_env, LIMITS) as box:
        name = box._volume.name
        assert client.volumes.get(name).attrs["Labels"][LABEL] == "1"  # the control: it is there
        await box.reset()  # a new container, and a new volume
        assert box._volume.name != name and not client.volumes.list(filters={"name": name})
        name = box._volume.name
    assert not client.volumes.list(filters={"name": name}), "removed with its sandbox"
    # one left by a process that is gone (pid 0 is nobody's) is removed by the next factory's reaper
    left = client.volumes.create(labels={LABEL: "1", OWNER_LABEL: f"{socket.gethostname()}:0"})
    DockerFactory()
    assert not client.volumes.list(filters={"name": left.name})
