"""Install commands run in a cgroup of their own: a build that runs away stops at its limits, not the machine's.

astropy 3.1's setup.py, built in its venv, ran itself in a child without end; 400 processes deep the kernel's OOM
killer chose what to kill, and took the dataset run beside it. Each test runs the attack under the bound and,
as its control, the same command where the bound is out of its reach.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swe_rl.envs.build.install_tools import run_bounded
from swe_rl.sandbox.base import Limits

pytestmark = pytest.mark.ns  # root and a cgroup hierarchy

FORKS = "import os, time\nfor _ in range({n}):\n    if os.fork() == 0:\n        time.sleep(20)\n        os._exit(0)\nprint('started', flush=True)\n"


def run(tmp_path: Path, code: str, limits: Limits) -> tuple[int, str]:
    log = tmp_path / "build.log"
    with log.open("wb") as out:
        code_ = run_bounded([sys.executable, "-c", code], tmp_path, dict(os.environ), out, "t", limits)
    return code_, log.read_text(errors="replace")


def test_a_build_that_forks_without_end_stops_at_its_process_limit(tmp_path):
    bounded, said = run(tmp_path, FORKS.format(n=100), Limits(pids=32))
    assert (bounded != 0 and "BlockingIOError" in said) or "Resource temporarily unavailable" in said, said
    assert "reached 32 processes and could start no more" in said
    started, said = run(tmp_path, FORKS.format(n=100), Limits(pids=1024))  # the control: room for all of them
    assert started == 0 and "started" in said and "could start no more" not in said


def test_a_build_over_its_memory_is_killed_and_the_log_says_so(tmp_path):
    grab = "b = bytearray(400 * 1024 * 1024)\nb[::4096] = b'x' * len(b[::4096])\nprint('held', flush=True)\n"
    killed, said = run(tmp_path, grab, Limits(memory_mb=128))
    assert killed != 0 and "held" not in said and "ran over 128 MiB and was killed" in said, said
    held, said = run(tmp_path, grab, Limits(memory_mb=2048))  # the control
    assert held == 0 and "held" in said and "was killed" not in said


def test_what_a_build_leaves_running_is_killed_when_it_exits(tmp_path):
    mark = tmp_path / "alive"
    leave = f"import subprocess\nsubprocess.Popen(['bash', '-c', 'sleep 0.5; while :; do touch {mark}; sleep 0.2; done'])\n"
    assert run(tmp_path, leave, Limits())[0] == 0
    time.sleep(1.5)
    assert not mark.exists(), "a process the build left behind is still running"
    # the control: the same command outside any cgroup leaves it running
    stray = subprocess.Popen([sys.executable, "-c", leave], start_new_session=True)
    stray.wait()
    try:
        deadline = time.monotonic() + 5
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mark.exists()
    finally:
        subprocess.run(["pkill", "-f", f"touch {mark}"], check=False)


def test_builds_side_by_side_each_have_their_own_cgroup(tmp_path):
    """`env build -j 2` runs two builds' install commands at once in one process, each named after its temporary
    venv dir ("out"). A command's cgroup is its own: the first to end must not take the other's with it (they
    shared one, and the second's setup removed the first's, so installs died with -9 mid-run)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> tuple[int, str]:
        (tmp_path / str(i)).mkdir()
        log = tmp_path / str(i) / "build.log"
        with log.open("wb") as out:
            code = run_bounded(
                [sys.executable, "-c", f"import time; time.sleep({0.2 + i}); print('done', flush=True)"],
                tmp_path,
                dict(os.environ),
                out,
                "out",
                Limits(),
            )
        return code, log.read_text(errors="replace")

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(one, range(2)))
    assert results == [(0, "done\n"), (0, "done\n")], results


def test_a_cgroup_whose_name_is_taken_is_refused_and_the_others_processes_live():
    """The control of the test above, at the cgroup level: a second cgroup of a name in use is an error, and the
    first's processes are left alone (its setup failing used to remove -- kill -- what was there)."""
    from swe_rl.errors import SandboxError
    from swe_rl.sandbox.cgroups import SandboxCgroup

    first = SandboxCgroup("swe-rl-test-taken", Limits())

    def join() -> None:
        for path in first.procs_files:
            with open(path, "w") as procs:
                procs.write(str(os.getpid()))

    sleeper = subprocess.Popen(["sleep", "30"], preexec_fn=join)
    try:
        assert first.pids() == [sleeper.pid]
        with pytest.raises(SandboxError, match="cannot set up cgroup limits"):
            SandboxCgroup("swe-rl-test-taken", Limits())
        assert (
            sleeper.poll() is None and first.pids() == [sleeper.pid] and all(d.is_dir() for d in first.dirs)
        )
    finally:
        first.remove()
        sleeper.wait(timeout=10)
    assert sleeper.returncode == -9 and not any(d.exists() for d in first.dirs)  # remove() does kill its own
