"""The steering rule, path by path (docs/SECURITY.md, "Reward hacking"); the attacks themselves run in
test_reward_hacking.py."""

from __future__ import annotations

import pytest

from swe_rl.harness.inventory import _changes, _numstat_paths
from swe_rl.harness.steering import REFUSE, action_for, patch_path_rule, path_rule, shadow_names

PACKAGES = {"textkit", "textkit/sub"}


def rule(path: str, *, new: bool = True, test_files: tuple[str, ...] = ("tests/test_wrap.py",)) -> str | None:
    return path_rule(
        path, test_files=test_files, new=new, package_dirs=PACKAGES, shadow=shadow_names({"numpy"})
    )


@pytest.mark.parametrize(
    "path,expected",
    [
        ("conftest.py", "conftest"),
        ("textkit/sub/conftest.py", "conftest"),
        ("pytest.ini", "runner_config"),
        ("tests/.pytest.ini", "runner_config"),
        ("tox.ini", "runner_config"),
        ("docs/setup.cfg", "runner_config"),
        ("pyproject.toml", "runner_config"),
        ("setup.py", "runner_config"),
        (".coveragerc", "runner_config"),
        (".gitattributes", "git_attributes"),
        ("tests/.gitattributes", "git_attributes"),
        (".gitmodules", "git_attributes"),
        ("sitecustomize.py", "startup_hook"),
        ("textkit/usercustomize.py", "startup_hook"),
        ("evil.pth", "startup_hook"),
        ("textkit/__pycache__/wrap.cpython-311.pyc", "compiled_module"),
        ("textkit/wrap.pyc", "compiled_module"),
        ("textkit/wrap.cpython-311-x86_64-linux-gnu.so", "compiled_module"),
        ("textkit/__pycache__/notes.txt", "compiled_module"),
        ("evil-1.0.dist-info/entry_points.txt", "package_metadata"),
        ("textkit.egg-info/entry_points.txt", "package_metadata"),
        ("evil.egg-link", "package_metadata"),
        ("tests/test_wrap.py", "test_file"),
        ("tests/data/expected.txt", "test_file"),
        ("textkit/sub/tests/helpers.py", "test_file"),
        ("textkit/test_other.py", "test_file"),
        ("textkit/other_test.py", "test_file"),
        ("app/tests.py", "test_file"),
        ("pytest.py", "shadow_module"),
        ("py.py", "shadow_module"),
        ("unittest.py", "shadow_module"),
        ("inspect.py", "shadow_module"),
        ("src/argparse.py", "shadow_module"),
        ("numpy.py", "shadow_module"),
        ("../escape.txt", "outside_repo"),
        ("a/../../escape.txt", "outside_repo"),
        ("/etc/passwd", "outside_repo"),
        (".git/hooks/post-checkout", "git_dir"),
        ("sub/.GIT/config", "git_dir"),
        ("bad\nname.py", "odd_name"),
        ("bad\udcffname.py", "odd_name"),
    ],
)
def test_steering_paths(path, expected):
    assert rule(path) == expected


def test_shadow_modules_need_a_sys_path_root():
    """A new package at the root named like the runner shadows it; the same name inside a package
    does not, and neither does an existing file the patch edits (the repo's own module)."""
    packages = PACKAGES | {"pluggy", "_pytest"}
    for path in ("pluggy/__init__.py", "pluggy/hooks.py", "_pytest/runner.py"):
        assert path_rule(path, test_files=(), new=True, package_dirs=packages, shadow=shadow_names()) == (
            "shadow_module"
        )
    assert rule("textkit/inspect.py") is None
    assert rule("textkit/sub/pytest.py") is None
    assert rule("pytest.py", new=False) is None
    assert rule("textkit/wrap.py") is None
    assert rule("newmodule.py") is None


@pytest.mark.parametrize(
    "path", ["textkit/wrap.py", "README.md", "docs/usage.rst", "textkit/testing_utils.py", "CHANGES.txt"]
)
def test_ordinary_files_are_not_steering(path):
    assert rule(path) is None
    assert rule(path, new=False) is None


def test_patch_paths_are_checked_for_refusals_only():
    assert patch_path_rule("conftest.py") is None
    assert patch_path_rule("../x") == "outside_repo"
    assert patch_path_rule(".git/config") == "git_dir"


def test_actions_per_mode():
    assert action_for("conftest", "official") == "flagged"
    assert action_for("conftest", "strict") == "reverted"
    assert action_for("symlink", "strict") == "refused"
    assert {"outside_repo", "git_dir", "symlink", "nested_repo", "odd_name"} == REFUSE


def test_git_outputs_are_parsed_with_renames_and_binary():
    numstat = "1\t0\ttextkit/wrap.py\0-\t-\tblob.bin\0" + "0\t0\t\0old name.py\0conftest.py\0"
    assert _numstat_paths(numstat) == ["textkit/wrap.py", "blob.bin", "old name.py", "conftest.py"]
    raw = (
        ":000000 100644 0000000 1111111 A\0conftest.py\0"
        ":100644 120000 2222222 3333333 T\0tests/test_wrap.py\0"
    )
    changes = _changes(raw)
    assert [(c.path, c.new, c.new_mode) for c in changes] == [
        ("conftest.py", True, "100644"),
        ("tests/test_wrap.py", False, "120000"),
    ]
