"""Grading never runs in the agent's working state: planted state outside the diff cannot change a verdict."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.harness.grade_patch import grade_in, grade_patch

# An unchecked hash-based .pyc of the fixed module: Python loads it without looking at the source, and
# __pycache__ is git-ignored, so it is not part of the agent's diff.
PLANT_PYC = """
set -e
python - <<'PY'
import pathlib, py_compile, re, tempfile
src = pathlib.Path("textkit/wrap.py").read_text().replace("if len(text) < limit:", "if len(text) <= limit:")
tmp = pathlib.Path(tempfile.mkdtemp()) / "wrap.py"
tmp.write_text(src)
py_compile.compile(str(tmp), cfile="textkit/__pycache__/wrap.cpython-311.pyc",
                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
import sys
tag = sys.implementation.cache_tag
if tag != "cpython-311":
    pathlib.Path("textkit/__pycache__/wrap.cpython-311.pyc").rename(f"textkit/__pycache__/wrap.{tag}.pyc")
PY
mkdir -p "$HOME/.local/lib" && echo 'import os' > "$HOME/.local/lib/sitecustomize.py"
echo 'collect_ignore = ["tests"]' > /tmp/conftest.py
"""


@pytest.fixture
def _no_conftest_left_in_host_tmp() -> Iterator[None]:
    """The local backend isolates nothing: the plant's /tmp/conftest.py lands in the host's /tmp, where every later
    pytest run under /tmp would read it (and another user could not remove it). Removed after the test."""
    planted = Path("/tmp/conftest.py")
    there_before = planted.exists()
    yield
    if not there_before:
        planted.unlink(missing_ok=True)


@pytest.mark.usefixtures("_no_conftest_left_in_host_tmp")
async def test_planted_state_outside_the_diff_does_not_resolve(factory, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    async with await factory.create(env) as agent_box:
        planted = await agent_box.exec(PLANT_PYC, timeout=60)
        assert planted.returncode == 0, planted.output
        # a harmless edit so the diff is not empty; the bug itself is untouched
        await agent_box.exec("echo '# looked at it' >> README.md", timeout=10)
        patch = await agent_box.diff()
        assert "textkit/wrap.py" not in patch and "__pycache__" not in patch
        # graded in the agent's own state, the cheat works...
        in_place = await grade_in(agent_box, task, patch=None, timeout=300)
        assert in_place.resolved, "the planted bytecode fixes the bug in the agent's own sandbox"
    # ...but grading applies the diff in a pristine sandbox, where it does not.
    verdict = await grade_patch(task, patch, factory, env, timeout=300)
    assert verdict.status == "unresolved" and not verdict.resolved


PLANT_OUTSIDE = """
site=$(python -c 'import site; print(site.getsitepackages()[0])')
printf 'import textkit.wrap as w\\nw.truncate = lambda t, n, e="...": t if len(t) <= n else t[: n - 3] + e\\n' > "$site/sitecustomize.py" 2>/dev/null && echo PLANTED-SITE
for d in $(echo "$PATH" | tr ':' ' '); do printf '#!/bin/sh\\nexit 0\\n' > "$d/python" 2>/dev/null && chmod +x "$d/python" && echo "PLANTED-PATH $d"; done
echo done
"""


@pytest.mark.parametrize("backend", ["ns", "docker"])
async def test_site_packages_and_path_are_read_only_to_the_agent(backend, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    env = envs.ensure(task)
    factory = available_factory(backend)
    async with await factory.create(env) as agent_box:
        planted = await agent_box.exec(PLANT_OUTSIDE, timeout=60)
        assert "PLANTED" not in planted.output, planted.output
        await agent_box.exec("echo '# note' >> README.md", timeout=10)
        patch = await agent_box.diff()
    verdict = await grade_patch(task, patch, factory, env, timeout=300)
    assert not verdict.resolved
    assert not list(env.venv.glob("lib/python*/site-packages/sitecustomize.py")), (
        "the shared env is untouched"
    )
