"""The scripted oracles: the compact one's zero-context diff and the debug one's sed line make exactly
the gold change."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from swe_rl.llm.oracle import compact_oracle_replies, debug_oracle_replies, sed_fix, zero_context


def _git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        # the copies are of cached testbeds, which belong to the ns sandboxes' uid
        ["git", "-c", "safe.directory=*", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_zero_context_diff_makes_the_same_change_as_every_builtin_gold_patch(tasks, envs, tmp_path):
    for task in tasks:
        trees = []
        for name, patch, flags in (
            ("gold", task.patch, []),
            ("zero", zero_context(task.patch), ["--unidiff-zero"]),
        ):
            repo = tmp_path / f"{task.instance_id}-{name}"
            subprocess.run(["cp", "-a", str(envs.ensure(task).testbed), str(repo)], check=True)
            _git(repo, "apply", *flags, "-", stdin=patch)
            _git(repo, "add", "-A")
            trees.append(_git(repo, "write-tree"))
        assert trees[0] == trees[1], task.instance_id
        body = [line for line in zero_context(task.patch).splitlines() if not line.startswith(("---", "+++"))]
        assert not any(line.startswith(" ") for line in body)  # no context lines at all


def test_zero_context_handles_insertions_deletions_and_several_hunks():
    patch = (
        "diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n"
        "@@ -1,4 +1,5 @@\n a\n-b\n+B\n c\n+new\n d\n"
        "@@ -10,3 +11,2 @@\n x\n-y\n z\n"
    )
    assert zero_context(patch) == (
        "diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n"
        "@@ -2,1 +2,1 @@\n-b\n+B\n@@ -3,0 +4,1 @@\n+new\n@@ -11,1 +11,0 @@\n-y\n"
    )


def test_zero_context_diff_adds_deletes_and_keeps_a_missing_final_newline(tmp_path):
    _git(tmp_path, "init", "-q")
    files = {"gone.py": "x = 1\n", "tail.py": "a\nb\nc", "end.py": "a\nb"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    (tmp_path / "gone.py").unlink()
    (tmp_path / "new.py").write_text("y = 2\nz = 3\n")
    (tmp_path / "tail.py").write_text("A\nb\nc")  # the unterminated line is context, dropped
    (tmp_path / "end.py").write_text("a\nB")  # the unterminated line is changed, its marker kept
    _git(tmp_path, "add", "-A")
    gold, want = _git(tmp_path, "diff", "--cached"), _git(tmp_path, "write-tree")
    _git(tmp_path, "reset", "-q", "--hard")
    _git(tmp_path, "apply", "--index", "--unidiff-zero", "-", stdin=zero_context(gold))
    assert _git(tmp_path, "write-tree") == want
    assert "@@ -0,0 +1,2 @@" in zero_context(gold) and "@@ -1,1 +0,0 @@" in zero_context(gold)


def test_compact_oracle_is_two_turns_that_test_then_submit(task_by_id):
    replies = compact_oracle_replies(task_by_id["swe-rl-builtin__textkit-4"])  # a multi-line fix: a diff
    assert len(replies) == 2 and "--unidiff-zero" in replies[0] and "pytest" in replies[0]
    assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in replies[1]
    one_line = compact_oracle_replies(task_by_id["swe-rl-builtin__textkit-3"])[0]
    assert "sed -i '35s/text) </text) <=/' textkit/wrap.py && python -m pytest" in one_line


@pytest.mark.ns
def test_compact_oracle_resolves_with_the_compact_agent_config(task_by_id, envs, tmp_path):
    import asyncio

    from tests.conftest import available_factory

    from swe_rl.agent.config import load_agent_config
    from swe_rl.llm.base import SamplingParams
    from swe_rl.llm.oracle import scripted_for
    from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval

    config = load_agent_config("compact")
    assert config.step_limit == 10 and "one bash command per reply" in config.system_template
    summary = asyncio.run(
        run_eval(
            [task_by_id["swe-rl-builtin__statkit-1"]],
            Attempts.here(lambda t: scripted_for("oracle-compact", t), envs, available_factory("ns"), config),
            SamplingParams(),
            EvalSettings(output_dir=tmp_path / "ev"),
            quiet=True,
        )
    )
    assert summary["resolved"] == 1 and summary["avg_steps"] == 2
    (traj,) = (tmp_path / "ev").glob("*/traj.json")
    fix_output = json.loads(traj.read_text())["messages"][3]["content"]
    assert " passed" in fix_output and "here-document" not in fix_output  # the tests after the fix ran


def _one_line_patch(old: str, new: str, line: int = 3) -> str:
    return f"diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -{line - 1},3 +{line - 1},3 @@\n a = 1\n-{old}\n+{new}\n z = 2\n"


@pytest.mark.parametrize(
    "old,new,expected",
    [
        ("    return reslt / n", "    return result / n", "s/reslt/result/"),
        ("    if 0 <= q <= 100:", "    if not 0 <= q <= 100:", "s/if /if not /"),
        ("    return x[i + 1]", "    return x[i]", "s/ + 1//"),
        ("    return a.b * c", "    return a.b / c", r"s/\*/\//"),
        ("    return 0 if 0 else 10", "    return 0 if 1 else 10", "s/if 0/if 1/"),
    ],
)
def test_sed_fix_is_the_smallest_unique_whole_word_change_and_sed_applies_it(tmp_path, old, new, expected):
    command = sed_fix(_one_line_patch(old, new))
    assert command is not None and command == f"sed -i '3{expected}' m.py"
    (tmp_path / "m.py").write_text(f"head\na = 1\n{old}\nz = 2\n")
    subprocess.run(command, shell=True, cwd=tmp_path, check=True)
    assert (tmp_path / "m.py").read_text() == f"head\na = 1\n{new}\nz = 2\n"


def test_sed_fix_declines_what_one_sed_line_cannot_say():
    two_lines = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n-a\n-b\n+A\n+B\n"
    insertion = "--- a/m.py\n+++ b/m.py\n@@ -1,1 +1,2 @@\n a\n+b\n"
    quoted = _one_line_patch("    return 'a'", '    return "a"')
    renamed = _one_line_patch("x", "y").replace("b/m.py", "b/n.py")  # sed cannot rename
    assert sed_fix(two_lines) is None and sed_fix(insertion) is None and sed_fix(quoted) is None
    assert sed_fix(renamed) is None and sed_fix(_one_line_patch("x", "y")) is not None


@pytest.mark.ns
def test_debug_oracle_runs_the_failing_test_fixes_then_submits(task_by_id, envs, tmp_path):
    import asyncio

    from tests.conftest import available_factory

    from swe_rl.agent.config import load_agent_config
    from swe_rl.llm.base import SamplingParams
    from swe_rl.llm.oracle import scripted_for
    from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval

    task = task_by_id["swe-rl-builtin__statkit-1"]
    replies = debug_oracle_replies(task)
    assert len(replies) == 3 and task.FAIL_TO_PASS[0] in replies[0] and "tail -n 25" in replies[0]
    summary = asyncio.run(
        run_eval(
            [task],
            Attempts.here(
                lambda t: scripted_for("oracle-debug", t),
                envs,
                available_factory("ns"),
                load_agent_config("compact"),
            ),
            SamplingParams(),
            EvalSettings(output_dir=tmp_path / "ev"),
            quiet=True,
        )
    )
    assert summary["resolved"] == 1 and summary["avg_steps"] == 3
