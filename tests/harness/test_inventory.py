"""The inventory's mechanics in real ns sandboxes (harness/inventory.py): its files come back whole when the
sandbox's output cap cuts the script's output. The rule it feeds: test_steering.py; the attacks:
test_reward_hacking.py."""

from __future__ import annotations

from typing import Any

import pytest
from tests.conftest import available_factory

from swe_rl.harness import inventory
from swe_rl.harness.evalscript import CANDIDATE_PATCH
from swe_rl.harness.staging import stage
from swe_rl.sandbox.base import EnvSpec, ExecResult, Limits, Sandbox

pytestmark = pytest.mark.ns

NAMES = [f"textkit/generated_{i:03d}_{'x' * 40}.py" for i in range(80)]


def _new_file(path: str) -> str:
    return f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x = 1\n"


def _recorded(box: Sandbox) -> list[ExecResult]:
    """What ``box``'s commands return from now on (the sandbox runs them as before)."""
    seen: list[ExecResult] = []
    run = box.exec

    async def exec_(command: str, **options: Any) -> ExecResult:
        seen.append(await run(command, **options))
        return seen[-1]

    box.exec = exec_  # type: ignore[method-assign]
    return seen


async def test_a_cut_output_is_read_back_from_the_sandbox(textkit_env: EnvSpec) -> None:
    factory = available_factory("ns")
    patch = "".join(_new_file(name) for name in NAMES).encode()
    for cap in (2_000_000, 1024):  # each list is several KiB in base64: the small cap cuts them
        async with await factory.create(textkit_env, Limits(output_bytes=cap)) as box:
            before = await inventory.before(box, await stage(box, {CANDIDATE_PATCH: patch}), installed=set())
            assert (await box.exec(f"git apply {CANDIDATE_PATCH}", timeout=60)).returncode == 0
            seen = _recorded(box)
            found = await inventory.after(box, before)
            # the control: at the small cap the script's own output does not hold the list
            assert seen[0].truncated == (cap == 1024), (cap, seen[0].output_bytes)
            assert before.problem is None and found.problem is None and not found.gitdir_changed
            assert before.patch_paths == NAMES, cap
            assert sorted(c.path for c in found.changes) == NAMES and all(c.new for c in found.changes), cap
            assert "textkit" in found.package_dirs, cap


# Each a change to .git that its digest must see: contents with the size and mtime put back, metadata only,
# a new file, an object file (listed, not read), a new directory.
GITDIR_CHANGES = [
    "n=$(wc -c < .git/description); head -c $n /dev/zero | tr '\\0' x > d; touch -r .git/description d; "
    "cat d > .git/description; touch -r d .git/description",
    "chmod 600 .git/description",
    "echo 'exit 0' > .git/hooks/post-checkout",
    'f=$(find .git/objects -type f -name \'*.pack\' | head -1); chmod u+w "$f"; printf x >> "$f"',
    "mkdir .git/refs/extra",
]


async def test_the_gitdir_digest_sees_each_change_and_nothing_else(textkit_env: EnvSpec) -> None:
    factory = available_factory("ns")
    async with await factory.create(textkit_env) as box:
        write = await stage(box, {CANDIDATE_PATCH: _new_file("textkit/extra.py").encode()})
        size = "wc -c < .git/description; stat -c %Y .git/description"
        pristine = (await box.exec(size, timeout=30)).output
        for change in ["", *GITDIR_CHANGES]:  # "": the control, nothing changed (and a patch applied)
            await box.reset()
            before = await inventory.before(box, write, installed=set())
            assert (await box.exec(f"git apply {CANDIDATE_PATCH}", timeout=60)).returncode == 0
            done = await box.exec(change or ":", timeout=30)
            assert done.returncode == 0, done.output
            found = await inventory.after(box, before)
            assert before.problem is None and found.problem is None, change
            assert found.gitdir_changed == bool(change), change
            if change == GITDIR_CHANGES[0]:  # the attack kept what a listing shows: size and mtime
                assert (await box.exec(size, timeout=30)).output == pristine


async def test_the_env_s_module_names_include_its_venv_s_packages(textkit_env: EnvSpec) -> None:
    """A new top-level module named like one the env installs is a ``shadow_module``. Envs are venvs, whose
    site-packages the isolated interpreter (-I -S) does not put on its own paths. A venv made in the sandbox
    holds a package that no other site-packages has."""
    make = (
        "python -m venv --without-pip /tmp/v && site=$(/tmp/v/bin/python -c 'import sysconfig; "
        'print(sysconfig.get_paths()["purelib"])\') && mkdir -p $site/only_in_this_venv && '
        "touch $site/only_in_this_venv/__init__.py && /tmp/v/bin/python -c 'import only_in_this_venv'"
    )
    isolated = "/tmp/v/bin/python -I -S -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])'"
    async with await available_factory("ns").create(textkit_env) as box:
        made = await box.exec(make, timeout=120)
        assert made.returncode == 0, made.output
        # the control: without `site`, the interpreter's own paths are its base's, which lack the package
        assert "/tmp/v/" not in (await box.exec(isolated, timeout=60)).output
        listed = await box.exec(f"PATH=/tmp/v/bin:$PATH {inventory._LIST_MODULES}", timeout=120)
    assert listed.returncode == 0, listed.output
    assert {"only_in_this_venv", "os", "json"} <= set(listed.output.split())
