"""Trust under an adversarial policy: host-global writes, the control channel, channel garbage, oversized
output. Every attack carries a positive control in the same test: the attack is shown to work where the
guarantee is absent (on the host, or on a process the sandbox made itself), or its target is shown to
exist, so that no test passes because its target is missing on this kernel."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from tests.conftest import available_factory, factory_of

from swe_rl.errors import OutputLimitError, SandboxError
from swe_rl.sandbox.base import Limits
from swe_rl.sandbox.cgroups import PARENT, ROOT, cgroup_version
from swe_rl.sandbox.identity import SANDBOX_UID
from swe_rl.sandbox.shell import FILE_CAP

# Host-global files outside /proc/sys that a root process could write to change the host.
EXTRA_TARGETS = [
    "/proc/sysrq-trigger",
    "/proc/sys/fs/binfmt_misc/register",
    "/sys/kernel/uevent_helper",
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/sys/power/state",
    "/sys/kernel/profiling",
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/kernel/modprobe",
]
# The probe: open every writable-looking file for writing (where the kernel checks) and write its own
# value back where it opens, then write a changed value to one harmless host-global setting.
PROBE = r"""
import json, os, sys
found, opened = [], []
targets = [os.path.join(d, f) for d, _, fs in os.walk("/proc/sys") for f in fs] + sys.argv[1:]
for path in targets:
    try:
        if not os.stat(path).st_mode & 0o222:
            continue
    except OSError:
        continue
    found.append(path)
    try:
        current = open(path, "rb").read()
    except OSError:
        current = b""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        continue
    opened.append(path)  # the write: its own value back, so that a failure of this test harms nothing
    try:
        if current:
            os.write(fd, current)
    except OSError:
        pass
    os.close(fd)
canary = "/proc/sys/vm/overcommit_ratio"
try:
    with open(canary, "w") as f:
        f.write(sys.argv[0])
except OSError as exc:
    pass
print(json.dumps({"found": len(found), "opened": opened}))
"""


@pytest.fixture(params=["ns", "docker", "remote"])
def hostile_factory(request):
    yield from factory_of(request, request.param)


def _host_writable(paths: list[str]) -> list[str]:
    """The positive control: which of ``paths`` host root can open for writing (nothing is written)."""
    opened = []
    for path in paths:
        try:
            os.close(os.open(path, os.O_WRONLY))
            opened.append(path)
        except OSError:
            pass
    return opened


async def test_host_global_proc_and_sys_files_are_not_writable(hostile_factory, textkit_env):
    canary = Path("/proc/sys/vm/overcommit_ratio")
    before = canary.read_text()
    changed = str(int(before) + 7)
    extras = [p for p in EXTRA_TARGETS if os.path.exists(p)]
    # control: the targets exist and host root can write them (the canary by a real write, then restored)
    host_global = [str(p) for p in Path("/proc/sys/kernel").iterdir() if p.is_file()] + extras
    assert "/proc/sys/kernel/core_pattern" in _host_writable(host_global)
    canary.write_text(changed)
    assert canary.read_text().strip() == changed
    canary.write_text(before)
    try:
        async with await hostile_factory.create(textkit_env) as box:
            q = " ".join(extras)
            result = await box.exec(f"python3 -c '{PROBE}' {changed} {q}", timeout=120)
            report = json.loads(result.output.strip().splitlines()[-1])
        assert report["found"] > 100, "the probe saw /proc/sys (a writable-looking file list)"
        assert report["opened"] == [], report["opened"][:20]
        assert canary.read_text() == before, "a sandboxed process changed a host-global sysctl"
    finally:
        if canary.read_text() != before:
            canary.write_text(before)


def _sandbox_host_pids(box_id: str) -> list[int]:
    parent = ROOT / PARENT if cgroup_version() == 2 else ROOT / "pids" / PARENT
    (base,) = parent.glob(f"{box_id}.*")
    return [int(p) for p in (base / "cgroup.procs").read_text().split()]


def _host_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[2])  # effective
    raise AssertionError(pid)


@pytest.mark.ns
async def test_no_ns_sandbox_process_is_host_root(textkit_env):
    factory = available_factory("ns")
    async with await factory.create(textkit_env) as box:
        inside = await box.exec("sleep 30 & id -u", timeout=10)
        pids = _sandbox_host_pids(box.id)
        assert len(pids) >= 3, "bwrap, the shell and the sleep are in the sandbox's cgroup"
        # control: the same reading finds root where root is (this test process)
        assert _host_uid(os.getpid()) == 0
        assert all(_host_uid(pid) != 0 for pid in pids), [(p, _host_uid(p)) for p in pids]
        # /proc/self/uid_map inside shows only the last hop (bwrap nests a user namespace for
        # --disable-userns), so the host's view above is the one that counts
        assert inside.output.split()[-1] == "0", "commands still see themselves as root, as in a container"
        assert {_host_uid(pid) for pid in pids} == {SANDBOX_UID}


CHANNEL_PROBE = r"""
import os, sys
def attempt(what, fn):
    try:
        fn(); print("OPENED", what)
    except OSError as exc:
        print("denied", what, exc.errno)
target = sys.argv[1]
for pid in ("1", target):
    attempt(f"mem {pid}", lambda: open(f"/proc/{pid}/mem", "rb").close())
    attempt(f"fds {pid}", lambda: os.listdir(f"/proc/{pid}/fd"))
    attempt(f"fd0 {pid}", lambda: os.close(os.open(f"/proc/{pid}/fd/0", os.O_WRONLY)))
    attempt(f"fd1 {pid}", lambda: os.close(os.open(f"/proc/{pid}/fd/1", os.O_WRONLY)))
"""


async def test_control_process_memory_and_fds_are_out_of_reach(hostile_factory, textkit_env):
    if hostile_factory.backend == "docker":
        pytest.skip("docker runs each command through dockerd: its control channel is not in the container")
    async with await hostile_factory.create(textkit_env) as box:
        result = await box.exec(
            f"sleep 30 & python3 -c '{CHANNEL_PROBE}' $!; echo 0; echo 0 >&2; exit 7", timeout=30
        )
        attempts = [
            line.split() for line in result.output.splitlines() if line.split()[0] in ("OPENED", "denied")
        ]
        assert len(attempts) == 8, result.output
        # control: a process of the sandbox's own making (same uid, dumpable) is open to the same calls
        assert [a[1] for a in attempts if a[2] != "1" and a[0] == "OPENED"] == ["mem", "fds", "fd0", "fd1"]
        assert [a for a in attempts if a[2] == "1" and a[0] == "OPENED"] == [], result.output
        # whatever it printed, its status is its own exit code and the next result is clean
        assert result.returncode == 7
        assert (await box.exec("echo clean", timeout=10)).output == "clean\n"


async def test_background_output_stays_with_its_command(hostile_factory, textkit_env):
    async with await hostile_factory.create(textkit_env) as box:
        await box.exec("(sleep 1; echo LATE; echo ran > /tmp/late) > /proc/self/fd/1 2>&1 &", timeout=30)
        later = await box.exec("sleep 2; cat /tmp/late; echo second", timeout=30)
        # control: the background job ran and printed after its command had ended
        assert later.output.startswith("ran\n"), later.output
        assert "LATE" not in later.output


async def test_setsid_child_dies_with_its_timed_out_command(hostile_factory, textkit_env):
    count = "ps -eo args | grep -c '^sleep 30[01]$' || true"
    async with await hostile_factory.create(textkit_env) as box:
        # control: a setsid child of a command that ended normally keeps running
        await box.exec("setsid sleep 301 >/dev/null 2>&1 &", timeout=10)
        for _ in range(50):  # setsid may fork before it execs sleep: give it a moment on a loaded machine
            if (await box.exec(count, timeout=10)).output.strip() == "1":
                break
            await asyncio.sleep(0.05)
        assert (await box.exec(count, timeout=10)).output.strip() == "1"
        timed = await box.exec("setsid sleep 300 >/dev/null 2>&1 & sleep 100", timeout=2)
        assert timed.timed_out
        await asyncio.sleep(0.2)
        assert (await box.exec(count, timeout=10)).output.strip() == "1", "only the earlier child is left"


def _shell_status_pipe(box_id: str) -> str:
    """Host path of the persistent shell's status pipe (its stdout): the shell is pid 1 of the sandbox."""
    for pid in _sandbox_host_pids(box_id):
        nspid = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("NSpid"))
        if nspid.split()[-1] == "1" and len(nspid.split()) > 2:
            return f"/proc/{pid}/fd/1"
    raise AssertionError("no shell found")


async def test_garbage_on_the_control_channel_is_a_typed_error(hostile_factory, textkit_env):
    if hostile_factory.backend == "docker":
        pytest.skip("docker runs each command through dockerd: there is no shell channel in the container")
    # remote: the exec server's sandbox has the same id and lives on this machine
    async with await hostile_factory.create(textkit_env) as box:
        assert (await box.exec("echo fine", timeout=10)).output == "fine\n"
        with open(_shell_status_pipe(box.id), "wb") as channel:  # host root may: the commands may not
            channel.write(b"garbage\n")
        with pytest.raises(SandboxError, match="garbage"):  # control: the bytes reached the channel
            await box.exec("echo next", timeout=10)
        with pytest.raises(SandboxError, match="unusable"):
            await box.exec("echo again", timeout=10)
        await box.reset()
        assert (await box.exec("echo recovered", timeout=10)).output == "recovered\n"


def _reset_peak(pid: int | str = "self") -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def _peak_growth_mib(pid: int | str = "self") -> float:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return (int(fields["VmHWM"].split()[0]) - int(fields["VmRSS"].split()[0])) / 1024


def _parent(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def _watched(box, request) -> list[int | str]:
    """This process, and for remote the pool and the exec server (bwrap's grandparent, via the spawner)."""
    if type(box).__name__ != "RemoteSandbox":
        return ["self"]
    bwrap = min(_sandbox_host_pids(box.id))  # the first process of the sandbox
    server = _parent(_parent(bwrap))
    assert b"exec" in Path(f"/proc/{server}/cmdline").read_bytes(), "found the exec server process"
    return ["self", request.getfixturevalue("remote_service").proc.pid, server]


@pytest.mark.ns
async def test_oversized_patch_and_file_are_refused_with_bounded_memory(
    hostile_factory, textkit_env, request
):
    big = 300_000_000
    async with await hostile_factory.create(textkit_env, Limits(disk_mb=1024, memory_mb=2048)) as box:
        made = await box.exec(
            f"yes 0123456789abcdef | head -c {big} > huge.txt; stat -c %s huge.txt", timeout=300
        )
        # control: the file is there, over the cap
        assert int(made.output.split()[-1]) > FILE_CAP, made.output
        watched = _watched(box, request)
        for pid in watched:
            _reset_peak(pid)
        with pytest.raises(OutputLimitError):
            await box.diff()
        with pytest.raises(OutputLimitError):
            await box.read_file("/testbed/huge.txt")
        if hostile_factory.backend != "docker":
            with pytest.raises(OutputLimitError):
                await box.read_file("/dev/zero")
        else:
            with pytest.raises(OSError, match="regular file"):
                await box.read_file("/dev/zero")
        for pid in watched:  # the caller, and on remote the pool and the exec server
            grown = _peak_growth_mib(pid)
            assert grown < 64, f"{pid}: memory peaked {grown:.0f} MiB above its resident size"
        assert len(watched) == (3 if hostile_factory.backend == "remote" else 1)
        # the sandbox stays usable, and a small file still reads whole
        await box.exec("rm huge.txt; echo small > s.txt", timeout=60)
        assert await box.read_file("/testbed/s.txt") == b"small\n"


async def test_huge_command_output_is_capped_with_bounded_memory(hostile_factory, textkit_env):
    async with await hostile_factory.create(textkit_env, Limits(output_bytes=1_000_000)) as box:
        _reset_peak()
        result = await box.exec("head -c 150000000 /dev/urandom | base64", timeout=300)
        assert result.output_bytes > 150_000_000, result.output_bytes  # control: it really printed that much
        assert "output capped at 1000000 bytes" in result.output
        assert _peak_growth_mib() < 64


@pytest.mark.ns
async def test_an_env_missing_from_the_cache_is_a_typed_error(textkit_env, tmp_path):
    factory = available_factory("ns")
    gone = textkit_env.model_copy(update={"testbed": tmp_path / "no-such-testbed"})
    async with await factory.create(textkit_env) as box:  # control: the same env with its testbed starts
        assert (await box.exec("echo up", timeout=10)).output == "up\n"
    with pytest.raises(SandboxError, match="no-such-testbed"):
        await factory.create(gone)
