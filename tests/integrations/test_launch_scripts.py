"""The launch scripts parse, and every swe_rl entry point and swe-rl command they name exists."""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from swe_rl.cli.app import app
from swe_rl.cli.lazy import tree

LAUNCH = Path(__file__).resolve().parents[2] / "examples" / "launch"
SCRIPTS = sorted(LAUNCH.glob("*.sh"))
FILES = [*SCRIPTS, LAUNCH / "README.md"]


def test_there_is_a_script_per_seed_configuration():
    names = {p.name for p in SCRIPTS}
    assert {
        "slime_8b_2nodes.sh",
        "slime_32b_4nodes.sh",
        "slime_32b_8nodes.sh",
        "slime_8b_prm_5nodes.sh",
    } <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_parses(script: Path):
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _resolve(dotted: str) -> object:
    """A module, or an attribute of the longest importable module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(dotted)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_named_entry_points_exist(path: Path):
    text = path.read_text()
    names = set(re.findall(r"\bswe_rl(?:\.[A-Za-z_]\w*)+", text))
    for name in names:
        _resolve(name)  # raises if a module or function the script names does not exist
    groups = "|".join(
        words[0]
        for words, command in tree(typer.main.get_command(app)).items()
        if len(words) == 1 and hasattr(command, "list_commands")
    )
    for group, command in set(re.findall(rf"\bswe-rl ({groups}) (\w+)", text)):
        result = CliRunner().invoke(app, [group, command, "--help"])
        assert result.exit_code == 0, f"swe-rl {group} {command}: {result.output}"


def test_the_seed_values_reach_slime():
    common = (LAUNCH / "common.sh").read_text()
    for arg in (
        "--custom-generate-function-path swe_rl.integrations.slime.generate",
        "--custom-rm-path swe_rl.integrations.slime.reward_func",
        "--custom-reward-post-process-path swe_rl.integrations.slime.reward_post_process",
        "--rollout-max-context-len 16384",
        "--rollout-max-response-len 4096",
        "--n-samples-per-prompt 8",
        "--lr 1e-6",
    ):
        assert arg in common
    for script, nodes in (
        ("slime_8b_2nodes.sh", 2),
        ("slime_32b_4nodes.sh", 4),
        ("slime_32b_8nodes.sh", 8),
        ("slime_8b_prm_5nodes.sh", 4),  # the 5th node serves the judge
    ):
        assert re.search(rf"^launch_slime {nodes} ", (LAUNCH / script).read_text(), re.M)


def test_prm_script_needs_a_judge_and_passes_the_seed_settings(monkeypatch):
    script = LAUNCH / "slime_8b_prm_5nodes.sh"
    done = subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}
    )
    assert done.returncode != 0 and "SWE_RL_PRM_URL" in done.stderr
    text = script.read_text()
    assert "SWE_RL_PRM_M:-3" in text and "SWE_RL_PRM_COEF:-1.0" in text
    # the variables it sets are the ones the adapters read
    from swe_rl.integrations.settings import AdapterSettings

    for variable, value in {
        "SWE_RL_PRM_URL": "http://j/v1",
        "SWE_RL_PRM_MODEL": "m",
        "SWE_RL_PRM_M": "4",
        "SWE_RL_PRM_COEF": "0.5",
    }.items():
        monkeypatch.setenv(variable, value)
    prm = AdapterSettings.read().prm
    assert prm is not None and (prm.url, prm.model, prm.m, prm.coef) == ("http://j/v1", "m", 4, 0.5)
