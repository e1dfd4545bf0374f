"""``-c FILE.yaml`` / ``-c KEY=VALUE``: any settings field, applied after the options, errors naming the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from swe_rl.cli.options import with_overrides
from swe_rl.errors import ConfigError
from swe_rl.train.grpo import GRPOSettings

SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]


def test_files_and_assignments_apply_in_order_and_are_recorded(tmp_path: Path) -> None:
    base = GRPOSettings(output_dir=tmp_path / "run", trl={"loss_type": "grpo"}, args={"tasks": "builtin"})
    file = tmp_path / "long-tail.yaml"
    file.write_text("num_generations: 8\nlearning_rate: 3.0e-4\ntrl:\n  top_entropy_quantile: 0.2\n")
    got = with_overrides(base, [str(file), "learning_rate=1e-3", "trl.top_entropy_quantile=0.05", "seed=7"])
    assert (got.num_generations, got.learning_rate, got.seed) == (8, 1e-3, 7)
    assert got.trl == {"loss_type": "grpo", "top_entropy_quantile": 0.05}  # a mapping is merged, not replaced
    assert got.args == {
        "tasks": "builtin",
        "config": [str(file), "learning_rate=1e-3", "trl.top_entropy_quantile=0.05", "seed=7"],
    }
    assert with_overrides(base, None) is base and with_overrides(base, []) is base


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ("lerning_rate=1e-3", "GRPOSettings has no setting 'lerning_rate'"),
        ("steps.inner=1", "steps is not a mapping"),
        ("no-such-file.yaml", "no such file, and not KEY=VALUE"),
        ("trl=[unclosed", "the value is not YAML"),
    ],
)
def test_a_wrong_override_is_a_config_error_naming_it(tmp_path: Path, item: str, says: str) -> None:
    with pytest.raises(ConfigError, match=r"^-c ") as caught:
        with_overrides(GRPOSettings(output_dir=tmp_path), [item])
    assert says in str(caught.value)


def test_a_value_the_field_refuses_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out = subprocess.run(
        [*SWE_RL, "train", "rl", "-s", "builtin", "-o", str(tmp_path / "run"), "-c", "num_generations=1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert "invalid GRPOSettings: num_generations: Input should be greater than or equal to 2" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "run").exists()  # refused before anything ran


@pytest.mark.parametrize(
    "item",
    ["episode.limits.memroy_mb=8192", "episode.limits={memroy_mb: 8192}", "episode={limits: {memroy_mb: 1}}"],
)
def test_a_typo_in_a_nested_key_is_refused_like_a_top_level_one(tasks, tmp_path: Path, item: str) -> None:
    """``episode.limits`` is a settings model (Limits) in one (EpisodeSpec): its keys are checked as the top
    level's are (``trl`` and ``args`` are free mappings and take any key). It was accepted and the run went on
    with the default."""
    args = ["eval", "--llm", "scripted:oracle", "-b", "local", "-i", tasks[0].instance_id, "-c", item]
    out = subprocess.run(
        [*SWE_RL, *args, "-o", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"error: -c {item}: Limits has no setting 'memroy_mb'; it has: cpus,")
    assert not (tmp_path / "run").exists()


def test_an_entry_at_any_depth_is_set_over_the_defaults_of_a_model_left_unset(tmp_path: Path) -> None:
    """eval's episode spec leaves ``limits`` unset (the backend's): one entry of it starts from Limits' defaults,
    the episode's other fields kept; one deeper than a plain value is refused naming the path."""
    from swe_rl.episode.spec import EpisodeSpec
    from swe_rl.runs.evaluation import EvalSettings
    from swe_rl.sandbox.base import Limits

    base = EvalSettings(output_dir=tmp_path)
    got = with_overrides(base, ["episode.limits.memory_mb=8192", "episode.grading=strict"])
    assert got.episode.limits == Limits(memory_mb=8192) and got.episode.grading == "strict"
    assert base.episode == EpisodeSpec.for_eval() and got.episode.grade_timeout == base.episode.grade_timeout
    with pytest.raises(ConfigError, match=r"episode\.grading is not a mapping"):
        with_overrides(base, ["episode.grading.mode=strict"])


def test_trl_and_c_read_an_assignment_the_same_way(tmp_path: Path) -> None:
    """One parser for KEY=VALUE: ``--trl`` read values as JSON and ``-c`` as YAML (``[1, 2]`` agreed, ``1e-3`` did
    not: YAML 1.1 reads it as a string); both are ``assignments`` now, JSON where the value is JSON."""
    from swe_rl.cli.options import assignments

    items = [
        "top_entropy_quantile=0.05",
        "beta=1e-3",
        "loss_type=grpo",
        "ids=[1, 2]",
        "mask_truncated_completions=true",
    ]
    via_c = with_overrides(GRPOSettings(output_dir=tmp_path), [f"trl.{item}" for item in items]).trl
    assert assignments(items, "--trl") == via_c
    assert via_c == {
        "top_entropy_quantile": 0.05,
        "beta": 0.001,  # YAML alone read it as the string '1e-3' (JSON alone, yes as a string)
        "loss_type": "grpo",
        "ids": [1, 2],
        "mask_truncated_completions": True,
    }
    with pytest.raises(ConfigError, match="--trl takes KEY=VALUE, not 'loss_type'"):
        assignments(["loss_type"], "--trl")
