"""One held-back split for every stage (`swe-rl tasks split`, #42): disjoint by id, function and bug string,
checked with bench/heldback_disjoint.py's own logic, and deterministic for a seed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from swe_rl.errors import ConfigError
from swe_rl.synth.heldback import bug_strings, functions_of, split_heldback
from swe_rl.synth.splits import assign_splits
from swe_rl.tasks.model import Task

ROOT = Path(__file__).resolve().parents[2]
SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]


def checker():  # type: ignore[no-untyped-def]
    """bench/heldback_disjoint.py as a module: the test checks with the script's logic, not the library's."""
    spec = importlib.util.spec_from_file_location(
        "heldback_disjoint", ROOT / "bench" / "heldback_disjoint.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def task(n: int, lib: str, func: str, kind: str, desc: str) -> Task:
    mutation = {"kind": kind, "path": f"{lib}/core.py", "function": func, "line": n, "end_line": n}
    return Task.model_validate(
        {
            "instance_id": f"swe-rl-synth__{lib}-{n:012x}",
            "repo": f"swe-rl-synth/{lib}",
            "base_commit": f"{n:040x}",
            "patch": "",
            "problem_statement": "x",
            "FAIL_TO_PASS": ["t"],
            "PASS_TO_PASS": [],
            "synth": {
                "source": f"builtin:{lib}",
                "file": f"{lib}/core.py",
                "function": f"{lib}/core.py::{func}",
                "kinds": [kind],
                "difficulty": "one-line",
                "mutations": [{**mutation, "description": desc}],
            },
        }
    )


def corpus() -> list[Task]:
    """Three libraries, 24 functions; misspellings and generic descriptions repeat across functions, as
    in real synthesis (`data` -> `daa` in many functions, 'returns None' everywhere)."""
    tasks, n = [], 0
    for lib in ("alib", "blib", "clib"):
        for f in range(8):
            for k in range(1 + f % 3):
                n += 1
                tasks.append(task(n, lib, f"f{f}", "name_typo", f"`v{(f + k) % 5}` -> `x{(f + k) % 5}`"))
            n += 1
            tasks.append(task(n, lib, f"f{f}", "return_change", "returns None" if f % 4 == 0 else f"ret {n}"))
    return tasks


def records(tasks: list[Task]) -> list[dict]:
    return [t.to_record() for t in tasks]


def test_split_is_disjoint_by_id_function_and_bug_string():
    tasks = corpus()
    split = split_heldback(tasks, share=0.3, seed=1)
    found = checker().overlaps(records(split.heldback), {"train": records(split.train)})["train"]
    assert found["ids"] == found["functions"] == found["bug strings"] == []
    assert found["repositories"], "held back by function inside three libraries: they are shared"
    sides = [split.heldback, split.train, split.dropped]
    assert sorted(t.instance_id for side in sides for t in side) == sorted(t.instance_id for t in tasks)
    held_strings = set().union(*(bug_strings(t) for t in split.heldback))
    assert split.dropped and all(bug_strings(t) & held_strings for t in split.dropped), "dropped: a repeat"
    held_functions = set().union(*(functions_of(t) for t in split.heldback))
    assert not any(functions_of(t) & held_functions for t in split.dropped), "a held-back function is whole"


def test_same_seed_same_split_and_seeds_differ():
    first = split_heldback(corpus(), share=0.3, seed=5)
    again = split_heldback(list(corpus()), share=0.3, seed=5)
    assert first == again
    others = {
        tuple(t.instance_id for t in split_heldback(corpus(), share=0.3, seed=s).heldback) for s in range(6)
    }
    assert len(others) > 1, "the seed chooses the held-back functions"


def test_heldback_kinds_keep_only_those_and_count_the_share_on_them():
    tasks = corpus()
    split = split_heldback(tasks, share=0.3, seed=1, heldback_kinds=["name_typo"])
    assert {k for t in split.heldback for k in t.model_extra["synth"]["kinds"]} == {"name_typo"}
    typos = [t for t in tasks if t.model_extra["synth"]["kinds"] == ["name_typo"]]
    assert 0.15 <= len(split.heldback) / len(typos) <= 0.45
    held_functions = {t.model_extra["synth"]["function"] for t in split.heldback}
    for t in split.train:
        assert t.model_extra["synth"]["function"] not in held_functions, (
            "no other kind of a held-back function"
        )
    found = checker().overlaps(records(split.heldback), {"train": records(split.train)})["train"]
    assert found["ids"] == found["functions"] == found["bug strings"] == []


def test_functions_without_a_kept_kind_stay_in_training():
    extra = [task(900 + i, "alib", f"only_returns{i}", "return_change", f"ret only {i}") for i in range(12)]
    for seed in range(4):
        split = split_heldback([*corpus(), *extra], share=0.3, seed=seed, heldback_kinds=["name_typo"])
        trained = {t.instance_id for t in split.train}
        assert all(t.instance_id in trained for t in extra), "holding them back would only lose them"


def test_whole_libraries_held_back():
    split = split_heldback(corpus(), share=0.0, seed=1, heldback_repos=["blib"])
    assert split.repos == ["blib"] and {t.repo for t in split.heldback} == {"swe-rl-synth/blib"}
    found = checker().overlaps(records(split.heldback), {"train": records(split.train)})["train"]
    assert not any(found.values()), "disjoint in every key, repositories included"


@pytest.mark.parametrize(
    ("tasks", "kwargs", "message"),
    [
        (corpus(), {"heldback_repos": ["zlib"]}, "unknown repository zlib"),
        ([task(i, "alib", f"f{i}", "name_typo", "`a` -> `b`") for i in range(6)], {}, "no training tasks"),
        (corpus(), {"share": 0.0}, "nothing is held back"),
        (corpus(), {"count_kinds": ["op_bool"]}, "no task of kind op_bool"),
        (corpus(), {"share": 1.0}, "must be in [0, 1)"),
    ],
)
def test_bad_input_is_a_config_error(tasks, kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace(")", r"\)")):
        split_heldback(tasks, **{"share": 0.3, "seed": 0, **kwargs})


def test_two_independent_splits_overlap_and_the_checker_says_so(tmp_path):
    """The positive control: each kind split on its own (the old way) shares functions and bug strings."""
    tasks = corpus()
    typos = [t for t in tasks if t.model_extra["synth"]["kinds"] == ["name_typo"]]
    others = [t for t in tasks if t not in typos]
    typo_side, other_side = (
        assign_splits(typos, {"train": 0.7, "test": 0.3}, seed=3),
        assign_splits(others, {"train": 0.7, "test": 0.3}, seed=3),
    )
    held = [t for t in typos if typo_side[t.instance_id] == "test"]
    stages = {
        "warm": [t for t in others if other_side[t.instance_id] == "train"],
        "grpo": [t for t in typos if typo_side[t.instance_id] == "train"],
    }
    paths = {name: tmp_path / f"{name}.jsonl" for name in (*stages, "held")}
    for name, side in (*stages.items(), ("held", held)):
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in records(side)))
    stage_args = [f"--stage={n}={paths[n]}" for n in stages]
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "heldback_disjoint.py"),
            "--heldback",
            str(paths["held"]),
            *stage_args,
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stdout
    assert "warm shares functions" in done.stderr and "grpo shares bug strings" in done.stderr


def test_cli_writes_the_sides_beside_their_repositories(tmp_path):
    tasks = corpus()
    src = tmp_path / "in"
    src.mkdir()
    lines = [json.dumps({**r, "repo_source": "in.git"}) + "\n" for r in records(tasks)]
    (src / "a.jsonl").write_text("".join(lines[:30]))
    (src / "b.jsonl").write_text("".join(lines[25:]))  # overlapping files: one task once
    out = tmp_path / "out" / "split.jsonl"
    args = ["tasks", "split", "-s", str(src / "a.jsonl"), "-s", str(src / "b.jsonl"), "-o", str(out)]
    done = subprocess.run(
        [*SWE_RL, *args, "--seed", "2", "--json"], capture_output=True, text=True, check=True
    )
    summary = json.loads(done.stdout)
    written = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(written) == len(tasks) == sum(summary["tasks"].values())
    assert {r["repo_source"] for r in written} == {"../in/in.git"}, "relative to the new folder"
    for side in ("heldback", "train", "dropped"):
        rows = (out.parent / f"split.{side}.jsonl").read_text().splitlines()
        assert len(rows) == summary["tasks"][side] and all(json.loads(x)["split"] == side for x in rows)
    bad = subprocess.run([*SWE_RL, *args, "--heldback-repo", "zlib"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown repository zlib" in bad.stderr and "Traceback" not in bad.stderr
