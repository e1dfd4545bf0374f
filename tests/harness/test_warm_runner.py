"""The warm test runner (harness/warm.py): forked runs give the cold runs' logs and verdicts, and a run that
could differ, or a server a test run tampered with, falls back to the cold command. Real ns sandboxes."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import re
import shlex
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.harness import warm
from swe_rl.harness.grade_patch import grade_in
from swe_rl.harness.official import parse_test_log, parser_name
from swe_rl.harness.verdict import Verdict
from swe_rl.sandbox.base import Sandbox
from swe_rl.tasks.model import Task

pytestmark = pytest.mark.ns

_DURATION = re.compile(r"\d+\.\d+s")
# pytest's own lines: the header, the progress, each test's status, the totals (a failure's values can
# differ between two cold runs: string hashing is randomized per interpreter)
_PYTEST_LINE = re.compile(
    r"^(platform |rootdir|configfile|collected |collecting|\S+\.py [.FEsxX]+|(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) |=+ |>>>>> )"
)


def _log(verdict: Verdict) -> list[str]:
    """pytest's own lines of the test output, durations aside."""
    return [
        _DURATION.sub("<t>", line) for line in verdict.test_output.splitlines() if _PYTEST_LINE.match(line)
    ]


def _textkit_box(task_by_id, envs):  # type: ignore[no-untyped-def]
    """A fresh ns sandbox of textkit's env (the tests below plant their files in it): ``async with await``."""
    return available_factory("ns").create(envs.ensure(task_by_id["swe-rl-builtin__textkit-3"]))


async def _started(box, **options) -> tuple[warm.WarmRunner, str]:  # type: ignore[no-untyped-def]
    """A runner started in ``box`` (armed for its one run) and the client command that stands for
    `python -m pytest` in that run."""
    runner = await warm.start(box, box.env.workdir, **options)
    assert runner is not None, "the env's Python imports pytest: the server starts"
    assert runner.address, "armed for its one run"
    command = warm.hook("python -m pytest", runner)
    assert command
    return runner, command


async def _gone(box: Sandbox, runner: warm.WarmRunner) -> bool:
    """Whether ``runner``'s server has left (waited for while it is still on its way out)."""
    for _ in range(600):
        if not await runner.alive(box):
            return True
        await asyncio.sleep(0.05)
    return False


@contextlib.asynccontextmanager
async def _with_tests(
    task_by_id, envs, name: str, source: str
) -> AsyncIterator[tuple[Sandbox, warm.WarmRunner, str]]:  # type: ignore[no-untyped-def]
    """A textkit sandbox with a started runner and ``source`` as ``tests/<name>``: the box, the runner and the
    client command that stands for `python -m pytest` (for one run)."""
    async with await _textkit_box(task_by_id, envs) as box:
        runner, command = await _started(box)
        await box.write_file(f"tests/{name}", source.encode())
        yield box, runner, command


async def _both(task: Task, patch: str | None, envs, *, timeout: float = 120) -> tuple[Verdict, Verdict]:  # type: ignore[no-untyped-def]
    """The same grading cold and through a warm runner, each in a fresh sandbox."""
    factory = available_factory("ns")
    env = envs.ensure(task)
    async with await factory.create(env) as box:
        cold = await grade_in(box, task, patch, timeout=timeout)
    async with await factory.create(env) as box:
        runner = await warm.start(box, box.env.workdir)
        assert runner is not None, "the env's Python imports pytest: the server starts"
        hot = await grade_in(box, task, patch, timeout=timeout, runner=runner)
    return cold, hot


async def test_every_builtin_task_grades_the_same_forked(tasks, envs):
    """Gold and empty patch of every builtin task: same status, same per-test statuses, same log."""
    for task in tasks:
        for patch in (task.patch, None):
            cold, hot = await _both(task, patch, envs)
            assert cold.test_runner == "" and hot.test_runner == "forked", (task.instance_id, hot.test_runner)
            assert (hot.status, hot.resolved, hot.tests_status) == (
                cold.status,
                cold.resolved,
                cold.tests_status,
            )
            parser = parser_name(task)
            assert parse_test_log(hot.test_output, parser) == parse_test_log(cold.test_output, parser)
            assert parse_test_log(hot.test_output, parser), (
                "the log parses to tests (not an empty comparison)"
            )
            assert _log(hot) == _log(cold), task.instance_id
            assert warm.RUNNER_MARK not in hot.test_output, "the runner's line is not part of the log"


# A patch that adds a module named like one the server preloaded, at the root of a `python -m pytest` run
# (the working directory is first on sys.path): a cold run imports the patch's file, a forked one would not.
SHADOW = """diff --git a/pytest.py b/pytest.py
new file mode 100644
--- /dev/null
+++ b/pytest.py
@@ -0,0 +1,3 @@
+import sys
+print("SHADOWED-PYTEST")
+sys.exit(5)
"""


async def test_a_patch_that_shadows_a_preloaded_module_runs_cold(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    assert task.test_cmd and task.test_cmd.startswith("python -m pytest")
    cold, hot = await _both(task, SHADOW + task.patch, envs)
    # the positive control: run as written, the patch's pytest.py is what runs
    assert "SHADOWED-PYTEST" in cold.test_output and "Test Exit Code: 5" in cold.test_output
    assert hot.test_runner == "cold module pytest would load from elsewhere"
    assert _log(hot) == _log(cold) and hot.status == cold.status == "unparseable_log"


async def test_another_start_up_setting_runs_cold(task_by_id, envs):
    """PYTHONHASHSEED (like every PYTHON*, LC_* and LANG variable) acts when an interpreter starts."""
    async with await _textkit_box(task_by_id, envs) as box:
        _, command = await _started(box)
        probe = "-q -p no:cacheprovider tests >/dev/null; cat $swe_rl_runner_note"
        same = await box.exec(f"swe_rl_runner_note=/tmp/n; {command} {probe}", timeout=120)
        assert same.output.strip() == "forked", same.output
        _, command = await _started(box)  # a runner serves one run: the next one has its own
        other = await box.exec(f"swe_rl_runner_note=/tmp/n; PYTHONHASHSEED=7 {command} {probe}", timeout=120)
        assert other.output.strip() == "cold start-up setting PYTHONHASHSEED differs", other.output


HASH_PRINT = """def test_print_hash():
    print("HASH", hash("swe-rl-hash-probe"))
"""


async def test_a_runner_serves_one_run_and_each_run_draws_its_own_hash_secret(task_by_id, envs):
    """The string-hash secret is drawn when an interpreter starts and a forked child keeps it: a server that
    forked every run would give them all one secret. Each run gets a new server (grade_many.py launches
    one after each reset), which serves it and leaves."""
    async with _with_tests(task_by_id, envs, "test_hash.py", HASH_PRINT) as (box, runner, command):
        # the positive control: a forked process hashes as its parent does
        fork = (
            "import os; h = hash('swe-rl-hash-probe'); pid = os.fork()\n"
            "if pid == 0: print('same' if hash('swe-rl-hash-probe') == h else 'other')\n"
            "else: os.waitpid(pid, 0)"
        )
        forked = await box.exec(f"python -c {shlex.quote(fork)}", timeout=60)
        assert forked.output.strip() == "same", forked.output
        run = "-s -p no:cacheprovider tests/test_hash.py; cat /tmp/n"
        values = []
        for turn in range(3):
            if turn:
                runner, command = await _started(box)
            result = await box.exec(f"swe_rl_runner_note=/tmp/n; {command} {run}", timeout=120)
            assert result.output.rstrip().endswith("forked"), result.output
            values += re.findall(r"HASH (-?\d+)", result.output)
            # its one run over, the server has left: its address serves nothing again
            assert await _gone(box, runner)
            again = await box.exec(f"swe_rl_runner_note=/tmp/n; {command} {run}", timeout=120)
            assert "cold (no server:" in again.output, again.output
        assert len(values) == 3 and len(set(values)) == 3, values


# Test files a patch's test run could use against the server that outlives it.
TAMPER = """import os, signal, socket, struct

def server():
    if os.path.exists("/tmp/target"):  # the control: another process of the sandbox
        return int(open("/tmp/target").read())
    for pid in os.listdir("/proc"):
        if pid.isdigit() and pid != str(os.getpid()):
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            except OSError:
                continue
            if b"SWE_RL_WARM" in cmd or b"warm test runner's server" in cmd:
                return int(pid)

def test_read_its_memory():
    pid = server()
    start = int(open(f"/proc/{pid}/maps").readline().split("-")[0], 16)
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(start)
        assert mem.read(1)

def test_read_its_environment():
    assert open(f"/proc/{server()}/environ", "rb").read()
"""


async def test_a_test_run_cannot_read_or_trace_the_server(task_by_id, envs):
    async with await _textkit_box(task_by_id, envs) as box:
        runner, command = await _started(box)
        await box.write_file("tests/test_tamper.py", TAMPER.encode())
        result = await box.exec(
            f"swe_rl_runner_note=/tmp/n; {command} -rA -p no:cacheprovider tests/test_tamper.py; cat /tmp/n",
            timeout=120,
        )
        assert result.output.rstrip().endswith("forked"), result.output
        statuses = parse_test_log(result.output)
        assert statuses == {
            "tests/test_tamper.py::test_read_its_memory": "FAILED",
            "tests/test_tamper.py::test_read_its_environment": "FAILED",
        }, result.output
        assert result.output.count("PermissionError") >= 2, result.output
        assert await _gone(box, runner), "the server served its run and left, untouched"
        # the positive control: the same tests against a dumpable process of the sandbox succeed
        await box.exec("sleep 300 & echo $! > /tmp/target", timeout=10)
        result = await box.exec("python -m pytest -rA -p no:cacheprovider tests/test_tamper.py", timeout=120)
        assert set(parse_test_log(result.output).values()) == {"PASSED"}, result.output


async def test_a_killed_or_impersonated_server_means_cold_runs(task_by_id, envs):
    async with await _textkit_box(task_by_id, envs) as box:
        runner, command = await _started(box)
        killed = await box.exec(
            f"kill -KILL {runner.pid} && while [ -e /proc/{runner.pid} ]; do sleep 0.05; done", timeout=10
        )
        assert killed.returncode == 0 and not await runner.alive(box)
        # an impersonator on the server's address answers every run "passed" without running it
        fake = (
            "import socket,os\n"
            "s=socket.socket(socket.AF_UNIX); s.bind('\\0'+os.environ['A']); s.listen(4)\n"
            "print(os.getpid(), flush=True)\n"
            "while True:\n"
            "    c,_=s.accept()\n"
            "    try:\n"
            "        n=int.from_bytes(c.recv(4),'big')\n"
            "        while n>0: n-=len(c.recv(n) or b'x'*n)\n"
            "        c.sendall(b'forked 1\\nexit 0\\n')\n"
            "    except OSError: pass\n"
            "    c.close()\n"
        )
        started = await box.exec(
            f"A={runner.address} setsid python -c {shlex.quote(fake)} > /tmp/fake.pid 2>&1 & "
            "for i in $(seq 100); do [ -s /tmp/fake.pid ] && break; sleep 0.1; done; cat /tmp/fake.pid",
            timeout=30,
        )
        fake_pid = int(started.output.split()[0])
        run = "-rA -p no:cacheprovider tests; echo rc=$?; cat /tmp/n"
        result = await box.exec(f"swe_rl_runner_note=/tmp/n; {command} {run}", timeout=120)
        assert "cold (no server: the socket is not the server's)" in result.output
        assert parse_test_log(result.output), "the tests really ran, cold"
        # the positive control: a client told the impersonator's pid (and start time) believes it, and no
        # test runs
        impostor = _told(runner, pid=fake_pid, start_ticks=await _start_ticks(box, fake_pid))
        believing = warm.hook("python -m pytest", impostor)
        assert believing
        result = await box.exec(f"swe_rl_runner_note=/tmp/n; {believing} {run}", timeout=120)
        assert "rc=0" in result.output and "forked" in result.output and not parse_test_log(result.output)


async def test_a_stopped_server_is_not_alive_and_the_host_reads_what_the_sandbox_reads(task_by_id, envs):
    async with await _textkit_box(task_by_id, envs) as box:
        runner, _ = await _started(box)
        assert await runner.ready(), "its imports done: it waits (S) for its one connection"
        for signal_name, alive in (("STOP", False), ("CONT", True)):
            sent = await box.exec(f"kill -{signal_name} {runner.pid}; sleep 0.2", timeout=10)
            assert sent.returncode == 0, sent.output
            # the ns backend reads the state from the host; a command in the sandbox reads the same
            inside = await box.exec(f"cat /proc/{runner.pid}/stat", timeout=10)
            fields = inside.output.rpartition(")")[2].split()
            assert await warm.process_state(box, runner.pid) == (fields[0], int(fields[19])), inside.output
            assert fields[0] == ("T" if signal_name == "STOP" else "S")
            assert await runner.alive(box) is alive
        assert await warm.process_state(box, 99999) is None


async def test_a_timed_out_run_is_killed_and_the_next_runner_forks(task_by_id, envs):
    async with await _textkit_box(task_by_id, envs) as box:
        runner, command = await _started(box)
        await box.write_file("tests/test_hang.py", b"import time\n\ndef test_hang():\n    time.sleep(600)\n")
        hung = await box.exec(
            f"swe_rl_runner_note=/tmp/n; {command} -p no:cacheprovider tests/test_hang.py", timeout=3
        )
        assert hung.timed_out
        left = await box.exec("ps -eo pid,args | grep test_hang | grep -v grep || true", timeout=10)
        assert left.output.strip() == "", left.output
        assert await _gone(box, runner), "its use over, the server left"
        await box.exec("rm tests/test_hang.py", timeout=10)
        task = task_by_id["swe-rl-builtin__textkit-3"]
        runner, _ = await _started(box)
        verdict = await grade_in(box, task, None, timeout=120, runner=runner)
        assert verdict.test_runner == "forked" and verdict.status == "unresolved"


@pytest.mark.parametrize("signum", [9, 11])
async def test_a_run_killed_by_a_signal_exits_as_the_cold_one(signum, task_by_id, envs):
    suicide = f"import os\n\ndef test_die():\n    os.kill(os.getpid(), {signum})\n"
    async with _with_tests(task_by_id, envs, "test_die.py", suicide) as (box, _runner, command):
        run = "-p no:cacheprovider tests/test_die.py >/dev/null 2>&1; echo rc=$?"
        cold = await box.exec(f"python -m pytest {run}", timeout=60)
        hot = await box.exec(f"swe_rl_runner_note=/tmp/n; {command} {run}; cat /tmp/n", timeout=60)
        assert f"rc={128 + signum}" in cold.output
        assert f"rc={128 + signum}" in hot.output and "forked" in hot.output


# What a process does on its way out after pytest's summary: a thread that is not a daemon prints later, an
# atexit callback prints, and stdout holds unflushed text. The forked run leaves without tearing its modules
# down (warm_server.leave) but must still do these, as a cold run's shutdown does.
AT_EXIT = """import atexit, sys, threading, time

class Loud:
    def __del__(self):
        print("MODULE-TEARDOWN")


KEPT = Loud()  # its __del__ runs when the interpreter tears the modules down


def test_leaves_work_for_the_exit():
    atexit.register(print, "ATEXIT-RAN")
    threading.Thread(target=lambda: (time.sleep(0.5), print("THREAD-FINISHED"))).start()
    sys.stdout = open(1, "w", closefd=False)  # block-buffered: a file, not a terminal
    sys.stdout.write("UNFLUSHED-AT-EXIT")
"""


async def test_a_forked_run_exits_as_the_cold_one_threads_atexit_and_buffers(task_by_id, envs):
    async with _with_tests(task_by_id, envs, "test_at_exit.py", AT_EXIT) as (box, _runner, command):
        # the positive control: a process that only calls os._exit loses all three
        naive = await box.exec(
            'python -c \'import atexit, os, sys, threading, time; atexit.register(print, "ATEXIT-RAN"); '
            'threading.Thread(target=lambda: (time.sleep(0.5), print("THREAD-FINISHED"))).start(); '
            'sys.stdout = open(1, "w", closefd=False); sys.stdout.write("UNFLUSHED-AT-EXIT"); os._exit(0)\'; '
            "echo rc=$?",
            timeout=60,
        )
        assert naive.output.strip() == "rc=0", naive.output
        run = "-s -p no:cacheprovider tests/test_at_exit.py; echo rc=$?"
        cold = await box.exec(f"python -m pytest {run}", timeout=60)
        hot = await box.exec(f"swe_rl_runner_note=/tmp/n; {command} {run}; cat /tmp/n", timeout=60)
        assert hot.output.rstrip().endswith("forked"), hot.output
        for result in (cold, hot):
            summary = result.output.index(" passed")
            assert result.output.index("THREAD-FINISHED") > summary, result.output
            assert result.output.index("ATEXIT-RAN") > result.output.index("THREAD-FINISHED"), result.output
            assert "UNFLUSHED-AT-EXIT" in result.output and "rc=0" in result.output, result.output
        # the one difference, documented (warm_server.leave): the forked run does not tear the modules down,
        # so what a __del__ prints then is missing; it also shows the run took that way out
        assert "MODULE-TEARDOWN" in cold.output and "MODULE-TEARDOWN" not in hot.output
        assert [line for line in _tail(cold.output) if line != "MODULE-TEARDOWN"] == _tail(hot.output)


def _tail(output: str) -> list[str]:
    """What comes after pytest's summary line (the rest of the line shows a time that differs)."""
    lines = output.splitlines()
    end = next(i for i, line in enumerate(lines) if " passed" in line)
    return [line for line in lines[end + 1 :] if line != "forked"]


LOWER = """import os, resource
from test_tamper import server

def test_lower_its_priority():
    os.setpriority(os.PRIO_PROCESS, server(), 19)

def test_lower_its_limits():
    resource.prlimit(server(), resource.RLIMIT_NOFILE, (64, 64))
"""


@pytest.mark.parametrize("attack", ["test_lower_its_priority", "test_lower_its_limits"])
async def test_a_server_whose_limits_a_command_changed_runs_the_tests_cold(attack, task_by_id, envs):
    """A command of the grading (an eval script's step before pytest) may lower the server's niceness or limits
    (same uid) before the test run comes; a forked child would inherit them, a cold run would not."""
    async with _with_tests(task_by_id, envs, "test_tamper.py", TAMPER) as (box, _runner, command):
        await box.write_file("tests/test_lower.py", LOWER.encode())
        # the attack, run cold beside the armed server: it finds the server and lowers it (live: passes)
        lowered = await box.exec(
            f"python -m pytest -rA -p no:cacheprovider tests/test_lower.py::{attack}", timeout=120
        )
        assert parse_test_log(lowered.output) == {f"tests/test_lower.py::{attack}": "PASSED"}, lowered.output
        run = "-rA -p no:cacheprovider tests/test_words.py; cat /tmp/n"
        after = await box.exec(f"swe_rl_runner_note=/tmp/n; {command} {run}", timeout=120)
        assert after.output.rstrip().endswith("cold the server's limits or scheduling were changed"), (
            after.output
        )
        assert parse_test_log(after.output), "the tests ran, cold"


async def test_a_server_that_imported_the_repositorys_own_code_runs_everything_cold(task_by_id, envs):
    """pytest's own repository (SWE-bench's pytest-dev tasks) is what `import pytest` loads: a child forked
    after it would test the unpatched code. Here the repository's module comes in as a preloaded name."""
    async with await _textkit_box(task_by_id, envs) as box:
        on_path = {"PYTHONPATH": box.env.workdir}
        # the positive control: code imported before a fork is what the forked process runs, patch or not
        stale = await box.exec(
            "python -c 'import os, textkit.wrap as w; "
            'open("textkit/wrap.py", "a").write("\\ndef truncate(*a, **k):\\n    return \\"patched\\"\\n"); '
            "pid = os.fork(); "
            'print(w.truncate("hello", 5) if pid == 0 else ""); os.waitpid(pid, 0) if pid else None\'; '
            "git checkout -q -- textkit/wrap.py",
            timeout=30,
            env=on_path,
        )
        assert stale.returncode == 0 and "patched" not in stale.output, stale.output
        runner = await warm.start(box, box.env.workdir, preload=["textkit"], env=on_path)
        assert runner is not None and runner.address
        command = warm.hook("python -m pytest", runner)
        result = await box.exec(
            f"swe_rl_runner_note=/tmp/n; {command} -q -p no:cacheprovider tests >/dev/null; cat /tmp/n",
            timeout=120,
            env=on_path,
        )
        assert result.output.strip() == "cold the repository's own module textkit is preloaded", result.output
        # and without it, the same server start forks
        clean = await warm.start(box, box.env.workdir, env=on_path)
        assert clean is not None and clean.address
        command = warm.hook("python -m pytest", clean)
        result = await box.exec(
            f"swe_rl_runner_note=/tmp/n; {command} -q -p no:cacheprovider tests >/dev/null; cat /tmp/n",
            timeout=120,
            env=on_path,
        )
        assert result.output.strip() == "forked", result.output


# Tests that look through the collector's objects: the server freezes its own (gc.freeze, so a child's
# collections skip them), and a frozen object is in neither list unless the run puts them back.
GC_LOOK = """import gc, pytest

def test_pytest_is_among_the_objects():
    assert any(o is vars(pytest) for o in gc.get_objects())

def test_pytest_is_among_the_referrers():
    assert any(o is vars(pytest) for o in gc.get_referrers(pytest.main))

def test_collections_still_collect():
    class Cycle:
        pass
    a, b = Cycle(), Cycle()
    a.b, b.a = b, a
    del a, b
    assert gc.collect() >= 2
"""


async def test_a_run_that_looks_through_the_collectors_objects_sees_what_a_cold_run_sees(task_by_id, envs):
    async with _with_tests(task_by_id, envs, "test_gc_look.py", GC_LOOK) as (box, _runner, command):
        # the positive control: in this env's Python, a frozen object is missing from both lists
        frozen = await box.exec(
            "python -c 'import gc, pytest; gc.freeze(); "
            "print(any(o is vars(pytest) for o in gc.get_objects()), "
            "any(o is vars(pytest) for o in gc.get_referrers(pytest.main)))'",
            timeout=60,
        )
        assert frozen.output.split() == ["False", "False"], frozen.output
        run = "-rA -p no:cacheprovider tests/test_gc_look.py"
        cold = await box.exec(f"python -m pytest {run}", timeout=120)
        hot = await box.exec(f"swe_rl_runner_note=/tmp/n; {command} {run}; cat /tmp/n", timeout=120)
        assert hot.output.rstrip().endswith("forked"), hot.output
        expected = {
            f"tests/test_gc_look.py::{name}": "PASSED" for name in re.findall(r"def (test_\w+)", GC_LOOK)
        }
        assert parse_test_log(cold.output) == parse_test_log(hot.output) == expected, hot.output


# A test run kills the server, then forks until a child of its own gets the server's pid: pids are handed out
# in turn, and here a process forks ~4,500 times a second, so the whole range (4,194,304) goes by in about 15
# minutes, within the 30-minute test timeout. The child listens on the server's address and answers every
# run "passed" without running it. (The test moves the pid namespace's counter from the host, ns_last_pid, so
# that it takes seconds; the cycling is the same.)
PID_THIEF = """import os, socket, sys, time
target, address = int(sys.argv[1]), sys.argv[2]
last, wrapped = 0, False
while True:
    pid = os.fork()
    if pid == 0:
        if os.getpid() != target:
            os._exit(0)
        os.setsid()
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        s = socket.socket(socket.AF_UNIX)
        s.bind("\\0" + address)
        s.listen(4)
        while True:
            c, _ = s.accept()
            try:
                n = int.from_bytes(c.recv(4), "big")
                while n > 0:
                    n -= len(c.recv(n) or b"x" * n)
                c.sendall(b"forked 1\\nexit 0\\n")
            except OSError:
                pass
            c.close()
    if pid == target:
        time.sleep(0.5)  # it listens
        print("taken", flush=True)
        break
    os.waitpid(pid, 0)
    wrapped = wrapped or pid < last
    if wrapped and pid > target:  # went past it: its pid is taken
        print("missed", pid, flush=True)
        break
    last = pid
"""


def _told(runner: warm.WarmRunner, *, pid: int, start_ticks: int) -> warm.WarmRunner:
    """``runner`` as a client told another process's pid and start time would take it (the same address)."""
    told = copy.copy(runner)
    told.pid, told.start_ticks = pid, start_ticks
    return told


async def _start_ticks(box, pid: int) -> int:  # type: ignore[no-untyped-def]
    """When ``pid`` (as ``box`` sees it) started, as WarmRunner records it."""
    found = await warm.process_state(box, pid)
    assert found is not None, pid
    return found[1]


def _set_last_pid(box, last: int) -> None:  # type: ignore[no-untyped-def]
    """From the host: the last pid handed out in ``box``'s pid namespace (the next fork gets the one after)."""
    own = os.readlink("/proc/self/ns/pid")
    todo = [box.bwrap_pid]
    while todo:  # a process inside the namespace: a child of bwrap
        pid = todo.pop()
        if os.readlink(f"/proc/{pid}/ns/pid") != own:
            command = f"echo {last} > /proc/sys/kernel/ns_last_pid"
            subprocess.run(["nsenter", "-t", str(pid), "-p", "--", "sh", "-c", command], check=True)
            return
        for task in os.listdir(f"/proc/{pid}/task"):
            todo += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    raise AssertionError("no process in the sandbox's pid namespace")


async def test_a_process_that_took_the_dead_servers_pid_is_not_taken_for_it(task_by_id, envs):
    async with await _textkit_box(task_by_id, envs) as box:
        # the server starts on a sandbox's second use or later, after gradings whose tests forked (a pid
        # below 300 is never handed out again once the counter wraps)
        _set_last_pid(box, 1000)
        runner, command = await _started(box)
        assert runner.pid > 1000
        await box.write_file("/tmp/thief.py", PID_THIEF.encode())
        killed = await box.exec(
            f"kill -KILL {runner.pid} && while [ -e /proc/{runner.pid} ]; do sleep 0.05; done", timeout=10
        )
        assert killed.returncode == 0
        # the host moves the counter near the top: the thief's forks wrap round to 300 and go up from there
        top = int((await box.exec("cat /proc/sys/kernel/pid_max", timeout=10)).output)
        _set_last_pid(box, top - 100)
        taken = await box.exec(f"python /tmp/thief.py {runner.pid} {runner.address}", timeout=60)
        assert taken.output.strip() == "taken", taken.output
        thief = _told(runner, pid=runner.pid, start_ticks=await _start_ticks(box, runner.pid))
        # the positive control: told the thief's start time, the runner's checks take it for the server
        assert await thief.alive(box)
        believing = warm.hook("python -m pytest", thief)
        assert believing
        run = "-rA -p no:cacheprovider tests; echo rc=$?; cat /tmp/n"
        fooled = await box.exec(f"swe_rl_runner_note=/tmp/n; {believing} {run}", timeout=120)
        assert "rc=0" in fooled.output and "forked" in fooled.output and not parse_test_log(fooled.output)
        # the server's own start time tells them apart: not alive (a reset keeps nothing), and the run is cold
        assert not await runner.alive(box)
        result = await box.exec(f"swe_rl_runner_note=/tmp/n; {command} {run}", timeout=120)
        assert "cold (no server: the socket is not the server's)" in result.output, result.output
        assert parse_test_log(result.output), "the tests really ran, cold"
