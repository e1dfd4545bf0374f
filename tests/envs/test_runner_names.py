"""A task whose test names were read from a log of pytest >= 8 gets pytest 8 in its env.

pytest 8.0 names duplicate parametrize ids ending in a digit ``[1234-1234_0]``, ``[1234-1234_1]``; pytest 7 and
before named them ``[1234-12340]``, ``[1234-12341]``. SWE-bench Verified's labels come from the official images'
pytest 8 (sphinx-7462, 8265, 9367: ``tests/test_pycode_ast.py::test_unparse[1234-1234_0]``), so an env dated to
the task's time, with its pytest 5, never prints those names and the gold patch reads as failing them.
"""

from __future__ import annotations

from swe_rl.envs.build.recipe import PYTEST_8, named_by_pytest_8, recipe_for
from swe_rl.tasks.model import Task

UNPARSE = "tests/test_pycode_ast.py::test_unparse"


def sphinx_task(*names: str, version: str = "3.1") -> Task:
    return Task.model_validate(
        {
            "instance_id": "sphinx-doc__sphinx-7462",
            "repo": "sphinx-doc/sphinx",
            "base_commit": "b3e26a6c851133b82b50f4b68b53692076574d13",
            "version": version,
            "created_at": "2020-04-11T00:00:00Z",
            "FAIL_TO_PASS": ["tests/test_pycode.py::test_ModuleAnalyzer_find_tags"],
            "PASS_TO_PASS": list(names),
        }
    )


def test_the_names_of_pytest_8_are_told_from_those_of_earlier_pytest() -> None:
    assert named_by_pytest_8([f"{UNPARSE}[1234-1234_0]", f"{UNPARSE}[1234-1234_1]"])
    assert not named_by_pytest_8([f"{UNPARSE}[1234-12340]", f"{UNPARSE}[1234-12341]"])  # pytest 7's
    assert not named_by_pytest_8([f"{UNPARSE}[1234-1234_0]"])  # one such name can be a value of its own
    assert not named_by_pytest_8(
        [f"{UNPARSE}[a_0]", f"{UNPARSE}[a_1]"]
    )  # no digit before: pytest 7 named it so


def test_a_task_named_by_pytest_8_runs_it_and_the_others_keep_their_recipe() -> None:
    named = recipe_for(sphinx_task(f"{UNPARSE}[1234-1234_0]", f"{UNPARSE}[1234-1234_1]"))
    assert PYTEST_8 in named.constraints and "pytest" in named.undated and "pluggy" in named.undated
    own = named.own()
    assert own is not None and PYTEST_8 in own.constraints  # the instance's install is held to it too
    # the control: the same version's task with pytest 7's names, whose recipe (and so env key) stays as it was
    other = recipe_for(sphinx_task(f"{UNPARSE}[1234-12340]", f"{UNPARSE}[1234-12341]"))
    assert PYTEST_8 not in other.constraints and "pytest" not in other.undated
    assert named.model_copy(update={"constraints": other.constraints, "undated": other.undated}) == other
