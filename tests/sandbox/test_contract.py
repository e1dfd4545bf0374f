"""The contract every sandbox backend keeps. Parametrized over all backends (see conftest)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from swe_rl.errors import SandboxError
from swe_rl.sandbox.base import Limits


async def test_exit_codes_and_output(factory, textkit_env):
    async with await factory.create(textkit_env) as box:
        ok = await box.exec("echo hello; echo err >&2", timeout=30)
        assert (ok.returncode, ok.output, ok.timed_out) == (0, "hello\nerr\n", False)
        bad = await box.exec("exit 7", timeout=30)
        assert bad.returncode == 7
        missing = await box.exec("definitely-not-a-command", timeout=30)
        assert missing.returncode == 127


async def test_a_program_written_anywhere_writable_runs(factory, textkit_env):
    """Tests run what they build: Conan's test client builds a package in a temporary folder and runs it.
    A noexec /tmp (Docker's tmpfs default) failed that with exit 126 on Docker only, so ns and Docker graded
    the same row differently; every backend runs it from /tmp, $HOME and the testbed alike."""
    name = f"built-{uuid.uuid4().hex[:12]}"  # the local backend's /tmp is the host's: another user's file is there
    async with await factory.create(textkit_env) as box:
        for where in ("/tmp", "$HOME", "."):
            made = f"printf '#!/bin/sh\\necho ran\\n' > {where}/{name} && chmod +x {where}/{name}"
            ran = await box.exec(
                f"{made} && {where}/{name}; ran=$?; rm -f {where}/{name}; exit $ran", timeout=30
            )
            assert (ran.returncode, ran.output) == (0, "ran\n"), where


async def test_default_cwd_is_the_testbed_at_base(factory, textkit_env):
    async with await factory.create(textkit_env) as box:
        head = await box.exec("git rev-parse HEAD && test -f textkit/wrap.py && echo found", timeout=30)
        assert head.output.split() == [textkit_env.base_commit, "found"]


async def test_exec_is_stateless(factory, textkit_env):
    async with await factory.create(textkit_env) as box:
        await box.exec("cd tests && export FOO=bar", timeout=30)
        after = await box.exec('echo "$PWD|${FOO:-unset}"', timeout=30)
        assert after.output.strip().endswith("|unset")
        assert not after.output.strip().split("|")[0].endswith("/tests")


async def test_cwd_and_env_per_call(factory, textkit_env):
    async with await factory.create(textkit_env) as box:
        result = await box.exec(
            'basename "$PWD"; echo "$GREETING"',
            timeout=30,
            cwd=f"{textkit_env.workdir}/tests",
            env={"GREETING": "hi"},
        )
        assert result.output.split() == ["tests", "hi"]


async def test_stdin_is_empty(factory, textkit_env):
    async with await factory.create(textkit_env) as box:
        result = await box.exec("cat; echo done", timeout=10)
        assert result.output == "done\n" and not result.timed_out


async def test_a_command_that_closes_its_output_early_keeps_its_exit_status(factory, textkit_env):
    """The end of a command's output is not its end: coreutils close stdout in an exit handler, and a command
    may close it and go on. Killed at the output's end, such a command came back -9 on the local backend
    (a lease's ``sleep 0.05`` did, under load) where it had exited 0."""
    async with await factory.create(textkit_env) as box:
        result = await box.exec("echo before; exec >/dev/null 2>&1; sleep 0.5; exit 3", timeout=30)
        assert (result.returncode, result.output, result.timed_out) == (3, "before\n", False)
        background = await box.exec(
            "echo start; (exec >/dev/null 2>&1; sleep 30) & exec >&-; sleep 0.3", timeout=5
        )
        assert (background.returncode, background.timed_out) == (0, False)  # a straggler is no reason to wait


async def test_timeout_kills_the_command_and_keeps_the_sandbox(factory, textkit_env):
    async with await factory.create(textkit_env) as box:
        result = await box.exec("echo start; sleep 30 & sleep 30", timeout=1)
        assert result.timed_out and result.output.startswith("start")
        assert result.duration < 10
        again = await box.exec("echo alive", timeout=10)
        assert again.output == "alive\n"


async def test_large_output_is_capped_and_counted(factory, textkit_env):
    limits = Limits(output_bytes=64_000)
    async with await factory.create(textkit_env, limits) as box:
        result = await box.exec("head -c 20000000 /dev/zero | tr '\\0' 'x'; echo; echo END", timeout=60)
        assert result.returncode == 0
        assert result.output_bytes >= 20_000_000 and result.truncated
        assert len(result.output) < 70_000 and "output capped" in result.output
        assert result.output.rstrip().endswith("END"), "the tail is kept"


async def test_file_io_roundtrip_and_binary(factory, textkit_env):
    async with await factory.create(textkit_env) as box:
        data = bytes(range(256)) * 10
        await box.write_file(f"{textkit_env.workdir}/data/blob.bin", data)
        assert await box.read_file(f"{textkit_env.workdir}/data/blob.bin") == data
        await box.write_file("/tmp/note.txt", b"tmp file")
        assert (await box.exec('cat "$TMPDIR/note.txt"', timeout=10)).output == "tmp file"
        with pytest.raises(OSError):
            await box.read_file(f"{textkit_env.workdir}/no/such/file")


async def test_diff_shows_edits_and_new_files_against_base(factory, textkit_env):
    async with await factory.create(textkit_env) as box:
        assert await box.diff() == ""
        await box.exec("sed -i '1i # edited' textkit/wrap.py && echo new > NEW.txt", timeout=10)
        patch = await box.diff()
        assert "diff --git a/textkit/wrap.py b/textkit/wrap.py" in patch
        assert "diff --git a/NEW.txt b/NEW.txt" in patch and "+new" in patch
        # a commit made by the agent does not hide its changes: the diff is against base_commit
        await box.exec("git add -A && git commit -qm wip", timeout=10)
        assert "NEW.txt" in await box.diff()


async def test_reset_restores_the_pristine_env_under_the_same_id(factory, textkit_env):
    async with await factory.create(textkit_env) as box:
        sandbox_id = box.id
        await box.exec('echo junk > junk.txt && rm README.md && echo t > "$TMPDIR/t"', timeout=10)
        await box.reset()
        assert box.id == sandbox_id
        state = await box.exec(
            'test -f README.md && test ! -e junk.txt && test ! -e "$TMPDIR/t" && echo pristine', timeout=10
        )
        assert state.output == "pristine\n"
        assert await box.diff() == ""


async def test_two_sandboxes_of_one_env_are_isolated(factory, textkit_env):
    async with await factory.create(textkit_env) as a, await factory.create(textkit_env) as b:
        assert a.id != b.id
        await a.exec('echo mine > secret.txt && echo x > "$TMPDIR/only-a"', timeout=10)
        seen = await b.exec('ls secret.txt || ls "$TMPDIR/only-a"', timeout=10)
        assert seen.returncode != 0 and "mine" not in seen.output
    # the env itself is untouched
    assert not (textkit_env.testbed / "secret.txt").exists()


async def test_close_is_idempotent_and_final(factory, textkit_env):
    box = await factory.create(textkit_env)
    await box.close()
    await box.close()
    with pytest.raises(SandboxError):
        await box.exec("true", timeout=5)


async def test_concurrent_execs_in_many_sandboxes(factory, textkit_env):
    boxes = [await factory.create(textkit_env) for _ in range(4)]
    try:
        results = await asyncio.gather(*(b.exec(f"echo {i}", timeout=30) for i, b in enumerate(boxes)))
        assert [r.output.strip() for r in results] == ["0", "1", "2", "3"]
    finally:
        await asyncio.gather(*(b.close() for b in boxes))
