"""rundir.py names the files of every run directory and of the demo's: no other module spells one of those
file names (ARCHITECTURE.md, "One record, one summary, one run directory")."""

from __future__ import annotations

import ast
from pathlib import Path

import swe_rl
from swe_rl.rundir import DemoDir, RunDir

PACKAGE = Path(swe_rl.__file__).parent
# the same word meaning another directory's file
ELSEWHERE = {
    (
        "runs/grade_predictions.py",
        "patch.diff",
    ): "the official harness's log layout, which swe-rl grade writes",
    ("llm/hf.py", "config.json"): "a transformers model directory's",
    ("train/models.py", "config.json"): "a transformers model directory's",
    ("runs/demo.py", "README.md"): "a builtin task's repository's",
}


def file_names() -> set[str]:
    """The file names (a dot in them) of an eval, training, supervised and demo directory."""
    run, demo = RunDir(Path("run")), DemoDir(Path("demo"))
    paths = [v for v in (*vars(run).values(), *vars(demo).values()) if isinstance(v, Path)]
    constants = [RunDir.TRAJECTORY, RunDir.PATCH, RunDir.META, RunDir.CHECKPOINT_COMPLETE]
    names = {p.name for p in paths} | set(constants) | {RunDir.mini_trajectory("x").removeprefix("x")}
    return {n for n in names if "." in n}


def spelt(source: str, names: set[str]) -> set[str]:
    """The names of ``names`` a module's string literals spell whole, or end an f-string with."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= {n for n in names if node.value == n or node.value.endswith("/" + n)}
        if isinstance(node, ast.JoinedStr) and node.values:
            last = node.values[-1]
            if isinstance(last, ast.Constant) and isinstance(last.value, str):
                found |= {n for n in names if n.startswith(".") and last.value.endswith(n)}
    return found


def test_the_measure_sees_a_name_spelt_and_the_names_are_the_run_directorys() -> None:
    names = file_names()
    assert {"results.jsonl", "summary.json", "traj.json", "validation.json", ".traj.json"} <= names
    assert spelt('p = out / "results.jsonl"\nq = f"{i}.traj.json"\n', names) == {
        "results.jsonl",
        ".traj.json",
    }
    assert spelt('print("missing traj.json")', names) == set()


def test_no_module_but_rundir_spells_a_run_directorys_file_name() -> None:
    names = file_names()
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "rundir.py" or rel.startswith("tasks/builtin/repos/"):
            continue
        if spelt_here := {n for n in spelt(path.read_text(), names) if (rel, n) not in ELSEWHERE}:
            found[rel] = sorted(spelt_here)
    assert found == {}
