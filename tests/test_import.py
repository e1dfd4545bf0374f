"""``import swe_rl`` is cheap and side-effect free."""

import json
import os
import subprocess
import sys

HEAVY = ["torch", "ray", "transformers", "docker", "datasets", "swebench", "trl", "vllm", "sglang", "pyarrow"]


def test_import_pulls_no_heavy_dependency(tmp_path):
    code = (
        "import sys, json, swe_rl, swe_rl.cli.app, swe_rl.tasks.loaders, swe_rl.harness.grade_patch, swe_rl.envs.cache;"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    env = {**os.environ, "HOME": str(tmp_path), "SWE_RL_CACHE": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert json.loads(out.stdout) == []
    # no side effects: nothing created in the cache or home
    assert list(tmp_path.iterdir()) == []


def test_version_and_error_tree():
    import swe_rl
    from swe_rl.errors import InfraError, SandboxError, SweRlError, TaskFormatError

    assert swe_rl.__version__
    assert issubclass(SandboxError, InfraError) and issubclass(InfraError, RuntimeError)
    assert issubclass(TaskFormatError, ValueError) and issubclass(TaskFormatError, SweRlError)
