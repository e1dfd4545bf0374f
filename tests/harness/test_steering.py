"""The steering rule, path by path (docs/SECURITY.md, "Reward hacking"); the attacks themselves run in
test_reward_hacking.py."""

from __future__ import annotations

import pytest

from swe_rl.harness.inventory import _base_packages, _changes, _numstat_paths
from swe_rl.harness.steering import REFUSE, action_for, patch_path_rule, path_rule, shadow_names

PACKAGES = {"textkit", "textkit/sub"}


def rule(path: str, *, new: bool = True, test_files: tuple[str, ...] = ("tests/test_wrap.py",)) -> str | None:
    return path_rule(
        path,
        test_files=test_files,
        new=new,
        package_dirs=PACKAGES,
        base_packages=PACKAGES,
        shadow=shadow_names({"numpy"}),
    )


@pytest.mark.parametrize(
    "path,expected",
    [
        ("conftest.py", "conftest"),
        ("textkit/sub/conftest.py", "conftest"),
        ("pytest.toml", "runner_config"),
        (".pytest.toml", "runner_config"),
        ("tests/pytest.toml", "runner_config"),
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
        found = path_rule(
            path,
            test_files=(),
            new=True,
            package_dirs=packages,
            base_packages=PACKAGES,
            shadow=shadow_names(),
        )
        assert found == "shadow_module"
    assert rule("textkit/inspect.py") is None
    assert rule("textkit/sub/pytest.py") is None
    assert rule("pytest.py", new=False) is None
    assert rule("textkit/wrap.py") is None


@pytest.mark.parametrize(
    "path,installed",
    [
        ("src/_pytest/newmodule.py", ()),  # the pytest repository's own package: a runner name
        ("src/_pytest/config/helpers.py", ()),
        ("astroid/brain/brain_new.py", ("astroid",)),  # `setup.py develop` lists astroid.egg-link
    ],
)
def test_a_new_file_in_a_package_the_repository_had_is_no_shadow(path, installed):
    """A gold patch may add a module to its own package even when the package's name is the runner's or
    the env lists it (a legacy editable install): the name was the repository's before the patch. A new
    package of that name is still a shadow, and a new directory inside is still outside the packages."""
    base = {"src/_pytest", "src/_pytest/config", "astroid", "astroid/brain"}

    def new_rule(path: str, base_packages: set[str] = base) -> str | None:
        return path_rule(
            path,
            test_files=(),
            new=True,
            package_dirs=base | {"src/_pytest/fresh"},
            base_packages=base_packages,
            shadow=shadow_names(installed),
        )

    assert new_rule(path) is None
    assert new_rule(path, base_packages=set()) == "shadow_module"
    assert new_rule("src/_pytest/fresh/__init__.py") == "outside_package"


@pytest.mark.parametrize(
    "path", ["textkit/wrap.py", "README.md", "docs/usage.rst", "CHANGES.txt", "bin/tool"]
)
def test_edits_to_existing_files_that_are_not_tests_or_configuration_are_kept(path):
    assert rule(path, new=False) is None


@pytest.mark.parametrize("path", ["textkit/helpers.py", "textkit/sub/data.json", "textkit/testing_utils.py"])
def test_new_files_inside_an_existing_package_are_kept(path):
    assert rule(path) is None


@pytest.mark.parametrize(
    "path",
    [
        "newmodule.py",  # a new top-level module of an innocuous name
        "org/python/core.py",  # the stdlib's copy and pickle try `org.python.core` (Python <= 3.11)
        "org/__init__.py",
        "plug.py",
        "README.md",
        "docs/usage.rst",
        "src/newpkg/__init__.py",
        "textkit/newsub/mod.py",  # a new directory inside a package: not a package before the patch
        "textkit/newsub/__init__.py",
        "__init__.py",
        ".flake8",
    ],
)
def test_new_files_outside_the_base_packages_are_not_kept(path):
    assert rule(path) == "outside_package"


def test_a_package_that_the_patch_makes_does_not_count():
    """The allow-list reads the packages before the patch: a new ``__init__.py`` makes nothing an
    existing package, and the root is never one (it is a sys.path root whatever it holds)."""
    after = PACKAGES | {"org", "org/python", ""}

    def new_rule(path: str) -> str | None:
        return path_rule(
            path, test_files=(), new=True, package_dirs=after, base_packages=PACKAGES | {""}, shadow=()
        )

    assert new_rule("org/python/core.py") == "outside_package"
    assert new_rule("newmodule.py") == "outside_package"
    assert new_rule("textkit/ok.py") is None


@pytest.mark.parametrize(
    "path,expected",
    [
        (".flake8", "dotfile"),
        (".github/workflows/ci.yml", "dotfile"),
        ("textkit/.hidden", "dotfile"),
        ("mypy.ini", "tool_config"),
        ("docs/setup.toml", "tool_config"),
        ("noxfile.py", "tool_config"),
        ("textkit/pylintrc", "tool_config"),
        ("MANIFEST.in", "tool_config"),
    ],
)
def test_edits_to_existing_configuration_are_not_kept(path, expected):
    assert rule(path, new=False) == expected


def test_package_data_in_config_formats_is_code_not_configuration():
    assert rule("textkit/sub/defaults.toml", new=False) is None
    assert rule("textkit/sub/defaults.cfg") is None


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


def test_the_packages_before_the_patch_come_from_those_after_it_and_its_changes():
    changes = _changes(
        ":000000 100644 0000000 1111111 A\0org/__init__.py\0"
        ":100644 000000 2222222 0000000 D\0textkit/old/__init__.py\0"
        ":000000 100644 0000000 3333333 A\0textkit/new.py\0"
    )
    after = {"org", "textkit"}
    assert _base_packages(after, changes) == {"textkit", "textkit/old"}
