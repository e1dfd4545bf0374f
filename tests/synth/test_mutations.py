"""Mutation finders on small real code (the standard ast), splits, and issue text from a real pytest log."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

import pytest

from swe_rl.errors import ConfigError
from swe_rl.synth.mutations import (
    MUTATION_KINDS,
    Candidate,
    TextEdit,
    apply_edits,
    changes_code,
    combinations,
    same_bytecode,
)
from swe_rl.synth.mutators import find_mutations
from swe_rl.synth.problem import failure_excerpt, problem_statement
from swe_rl.synth.splits import assign_splits, parse_split, stats
from swe_rl.tasks.model import Task

CODE = textwrap.dedent(
    '''
    """A module."""


    def window(xs, lo, hi):
        """Items lo..hi of xs."""
        out = []
        total = 0
        for i in range(lo, hi):
            if xs[i] > 0 and i % 2 == 0:
                total += xs[i] * 2
            elif xs[i] is None:
                continue
            else:
                out.append(xs[i])
        if not out:
            out = [total]
        result = sorted(out, key=abs, reverse=True)
        result = result[: hi - lo]
        return len(result) >= 1


    class Box:
        def pick(self, items, k):
            if k < 0:
                raise ValueError("negative")
            return max(items[k], 0)


    def scale(x):
        factor = 3
        x = x * factor
        return x
    '''
)


def _mutants(kind: str) -> list[tuple[str, str]]:
    tree = ast.parse(CODE)
    found = [m for m in find_mutations("mod.py", CODE, tree) if m.kind == kind]
    return [(m.description, Candidate(mutations=(m,)).apply(CODE)) for m in found]


@pytest.mark.parametrize(
    "kind,expected_line",
    [
        ("op_compare", "if xs[i] >= 0 and i % 2 == 0:"),
        ("op_compare", "return len(result) > 1"),
        ("op_arith", "total -= xs[i] * 2"),
        ("op_arith", "total += xs[i] / 2"),
        ("op_bool", "if xs[i] > 0 or i % 2 == 0:"),
        ("off_by_one", "for i in range(lo, hi + 1):"),
        ("off_by_one", "result = result[: hi - lo - 1]"),
        ("cond_negate", "if out:"),
        ("cond_negate", "if not (k < 0):"),
        ("return_change", "return not (len(result) >= 1)"),
        ("constant_change", "if xs[i] > 1 and i % 2 == 0:"),
        ("args_swap", "return max(0, items[k])"),
        ("name_typo", "result = reslt[: hi - lo]"),
        ("name_typo", "x = x * facor"),
    ],
)
def test_each_kind_rewrites_one_place(kind, expected_line):
    mutants = _mutants(kind)
    assert mutants, f"no {kind} mutation found"
    texts = [text for _, text in mutants]
    assert any(expected_line in t for t in texts), [d for d, _ in mutants]
    for text in texts:
        ast.parse(text)  # every mutant is valid Python
        changed = [(a, b) for a, b in zip(CODE.splitlines(), text.splitlines(), strict=False) if a != b]
        assert changed or len(text.splitlines()) != len(CODE.splitlines())


def test_typos_only_hit_local_names_and_never_a_bound_one():
    typos = [d for d, _ in _mutants("name_typo")]
    assert "`result` -> `reslt`" in typos and "`factor` -> `facor`" in typos
    assert not any("`xs`" in d or "`sorted`" in d or "`abs`" in d for d in typos), typos  # short or not local
    code = "def f(total, toal):\n    return total + toal\n"
    found = {m.description for m in find_mutations("m.py", code, ast.parse(code)) if m.kind == "name_typo"}
    assert found == {"`toal` -> `tol`"}  # `total` -> `toal` would read another binding: no NameError


def test_statement_and_branch_deletion_and_guard_removal():
    texts = [t for _, t in _mutants("stmt_delete")]
    assert any("continue" not in t for t in texts), "a `continue` can be deleted"
    assert all("factor = 3" in t for t in texts), "the only binding of a name is never deleted"
    assert any("x = x * factor" not in t for t in texts), "a parameter rebinding can be deleted"
    assert any("out = []" not in t for t in texts), "a name bound twice can lose one binding"
    branches = [t for _, t in _mutants("branch_delete")]
    assert any("elif" not in t for t in branches), "the elif branch is deleted"
    guards = [t for _, t in _mutants("cond_remove")]
    assert any('raise ValueError("negative")\n        return' in t and "if k < 0" not in t for t in guards)
    assert any("if not out" not in t and "\n    out = [total]\n" in t for t in guards), "body dedented"


def test_docstrings_strings_and_uncovered_lines_are_left_alone():
    tree = ast.parse(CODE)
    every = find_mutations("mod.py", CODE, tree)
    assert {m.kind for m in every} == set(MUTATION_KINDS)
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for m in every:
        mutated = ast.parse(Candidate(mutations=(m,)).apply(CODE))
        kept = {
            n.value for n in ast.walk(mutated) if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        assert kept <= strings and ast.get_docstring(mutated.body[1]) == "Items lo..hi of xs."
    covered = {i + 1 for i, line in enumerate(CODE.splitlines()) if "return max" in line}
    only = find_mutations("mod.py", CODE, tree, covered)
    assert only and all(m.line in covered for m in only)
    assert find_mutations("mod.py", CODE, tree) == every, "deterministic"


def test_edits_and_combinations():
    assert (
        apply_edits("abcdef", [TextEdit(start=4, end=5, new="X"), TextEdit(start=0, end=1, new="")])
        == "bcdXf"
    )
    with pytest.raises(ValueError):
        apply_edits("abcdef", [TextEdit(start=0, end=3, new=""), TextEdit(start=2, end=4, new="")])
    tree = ast.parse(CODE)
    assert not changes_code(tree, CODE.replace("out = []", "out = [ ]"))
    assert not changes_code(tree, CODE + "def (:\n")
    singles = [Candidate(mutations=(m,)) for m in find_mutations("mod.py", CODE, tree)]
    combos = combinations(singles, {"mod.py": CODE})
    assert combos and all(len(c.mutations) in (2, 3) for c in combos)
    for combo in combos:
        assert len({m.function for m in combo.mutations}) == 1, "several bugs, one function"
        assert combo.difficulty == "multi-location"
        ast.parse(combo.apply(CODE))
    assert {c.difficulty for c in singles} == {"one-line", "multi-line"}


def _task(iid: str, function: str) -> Task:
    return Task.model_validate(
        {
            "instance_id": iid,
            "repo": "swe-rl-synth/x",
            "base_commit": "abcd1234",
            "synth": {"function": function, "file": function.split("::")[0], "kinds": ["op_arith"]},
        }
    )


def test_splits_keep_functions_apart():
    tasks = [_task(f"t{i}", f"m{i % 7}.py::f{i % 7}") for i in range(40)]
    shares = parse_split("train:0.8,test:0.2")
    assert shares == {"train": 0.8, "test": 0.2}
    split = assign_splits(tasks, shares, seed=1)
    by_function: dict[str, set[str]] = {}
    for t in tasks:
        by_function.setdefault(t.model_extra["synth"]["function"], set()).add(split[t.instance_id])
    assert all(len(s) == 1 for s in by_function.values())
    assert set(split.values()) == {"train", "test"}
    assert assign_splits(tasks, shares, seed=1) == split
    counts = stats(tasks)
    assert counts["tasks"] == 40 and counts["functions"] == 7 and counts["per_kind"] == {"op_arith": 40}
    for bad in ("train", "train:0.8", "train:x,test:1", "a:1,a:2", "train:0,test:1"):
        with pytest.raises(ConfigError):
            parse_split(bad)


def test_problem_statement_quotes_the_test_not_the_library(tmp_path):
    (tmp_path / "lib.py").write_text(
        "def pick(xs, i):\n    secret_line = xs\n    return secret_line[i + 1]\n"
    )
    (tmp_path / "test_lib.py").write_text(
        "from lib import pick\n\n\ndef test_pick():\n    assert pick([1, 2, 3], 0) == 1\n\n\n"
        "def test_last():\n    assert pick([1, 2, 3], 2) == 3\n"
    )
    log = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-p", "no:asyncio"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    f2p = ["test_lib.py::test_last", "test_lib.py::test_pick"]
    text = problem_statement("x__y-1", f2p, log)
    assert "test_lib.py::test_last" in text and "test_lib.py::test_pick" in text
    assert "IndexError" in text and "assert pick([1, 2, 3], 2) == 3" in text
    assert "secret_line" not in text and "lib.py:3" not in text, "no frame of the code under test"
    assert problem_statement("x__y-1", f2p, log) == text
    assert "assert pick([1, 2, 3], 0) == 1" in failure_excerpt(log, "test_lib.py::test_pick")


@pytest.mark.parametrize(
    ("original", "mutated", "same"),
    [
        # equivalent: a never-evaluated local annotation, an explicit `return None` at the end, line shifts
        (
            "def f(x):\n    y: int | None = x\n    return y\n",
            "def f(x):\n    y: int & None = x\n    return y\n",
            True,
        ),
        ("def f(x):\n    print(x)\n    return None\n", "def f(x):\n    print(x)\n", True),
        ("def f(x):\n    return x\n", "\n\ndef f(x):\n\n    return x\n", True),
        # not equivalent (positive controls): values equal in a tuple, docstrings, real changes, bad syntax
        ("X = (1, 2)\n", "X = (1.0, 2)\n", False),
        ("X = True\n", "X = 1\n", False),
        ("X = 0.0\n", "X = -0.0\n", False),
        ('def f():\n    "Doc."\n', 'def f():\n    "Doc!"\n', False),
        ("def f(x):\n    return x + 1\n", "def f(x):\n    return x - 1\n", False),
        ("def f(x):\n    return x\n", "def f(x):\n    return (x\n", False),
    ],
)
def test_same_bytecode(original, mutated, same):
    assert same_bytecode("mod.py", original, mutated) is same
