"""An ns sandbox's reset in place (sandbox/reset.py): whatever a command left behind is gone, as after a fresh
create, while bubblewrap and the control shell stay. Every check carries its positive control: the leftover is
shown to exist before the reset, and the reset is shown to have happened in place (same bwrap pid, no
restart reason), so that no test passes because the sandbox was quietly restarted."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.sandbox.bwrap import MOUNTPOINT
from swe_rl.sandbox.ns import NsSandbox

pytestmark = pytest.mark.ns

# What a command can leave behind, each kind at least once.
DIRTY = r"""
echo edited >> README.md && echo new > NEW.txt && rm -f setup.cfg && git add -A && git commit -qm wip
echo junk > /tmp/junk && mkdir -p /tmp/d/e && echo x > /tmp/d/e/f && chmod 000 /tmp/d
echo shm > /dev/shm/seg
mkdir -p ~/.config && printf '[core]\n\tpager = planted\n' > ~/.gitconfig && echo x > ~/.config/planted
python3 - <<'EOF'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
assert libc.shmget(0, 4096, 0o1600) >= 0 and libc.semget(0x5e1, 1, 0o1600) >= 0 and libc.msgget(0x5e2, 0o1600) >= 0
EOF
sleep 1000 >/dev/null 2>&1 &
(setsid sh -c 'sleep 1001 >/dev/null 2>&1 &' &)
sh -c 'trap "" TERM HUP INT; exec sleep 1002' >/dev/null 2>&1 &
nohup sh -c 'while :; do echo again >> /tmp/again; sleep 0.01; done' >/dev/null 2>&1 &
chmod 700 /tmp
"""
LEFT = (
    "git status --porcelain; git log --oneline | wc -l; ls -A /tmp /dev/shm ~; stat -c %a /tmp ~; "
    "cat /proc/sysvipc/shm /proc/sysvipc/sem /proc/sysvipc/msg | grep -vc '^ *key'; "
    "ps -eo stat,args --no-headers | grep -c '^[^Z]*sleep 100[012]$'; ps -eo stat --no-headers | grep -c Z"
)
# The state a command starts in: a fresh sandbox's and a reset one's must be the same (ps last, without a
# pipe: no fork of the command's own races it).
STATE = "pwd; umask; ulimit -a; env | sort; trap; ps -eo stat,args --no-headers"


def _ns(box: object) -> NsSandbox:
    assert isinstance(box, NsSandbox)
    return box


def _tmpfs(box: NsSandbox) -> Path:
    """The sandbox's private tmpfs, seen from the host through bwrap's mount namespace."""
    return Path(f"/proc/{box.bwrap_pid}/root{MOUNTPOINT}")


async def _built_ahead(tmpfs: Path, layer: int) -> None:
    """Until the reset worker has built overlay ``layer`` ahead (its tmpfs's directories exist, empty)."""
    for _ in range(500):
        if all((tmpfs / f"layer.{layer}" / name).is_dir() for name in ("upper", "work")):
            assert os.listdir(tmpfs / f"layer.{layer}" / "upper") == []
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"overlay {layer} was not built ahead: {sorted(os.listdir(tmpfs))}")


def _worker_holds() -> int:
    """How many sandboxes the reset worker holds an overlay built ahead for (a pidfd of each one's bwrap)."""
    from swe_rl.sandbox.spawner import spawner

    pidfd = spawner()._reset_pidfd
    assert pidfd is not None, "the reset worker runs"
    fdinfo = Path(f"/proc/self/fdinfo/{pidfd}").read_text()
    worker = int(next(line for line in fdinfo.splitlines() if line.startswith("Pid:")).split()[1])
    links = []
    for fd in os.listdir(f"/proc/{worker}/fd"):
        with contextlib.suppress(FileNotFoundError):  # closed meanwhile
            links.append(os.readlink(f"/proc/{worker}/fd/{fd}"))
    return links.count("anon_inode:[pidfd]")


async def _until_holds(expected: int) -> int:
    """What the worker holds once it is ``expected`` (a reset's own pidfds close after the next overlay is
    built), or after 5 s."""
    for _ in range(500):
        if (held := _worker_holds()) == expected:
            break
        await asyncio.sleep(0.01)
    return held


async def test_the_next_overlay_is_built_ahead_then_taken_dropped_or_let_go(textkit_env, envs, task_by_id):
    """Which layer is which: each layer's upper is a tmpfs of its own, and the host marks the one built ahead
    (a file beside its upper and work directories, which the sandbox never sees): a layer dropped and built
    again under the same name has no mark."""
    other = envs.ensure(task_by_id["swe-rl-builtin__statkit-2"])
    box = _ns(await available_factory("ns").create(textkit_env))
    try:
        await box.reset()  # the worker's first: it builds overlay 2 ahead after answering
        tmpfs = _tmpfs(box)
        await _built_ahead(tmpfs, 2)
        await asyncio.sleep(0.1)  # the worker has closed the reset's own handles
        held = _worker_holds()
        assert (tmpfs / "layer.2").stat().st_dev != tmpfs.stat().st_dev, "a tmpfs of its own"
        (tmpfs / "layer.2" / "mark").write_text("built ahead")
        # no path in the sandbox leads to the layers (the host sees them: the control)
        found = await box.exec("find / -name 'layer.[0-9]*' 2>/dev/null", timeout=60)
        assert found.output.strip() == "" and (tmpfs / "layer.2" / "upper").is_dir()

        await box.exec("echo junk >> README.md; echo t > /tmp/t", timeout=10)
        await box.reset()  # takes it
        assert box.restart_reason is None and (tmpfs / "layer.2" / "mark").exists()
        assert await box.diff() == "" and (await box.exec("test -e /tmp/t", timeout=10)).returncode != 0
        assert (
            f"upperdir={MOUNTPOINT}/layer.2/upper,"
            in (await box.exec("cat /proc/self/mountinfo", timeout=10)).output
        )

        await _built_ahead(tmpfs, 3)
        (tmpfs / "layer.3" / "mark").write_text("built ahead")
        await box.reset(env=other)  # built ahead for textkit's testbed: dropped, and statkit's built
        assert box.restart_reason is None and not (tmpfs / "layer.3" / "mark").exists()
        assert (await box.exec("ls -d statkit", timeout=10)).returncode == 0
        await _built_ahead(tmpfs, 4)
        assert await _until_holds(held) == held, "one overlay ahead for the sandbox, whatever happened before"
    finally:
        await box.close()
    # its bwrap has exited: the worker lets its overlay (and so its tmpfs) go
    assert await _until_holds(held - 1) == held - 1


async def test_reset_in_place_leaves_nothing_behind(textkit_env):
    factory = available_factory("ns")
    async with await factory.create(textkit_env) as fresh:
        pristine = (await fresh.exec(LEFT, timeout=10)).output
        fresh_state = (await fresh.exec(STATE, timeout=10)).output
    async with await factory.create(textkit_env) as created:
        box = _ns(created)
        bwrap = box.bwrap_pid
        result = await box.exec(DIRTY, timeout=30)
        assert result.returncode == 0, result.output
        await asyncio.sleep(0.1)
        dirty = (await box.exec(LEFT, timeout=10)).output
        # control: every leftover is there (the repo, /tmp, /dev/shm, 3 IPC objects, the 3 sleeps)
        assert "NEW.txt" not in dirty and "junk" in dirty and "seg" in dirty and "\n700\n700\n" in dirty
        assert (
            ".gitconfig" in dirty
            and "planted" in (await box.exec("git config core.pager", timeout=10)).output
        )
        assert dirty.split()[-3:] == ["3", "3", "0"], dirty
        assert "wip" in (await box.exec("git log -1 --format=%s", timeout=10)).output

        await box.reset()

        assert (box.generation, box.restart_reason, box.bwrap_pid) == (1, None, bwrap), "reset in place"
        # the new upper layer holds nothing (git writes its index at the first status), the old one is removed
        tmpfs = _tmpfs(box)
        assert os.listdir(tmpfs / "layer.1" / "upper") == []
        await _built_ahead(tmpfs, 2)  # the next reset's layer (reset_worker.py)
        assert sorted(os.listdir(tmpfs)) == ["b", "ctl", "home", "layer.1", "layer.2", "shm", "tmp"]
        assert (await box.exec(LEFT, timeout=10)).output == pristine
        assert (await box.exec(STATE, timeout=10)).output == fresh_state
        assert await box.diff() == ""
        readme = (textkit_env.testbed / "README.md").read_text()
        assert (await box.exec("cat README.md", timeout=10)).output == readme
        await asyncio.sleep(0.05)
        assert (await box.exec("ls /tmp/again", timeout=10)).returncode != 0, "the writer is gone"


async def test_a_reset_to_another_env_of_the_runtime_is_that_envs_fresh_sandbox(
    textkit_env, envs, task_by_id
):
    other = envs.ensure(task_by_id["swe-rl-builtin__statkit-2"])  # another library: its own testbed, one venv
    assert other.runtime() == textkit_env.runtime() and other.testbed != textkit_env.testbed
    head = "git rev-parse HEAD; ls -A; cat stat*/__init__.py text*/__init__.py 2>/dev/null | md5sum"
    factory = available_factory("ns")
    async with await factory.create(other) as fresh:
        pristine = (await fresh.exec(f"{LEFT}; {head}", timeout=10)).output
        fresh_state = (await fresh.exec(STATE, timeout=10)).output
    async with _ns(await factory.create(textkit_env)) as box:
        bwrap = box.bwrap_pid
        # control: the sandbox shows textkit's tree, not statkit's
        assert (await box.exec(f"{LEFT}; {head}", timeout=10)).output != pristine
        assert (await box.exec(DIRTY, timeout=30)).returncode == 0
        await asyncio.sleep(0.1)

        await box.reset(env=other)

        assert (box.restart_reason, box.bwrap_pid, box.env) == (None, bwrap, other), "in place, now statkit's"
        assert (await box.exec(f"{LEFT}; {head}", timeout=10)).output == pristine
        assert (await box.exec(STATE, timeout=10)).output == fresh_state
        assert await box.diff() == ""
        # a later reset without an env keeps statkit's testbed (not the one bwrap was started with)
        assert (await box.exec(DIRTY, timeout=30)).returncode == 0
        await box.reset()
        assert (box.restart_reason, box.bwrap_pid) == (None, bwrap)
        assert (await box.exec(f"{LEFT}; {head}", timeout=10)).output == pristine
        # and so does a restart
        await box.reset(in_place=False)
        assert box.bwrap_pid != bwrap and (await box.exec(f"{LEFT}; {head}", timeout=10)).output == pristine
        # an env of another runtime: its venv is not bound, so no reset can give it
        with pytest.raises(ValueError, match="runtime"):
            await box.reset(env=other.model_copy(update={"venv": other.testbed}))
        assert box.env == other and await box.diff() == ""


async def test_a_testbed_path_overlayfs_would_misread_is_reset_to_by_a_restart(textkit_env, tmp_path):
    """overlayfs reads ':' in a lowerdir as a layer separator: another env's testbed at ``.../a:/.../real``
    would be built as the union of ``.../a`` and ``.../real``. The control: the reset's worker given that
    path shows the decoys' union; ``reset(env=...)`` restarts bubblewrap instead (its bind takes any path)."""
    import shutil

    from swe_rl.sandbox.reset import reset_in_place

    decoy, real = tmp_path / "a", tmp_path / "real"
    for directory in (decoy, real):
        directory.mkdir()
        directory.chmod(0o755)
    (decoy / "DECOY").write_text("not the testbed\n")
    copy = Path(f"{decoy}:{real}")
    shutil.copytree(textkit_env.testbed, copy, symlinks=True)
    other = textkit_env.model_copy(update={"testbed": copy, "key": "textkit-copy"})
    listing = "ls -A | sort | tr '\\n' ' '"
    async with _ns(await available_factory("ns").create(textkit_env)) as box:
        pristine = (await box.exec(listing, timeout=10)).output
        assert "README.md" in pristine and "DECOY" not in pristine
        proc, cgroup = box._proc, box._cgroup
        assert proc is not None and cgroup is not None
        await reset_in_place(cgroup, proc, textkit_env.workdir, 99, (), str(copy), old=0, limits=box.limits)
        assert (await box.exec(listing, timeout=10)).output.split() == ["DECOY"]  # the control

        bwrap = box.bwrap_pid
        await box.reset(env=other)
        assert box.restart_reason is not None and "overlayfs" in box.restart_reason
        assert box.bwrap_pid != bwrap and box.env == other
        assert (await box.exec(listing, timeout=10)).output == pristine and await box.diff() == ""


async def test_reset_keeps_mounts_under_tmp(textkit_env):
    """The env cache of this test session lies under /tmp: the venv is bound below the sandbox's /tmp."""
    if textkit_env.venv is None or not textkit_env.venv.is_relative_to("/tmp"):
        pytest.skip("the session's env cache is not under /tmp (TMPDIR is elsewhere): no mount under /tmp")
    probe = f"{textkit_env.venv}/bin/python -c 'print(1 + 1)'"
    async with _ns(await available_factory("ns").create(textkit_env)) as box:
        parent = textkit_env.venv.parent
        await box.exec(f"echo junk > /tmp/junk; echo junk > {parent}/junk", timeout=10)
        assert (await box.exec(f"cat {parent}/junk", timeout=10)).output == "junk\n"
        for _ in range(3):
            await box.reset()
            assert box.restart_reason is None
            assert (await box.exec(probe, timeout=30)).output == "2\n"
            assert (await box.exec(f"ls /tmp/junk {parent}/junk", timeout=10)).returncode != 0


async def test_reset_restores_the_shells_scheduling(textkit_env):
    async with _ns(await available_factory("ns").create(textkit_env)) as box:
        assert box._proc is not None
        shell = box._shell_pid(box._proc)
        # a command runs as the shell's uid: it may lower the shell's priority and narrow its CPUs
        await box.exec("python3 -c 'import os; os.setpriority(os.PRIO_PROCESS, 1, 19)'", timeout=10)
        assert os.getpriority(os.PRIO_PROCESS, shell) == 19, "control: the command reached the shell"
        await box.reset()
        assert box.restart_reason is None
        assert os.getpriority(os.PRIO_PROCESS, shell) == os.getpriority(os.PRIO_PROCESS, box.bwrap_pid or 0)
        # the sandbox starts at this process's niceness (the suite may run under `nice`), and goes back to it
        assert (await box.exec("nice", timeout=10)).output == f"{os.nice(0)}\n"


async def test_posix_message_queues_are_denied(textkit_env):
    call = (
        "import ctypes, os; rt = ctypes.CDLL('librt.so.1', use_errno=True); "
        "q = rt.mq_open(b'/swe-rl-{}', os.O_CREAT | os.O_RDWR, 0o600, None); "
        "print(q, ctypes.get_errno()); q >= 0 and rt.mq_unlink(b'/swe-rl-{}')"
    )
    # control: the call works on this host (then the queue is removed)
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
    name = f"/swe-rl-{os.getpid()}".encode()
    assert rt.mq_open(name, os.O_CREAT | os.O_RDWR, 0o600, None) >= 0
    rt.mq_unlink(name)
    async with await available_factory("ns").create(textkit_env) as box:
        result = await box.exec(f'python3 -c "{call.format(1, 1)}"', timeout=10)
        assert result.output.split() == ["-1", str(errno.EPERM)], result.output


async def test_dev_is_read_only_but_its_devices_work(textkit_env):
    async with await available_factory("ns").create(textkit_env) as box:
        result = await box.exec(
            "echo x > /dev/null && head -c 3 /dev/zero | wc -c && touch /dev/shm/ok && echo shm-ok; "
            "touch /dev/evil; mkdir /dev/dir; ls /dev/evil /dev/dir",
            timeout=10,
        )
        assert "3\nshm-ok\n" in result.output, "control: devices and /dev/shm are usable"
        assert result.output.count("Read-only file system") == 2, result.output
        assert "No such file" in result.output


async def test_reset_falls_back_to_a_restart_when_in_place_fails(textkit_env):
    async with _ns(await available_factory("ns").create(textkit_env)) as box:
        bwrap = box.bwrap_pid
        await box.exec("echo junk > junk.txt; echo t > /tmp/t; sleep 1000 >/dev/null 2>&1 &", timeout=10)
        # something in the way of the next layer's directory: the in-place reset cannot build it
        (_tmpfs(box) / "layer.1").write_text("in the way")
        await box.reset()
        assert box.restart_reason is not None and "File exists" in box.restart_reason, box.restart_reason
        assert box.bwrap_pid != bwrap and box.generation == 1
        state = await box.exec("ls junk.txt /tmp/t; ps -eo args | grep -c '^sleep 1000$'", timeout=10)
        assert "No such file" in state.output and state.output.endswith("0\n"), state.output
        assert await box.diff() == ""
        # the next reset is in place again
        await box.exec("echo junk > junk.txt", timeout=10)
        bwrap = box.bwrap_pid
        await box.reset()
        assert (box.restart_reason, box.bwrap_pid, box.generation) == (None, bwrap, 2)
        assert await box.diff() == ""


async def test_reset_restarts_a_sandbox_whose_shell_died(textkit_env):
    async with _ns(await available_factory("ns").create(textkit_env)) as box:
        assert box._proc is not None
        os.kill(box._shell_pid(box._proc), signal.SIGKILL)
        await asyncio.sleep(0.05)
        await box.reset()
        assert box.restart_reason is not None
        assert (await box.exec("echo back", timeout=10)).output == "back\n"


async def test_a_dead_reset_worker_means_one_restart_then_a_new_worker(textkit_env):
    from swe_rl.sandbox.spawner import spawner

    async with _ns(await available_factory("ns").create(textkit_env)) as box:
        await box.reset()
        assert box.restart_reason is None
        worker = spawner()._reset_pidfd
        assert worker is not None, "control: the reset went through the worker"
        signal.pidfd_send_signal(worker, signal.SIGKILL)
        await box.exec("echo junk > junk.txt", timeout=10)
        await box.reset()
        assert box.restart_reason is not None and "worker" in box.restart_reason, box.restart_reason
        assert await box.diff() == ""
        await box.exec("echo junk > junk.txt", timeout=10)
        await box.reset()
        assert box.restart_reason is None and await box.diff() == ""


@pytest.mark.parametrize("rounds", [20])
async def test_many_resets_in_place_stay_pristine(textkit_env, rounds):
    check = "ls -A /tmp /dev/shm; ps -e --no-headers | wc -l"
    async with _ns(await available_factory("ns").create(textkit_env)) as box:
        pristine = (await box.exec(check, timeout=10)).output
        bwrap = box.bwrap_pid
        for i in range(rounds):
            await box.exec(f"echo {i} >> README.md; echo {i} > /tmp/{i}; sleep 100 &", timeout=10)
            await box.reset()
            assert box.restart_reason is None
        assert box.bwrap_pid == bwrap and box.generation == rounds
        assert (await box.exec(check, timeout=10)).output == pristine
        assert await box.diff() == ""
        await _built_ahead(_tmpfs(box), rounds + 1)
        layers = [name for name in os.listdir(_tmpfs(box)) if name.startswith("layer")]
        assert sorted(layers) == [f"layer.{rounds}", f"layer.{rounds + 1}"]


def test_resets_from_loops_in_two_threads_share_the_worker(textkit_env):
    """One reset worker per process, taken in turn by every event loop that resets (a trainer may run one
    in a thread of its own): resets from two threads at once all happen in place and leave nothing."""
    factory = available_factory("ns")

    async def churn(rounds: int) -> list[str | None]:
        async with _ns(await factory.create(textkit_env)) as box:
            reasons = []
            for i in range(rounds):
                await box.exec(f"echo {i} >> README.md; echo {i} > /tmp/{i}; sleep 100 &", timeout=10)
                await box.reset()
                reasons.append(box.restart_reason)
                left = await box.exec("git status --porcelain; ls -A /tmp | grep -c '^[0-9]'", timeout=10)
                assert left.output.strip() == "0", left.output
            return reasons

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: asyncio.run(churn(15)), range(2)))
    assert results == [[None] * 15] * 2, results
