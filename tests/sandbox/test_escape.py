"""Escape attempts against the isolating backends. Each runs as a shell command inside a sandbox and is
checked from the host: it must fail, the host and other sandboxes stay unchanged, and the sandbox stays
usable (or is cleanly destroyed)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.sandbox.base import Limits

ISOLATING = ["ns", "docker"]


@pytest.fixture(params=ISOLATING)
def iso_factory(request):
    return available_factory(request.param)


# (name, command). A command prints ESCAPED when the attack works. ``{tmp}`` is a scratch directory and
# ``{target}`` the pid of a host process. Each also runs on the host as root in a private mount namespace
# (the positive control): there it must print ESCAPED, so no row passes because its target is missing.
ATTEMPTS = [
    ("remount root read-write", "mount -o remount,rw / && echo ESCAPED"),
    ("mount proc", "mkdir -p {tmp}/p && mount -t proc proc {tmp}/p && echo ESCAPED"),
    ("mount sysfs", "mkdir -p {tmp}/s && mount -t sysfs sys {tmp}/s && echo ESCAPED"),
    ("mount tmpfs", "mkdir -p {tmp}/t && mount -t tmpfs t {tmp}/t && echo ESCAPED"),
    (
        "mount overlay",
        "mkdir -p {tmp}/o/l {tmp}/o/u {tmp}/o/w {tmp}/o/m && mount -t overlay o -o lowerdir={tmp}/o/l,"
        "upperdir={tmp}/o/u,workdir={tmp}/o/w {tmp}/o/m && echo ESCAPED",
    ),
    (
        "cgroup release_agent",
        "mkdir -p {tmp}/cg && mount -t cgroup -o memory cgroup {tmp}/cg 2>/dev/null "
        "|| mount -t cgroup2 cgroup {tmp}/cg && echo ESCAPED",
    ),
    (
        "cgroupfs visible",
        "ls /sys/fs/cgroup/*/release_agent /sys/fs/cgroup/cgroup.procs 2>/dev/null | head -1 "
        "| grep -q . && echo ESCAPED",
    ),
    ("mknod block device", "mknod {tmp}/blk b 7 0 && echo ESCAPED"),
    (
        "load kernel module",
        'python3 -c \'import ctypes, errno; l=ctypes.CDLL(None, use_errno=True); l.init_module(0, 0, b""); '
        'print("denied" if ctypes.get_errno() == errno.EPERM else "ESCAPED")\'',
    ),
    ("unshare a user namespace", "unshare -U -r true && echo ESCAPED"),
    ("chroot", "chroot / true && echo ESCAPED"),
    (
        "raw socket",
        "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1); print(\"ESCAPED\")'",
    ),
    (
        "packet socket",
        "python3 -c 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print(\"ESCAPED\")'",
    ),
    (
        "ptrace a host process",
        "python3 -c 'import ctypes; l=ctypes.CDLL(None); "
        'print("ESCAPED" if l.ptrace(16, {target}, 0, 0)==0 else "denied")\'',
    ),
]


@pytest.fixture(scope="module")
def host_target():
    target = subprocess.Popen(["sleep", "600"])
    yield target.pid
    target.kill()
    target.wait()


@pytest.mark.parametrize(("name", "command"), ATTEMPTS, ids=[a[0] for a in ATTEMPTS])
async def test_escape_attempt_fails(iso_factory, textkit_env, host_target, tmp_path, name, command):
    control = await asyncio.to_thread(
        subprocess.run,
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "bash",
            "-c",
            command.format(tmp=tmp_path, target=host_target),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PATH": f"/usr/bin:/bin:/usr/sbin:/sbin:{os.environ['PATH']}"},
    )
    assert "ESCAPED" in control.stdout, f"control: {name} does not work on the host: {control.stderr}"
    async with await iso_factory.create(textkit_env) as box:
        result = await box.exec(command.format(tmp="/tmp", target=host_target), timeout=30)
        assert "ESCAPED" not in result.output, f"{name}: {result.output}"
        assert (await box.exec("echo usable", timeout=10)).output == "usable\n"


async def test_no_capabilities_and_no_new_privileges(iso_factory, textkit_env):
    # control: the same reading finds capabilities where they are (this root process)
    host = dict(
        line.split(":\t") for line in Path("/proc/self/status").read_text().splitlines() if ":\t" in line
    )
    assert int(host["CapEff"], 16) != 0
    async with await iso_factory.create(textkit_env) as box:
        status = (
            await box.exec("grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status", timeout=10)
        ).output
        fields = dict(line.split(":\t") for line in status.strip().splitlines())
        assert int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0
        assert fields["Seccomp"].strip() == "2", "a seccomp filter is active"


async def test_host_processes_are_invisible_and_unsignalable(iso_factory, textkit_env):
    host = subprocess.Popen(["sleep", "60"])
    try:
        async with await iso_factory.create(textkit_env) as box:
            seen = await box.exec(
                f"ls /proc | grep -x {host.pid}; kill -9 {host.pid} && echo KILLED", timeout=10
            )
            assert "KILLED" not in seen.output
            count = await box.exec("ls -d /proc/[0-9]* | wc -l", timeout=10)
            assert int(count.output) < 10, "only the sandbox's own processes are visible"
        assert host.poll() is None, "the host process survived"
    finally:
        host.kill()
        host.wait()


async def test_host_loopback_and_outside_network_unreachable(iso_factory, textkit_env):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    accepted: list[object] = []
    server.settimeout(5)
    # control: the server answers on the host's loopback
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        conn, _ = server.accept()
        conn.close()
    thread = threading.Thread(target=lambda: accepted.append(_accept(server)), daemon=True)
    thread.start()
    try:
        async with await iso_factory.create(textkit_env) as box:
            probe = (
                "python3 -c 'import socket,sys\n"
                f'for host in ("127.0.0.1", "10.0.0.1", "1.1.1.1"):\n'
                "    try:\n"
                f'        socket.create_connection((host, {port}), timeout=2); print("CONNECTED", host)\n'
                '    except OSError as e: print("refused", host, e)\''
            )
            result = await box.exec(probe, timeout=30)
            assert "CONNECTED" not in result.output, result.output
            interfaces = await box.exec("ls /sys/class/net 2>/dev/null || cat /proc/net/dev", timeout=10)
            assert "eth" not in interfaces.output and "ens" not in interfaces.output
    finally:
        thread.join(timeout=6)
        server.close()
    assert accepted == [None]


def _accept(server: socket.socket) -> object:
    try:
        conn, _ = server.accept()
        conn.close()
        return "accepted"
    except OSError:
        return None


async def test_writes_stay_in_the_overlay(iso_factory, textkit_env):
    before = sorted(p.name for p in textkit_env.testbed.iterdir())
    async with await iso_factory.create(textkit_env) as box:
        result = await box.exec(
            "rm -rf /testbed/textkit && echo x > /testbed/NEW && touch /usr/bin/zz 2>&1; "
            f"touch {textkit_env.venv}/planted 2>&1; echo done",
            timeout=10,
        )
        assert "Read-only file system" in result.output
        # symlinks to host paths planted in the upper layer resolve inside the sandbox
        await box.exec("ln -s /etc/passwd /testbed/link && echo pwned > /testbed/link", timeout=10)
    assert sorted(p.name for p in textkit_env.testbed.iterdir()) == before
    assert not Path("/usr/bin/zz").exists() and not (textkit_env.venv / "planted").exists()
    assert "pwned" not in Path("/etc/passwd").read_text()


# Where writes are size-limited. Docker's writable layer (overlay2 on ext4 here) can only be limited with
# XFS project quotas (`--storage-opt size=`), which this machine lacks: its testbed is a tmpfs volume of its
# own (sandbox/docker.py; docs/SECURITY.md says so).
LIMITED_PATHS = {"ns": ["/testbed", "/tmp"], "docker": ["/testbed", "/tmp"]}


async def test_disk_fill_stops_at_the_limit(iso_factory, textkit_env):
    async with await iso_factory.create(textkit_env, Limits(disk_mb=32)) as box:
        for path in LIMITED_PATHS[iso_factory.backend]:
            result = await box.exec(
                f"head -c 100000000 /dev/zero > {path}/big; echo rc=$?; du -sm {path}/big", timeout=60
            )
            assert "No space left on device" in result.output, (path, result.output)
            assert int(result.output.split()[-2]) <= 32
            assert (await box.exec(f"rm -f {path}/big; echo ok", timeout=10)).output == "ok\n"


async def test_fork_bomb_is_stopped_by_the_pids_limit(iso_factory, textkit_env):
    async with await iso_factory.create(textkit_env, Limits(pids=64)) as box:
        result = await box.exec("bomb() { bomb | bomb & }; bomb; sleep 2; echo survived", timeout=8)
        assert (
            result.timed_out
            or "Resource temporarily unavailable" in result.output
            or "retry" in result.output
        )
        # the sandbox recovers once the bomb's process group is gone
        await box.reset()
        assert (await box.exec("echo usable", timeout=10)).output == "usable\n"


async def test_memory_hog_is_killed_by_the_memory_limit(iso_factory, textkit_env):
    async with await iso_factory.create(textkit_env, Limits(memory_mb=128)) as box:
        result = await box.exec(
            'python3 -c \'x = bytearray(1024 * 1024 * 1024); print("ALLOC" "ATED")\'', timeout=60
        )
        assert "ALLOCATED" not in result.output
        assert result.returncode != 0
        assert (await box.exec("echo usable", timeout=10)).output == "usable\n"


async def test_other_sandboxes_are_invisible(iso_factory, textkit_env):
    async with await iso_factory.create(textkit_env) as a, await iso_factory.create(textkit_env) as b:
        await a.exec("echo secret-a > /testbed/mine; (sleep 30 &) ; echo started", timeout=10)
        mine = await a.exec("cat /testbed/mine; ps -eo args | grep -c '^sleep 30$'", timeout=10)
        assert mine.output == "secret-a\n1\n", "control: a sees its own file and process"
        seen = await b.exec("cat /testbed/mine; ps -eo args | grep -c '^sleep 30$'", timeout=10)
        assert "secret-a" not in seen.output and seen.output.strip().endswith("0")


async def test_future_history_and_gold_patch_are_unreachable(iso_factory, task_by_id, envs, cache_root):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    fixed_line = "if len(text) <= limit:"
    assert fixed_line in task.patch
    async with await iso_factory.create(env) as box:
        history = await box.exec(
            "git log --all --oneline | wc -l; git fsck --lost-found 2>/dev/null | wc -l", timeout=30
        )
        counts = history.output.split()
        assert counts[0] == "2" and counts[1] == "0", history.output
        # the gold patch is nowhere the agent can read (task files, the mirror, swe-rl's own package data)
        hunt = await box.exec(
            f"grep -rlF '{fixed_line}' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
            "2>/dev/null | head -5",
            timeout=120,
        )
        assert hunt.output.strip() == "", hunt.output
        assert (await box.exec(f"ls {cache_root} 2>&1", timeout=10)).returncode != 0 or "repos" not in (
            await box.exec(f"ls {cache_root}", timeout=10)
        ).output


async def test_home_directories_are_invisible(iso_factory, textkit_env, tmp_path):
    canary = Path.home() / f".swe-rl-canary-{tmp_path.name}"
    canary.write_text("host secret")
    try:
        async with await iso_factory.create(textkit_env) as box:
            found = await box.exec(
                f"cat {canary} 2>&1; find /root /home -mindepth 1 -maxdepth 4 2>/dev/null", timeout=30
            )
    finally:
        canary.unlink()
    assert "host secret" not in found.output
    bound = [str(p) for p in (textkit_env.python_prefix, textkit_env.venv) if p]
    for line in found.output.splitlines()[1:]:
        # only the env's own interpreter prefix (and the directories leading to it) may appear
        assert any(b.startswith(line + "/") or line.startswith(b) for b in bound), line


async def test_parent_environment_is_not_inherited(iso_factory, textkit_env, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value")
    async with await iso_factory.create(textkit_env) as box:
        env = (await box.exec("env; cat /proc/1/environ | tr '\\0' '\\n'", timeout=10)).output
        assert "sk-test-secret-value" not in env and "OPENAI_API_KEY" not in env


async def test_huge_output_does_not_grow_the_server(iso_factory, textkit_env):
    import resource

    async with await iso_factory.create(textkit_env, Limits(output_bytes=1_000_000)) as box:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = await box.exec("head -c 100000000 /dev/urandom | base64", timeout=120)
        grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        assert result.output_bytes > 100_000_000 and result.truncated
        assert "output capped at 1000000 bytes" in result.output
        assert grown_kb < 64 * 1024, f"server memory grew by {grown_kb} KiB"
