"""The mining rules on their own: file classes, env inference, the issue text's redactions, exclusion."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from swe_rl.harness.official import parse_test_log
from swe_rl.mine.envinfer import LOG_PARSER, PYTHONS, TEST_CMD, by_date, infer_env
from swe_rl.mine.history import drop_reason, is_test_file, split_kind
from swe_rl.mine.problem import clean_message
from swe_rl.mine.state import load_exclusion

RUNNING = f"{sys.version_info[0]}.{sys.version_info[1]}"
PATCH = """diff --git a/pkg/core.py b/pkg/core.py
index 1111111..2222222 100644
--- a/pkg/core.py
+++ b/pkg/core.py
@@ -1,2 +1,2 @@
 def size(xs):
-    return len(xs) - 1
+    return len(xs)
"""


def test_test_files_follow_swe_bench_rules():
    tests = ["tests/test_a.py", "pkg/test/helpers.py", "testing/data.json", "pkg/a_test.py", "conftest.py"]
    tests += ["pkg/test_b.py", "tests/fixtures/input.txt"]
    sources = ["pkg/core.py", "setup.py", "pkg/testutils.py", "latest/tested.py"]
    neither = ["README.md", "docs/index.rst", "pkg/data.json", ".github/workflows/ci.yml"]
    assert split_kind(tests + sources + neither) == (sorted(sources), sorted(tests), sorted(neither))
    assert not is_test_file("contest.py") and is_test_file("a/b/tests/c/d.py")
    deleted = frozenset({"tests/test_a.py"})
    assert split_kind(["tests/test_a.py", "a.py"], deleted) == (["a.py"], [], ["tests/test_a.py"])
    assert (
        drop_reason(["a.py"], []) == "no test change"
        and drop_reason([], ["tests/x.py"]) == "no source change"
    )
    assert drop_reason([], []) == "no source or test change" and drop_reason(["a.py"], ["tests/t.py"]) is None


def _infer(files: dict[str, str], pytest: str = "dated"):  # type: ignore[no-untyped-def]
    return infer_env(files.get, sorted(files), pytest=pytest)  # type: ignore[arg-type]


def test_the_install_takes_the_test_extra_and_the_requirement_files():
    pyproject = f'[project]\nname = "p"\nrequires-python = "=={RUNNING}.*"\n'
    pyproject += '[project.optional-dependencies]\ndocs = ["sphinx"]\ntests = ["hypothesis"]\n'
    found = _infer(
        {"pyproject.toml": pyproject, "requirements-dev.txt": "", "requirements/test-extra.txt": ""}
    )
    assert found.reason == "" and found.fields["python"] == RUNNING
    assert found.fields["install"] == (
        "python -m pip install -e '.[tests]' && python -m pip install -r requirements-dev.txt && "
        "python -m pip install -r requirements/test-extra.txt && python -m pip install pytest"
    )
    assert found.fields["env_seed"] == [] and found.fields["log_parser"] == "parse_log_pytest"
    assert "requires-python" in found.why["python"] and "[tests]" in found.why["install"]


def test_tox_s_requirement_files_win_and_a_file_of_minimum_versions_is_never_taken():
    """Flask's layout: tox installs requirements/tests.txt for every env and tests-pallets-min.txt (the oldest
    releases its setup allows) for one env only; installed too, the minimum pins broke every test."""
    pyproject = f'[project]\nname = "p"\nrequires-python = "=={RUNNING}.*"\n'
    tox = "[testenv]\ndeps =\n    -r requirements/tests.txt\n    min: -r requirements/tests-pallets-min.txt\n"
    files = {
        "pyproject.toml": pyproject,
        "requirements/tests.txt": "",
        "requirements/tests-pallets-min.txt": "",
    }
    with_tox = _infer({**files, "tox.ini": tox}).fields["install"]
    without = _infer(files).fields["install"]  # no tox.ini: the folder's test files, the minima left out
    for install in (with_tox, without):
        assert "-r requirements/tests.txt" in install and "tests-pallets-min" not in install
    # the control: a test requirements file that is not one of minima is taken from the folder
    assert (
        "-r requirements/tests-extra.txt"
        in _infer({**files, "requirements/tests-extra.txt": ""}).fields["install"]
    )


def test_requirement_files_beside_the_one_tox_names_are_installed_too():
    """Conan's layout: tox (or setup.py) names conans/requirements_dev.txt; the tests also import what
    conans/requirements_server.txt installs (its CI installs all three). Docs requirements stay out."""
    files = {
        "setup.py": "setup(name='conan')\n",
        "tox.ini": "[testenv]\ndeps = -rconans/requirements_dev.txt\n",
        **{
            f"conans/{n}.txt": ""
            for n in ("requirements", "requirements_dev", "requirements_server", "requirements_docs")
        },
        "other/requirements_x.txt": "",
    }

    def installed() -> list[str]:
        return [w for w in _infer(files).fields["install"].split() if w.startswith(("conans/", "other/"))]

    assert installed() == [
        f"conans/{n}.txt" for n in ("requirements_dev", "requirements", "requirements_server")
    ]
    # without tox.ini (Conan's 2.0 line): the files setup.py reads name the folder
    files.pop("tox.ini")
    files["setup.py"] = 'setup(name="conan", install_requires=get_requires("conans/requirements.txt"))\n'
    assert installed() == [
        f"conans/{n}.txt" for n in ("requirements", "requirements_dev", "requirements_server")
    ]


def test_setup_cfg_and_setup_py_declare_extras_and_pythons_too():
    cfg = f"[options]\npython_requires = >={RUNNING}\n[options.extras_require]\ntesting = pytest-cov\n"
    assert "-e '.[testing]'" in _infer({"setup.cfg": cfg, "setup.py": "setup()"}).fields["install"]
    setup = f"setup(python_requires='>={RUNNING}', extras_require={{'test': ['mock']}})"
    assert _infer({"setup.py": setup}).fields["install"].startswith("python -m pip install -e '.[test]'")
    # dask (2023): the extra assigned as an item after the dict; the control compares, assigns nothing
    for line, target in (
        ('extras_require["test"] = ["pandas[test]"]', "'.[test]'"),
        ('if x["test"] == 1: 0', "."),
    ):
        setup = f'extras_require: dict = {{"array": ["numpy"]}}\n{line}\nsetup(python_requires=">={RUNNING}")'
        assert _infer({"setup.py": setup}).fields["install"].startswith(f"python -m pip install -e {target} ")


def test_a_repository_without_packaging_installs_only_pytest_and_the_host_pytest_installs_nothing():
    assert _infer({"tiny/__init__.py": ""}).fields["install"] == "python -m pip install pytest"
    host = _infer({"tiny/__init__.py": ""}, pytest="host")
    assert host.fields["install"] == "" and host.fields["env_seed"] == ["pytest"]
    assert host.fields["python"] == RUNNING, "the host's pytest runs on the Python running swe-rl"


def test_no_interpreter_for_the_metadata_is_a_reason_not_a_guess():
    found = _infer({"pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=4"\n'})
    assert found.fields == {} and "no Python on this host satisfies >=4" in found.reason
    assert "does not parse" in _infer({"pyproject.toml": "[project"}).reason
    classifiers = 'classifiers = ["Programming Language :: Python :: 2.7"]\n'
    only_old = _infer({"setup.py": f"setup(python_requires='<3', {classifiers})"})
    assert only_old.reason.startswith("no Python on this host satisfies <3")


def test_the_message_loses_patch_lines_trailers_and_unshown_file_names():
    message = "Fix size in pkg/core.py\n\nIt was one short:\n    return len(xs)\n\nSigned-off-by: A <a@b>\n"
    cleaned = clean_message(message, PATCH, ["pkg/core.py"], shown="tests/test_core.py::test_size")
    assert cleaned == "Fix size in the code\n\nIt was one short:"
    shown = "E   File pkg/core.py, line 2"
    assert "pkg/core.py" in clean_message(message, PATCH, ["pkg/core.py"], shown=shown), "the output shows it"


def test_exclusion_matches_base_commits_and_patches_whatever_their_index_lines(tmp_path: Path):
    row = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "a" * 40, "patch": PATCH}
    row |= {"problem_statement": "x", "FAIL_TO_PASS": ["t"]}
    (tmp_path / "d.jsonl").write_text(json.dumps(row) + "\n")
    exclusion = load_exclusion([str(tmp_path / "d.jsonl")])
    assert exclusion.why("a" * 40, "") == "base commit is a task's in the excluded dataset"
    other_index = PATCH.replace("1111111..2222222", "abcdef0123..0123abcdef")
    assert exclusion.why("b" * 40, other_index) == "patch is a task's in the excluded dataset"
    assert exclusion.why("b" * 40, PATCH.replace("len(xs)\n", "len(xs) + 0\n")) == ""


TOX = """[tox]
envlist = py{38,37,36,py3}, style

[testenv]
deps =
    pytest
    freezegun
    py36: dataclasses
    -r{toxinidir}/requirements/extra.txt
    {env:EXTRA:}
commands = pytest {posargs}
"""


def test_tox_deps_and_envlist_count_and_the_commit_date_picks_among_pythons():
    import pytest

    from swe_rl.mine.envinfer import host_has

    assert by_date("2020-06-01T00:00:00Z")[:3] == ("3.8", "3.7", "3.6"), "3.8 was the newest then"
    assert by_date("2020-06-01T00:00:00Z")[-2:] == ("3.12", "3.13"), "then later ones, the least change first"
    assert by_date("") == PYTHONS
    if not any(host_has(v) for v in ("3.6", "3.7", "3.8")):
        pytest.skip("needs one of Pythons 3.6, 3.7 and 3.8 on this host (pyenv)")  # tox's envlist, all older
    files = {"setup.py": "setup()", "tox.ini": TOX, "requirements/extra.txt": ""}
    found = infer_env(files.get, sorted(files), as_of="2020-06-01T00:00:00Z", pytest="dated")
    steps = found.fields["install"].split(" && ")
    assert steps[1:] == [
        "python -m pip install -r requirements/extra.txt",
        "python -m pip install pytest freezegun",
        "python -m pip install pytest",
    ], "factor-conditional and substituted deps are left out"
    assert "listed versions 3.6, 3.7, 3.8" in found.why["python"]


def _commit(repo: Path, when: str, files: dict[str, str]) -> str:
    import subprocess

    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    env = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    run = {"cwd": repo, "env": env, "check": True, "capture_output": True, "text": True}
    subprocess.run(["git", "add", "-A"], **run)  # type: ignore[call-overload]
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", when], **run)  # type: ignore[call-overload]
    return subprocess.run(["git", "rev-parse", "HEAD"], **run).stdout.strip()  # type: ignore[call-overload]


def test_neighbours_whose_dependency_files_did_not_change_are_dated_by_one_commit(tmp_path: Path):
    """Envs are dated by an anchor commit (the last that changed what the env is read from, or the quarter's
    first), so neighbouring candidates resolve the same packages; each commit's own date (the control)
    differs for every one of them."""
    import subprocess

    from swe_rl.mine.envinfer import DEPENDENCY_FILES
    from swe_rl.mine.history import History

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    setup = _commit(tmp_path, "2021-01-05T10:00:00Z", {"setup.py": "setup()\n", "pkg/a.py": "x = 1\n"})
    code1 = _commit(tmp_path, "2021-02-01T10:00:00Z", {"pkg/a.py": "x = 2\n"})
    code2 = _commit(tmp_path, "2021-03-01T10:00:00Z", {"pkg/a.py": "x = 3\n", "docs/requirements.txt": "s\n"})
    reqs = _commit(tmp_path, "2021-03-10T10:00:00Z", {"requirements-dev.txt": "pytest\n"})
    code3 = _commit(tmp_path, "2021-03-20T10:00:00Z", {"pkg/a.py": "x = 4\n"})
    april = _commit(tmp_path, "2021-04-02T10:00:00Z", {"pkg/a.py": "x = 5\n"})
    code4 = _commit(tmp_path, "2021-05-02T10:00:00Z", {"pkg/a.py": "x = 6\n", "tests/t.py": "y\n"})
    history = History(tmp_path)

    def anchor(commit: str) -> tuple[str, str]:
        got = history.env_anchor(commit, DEPENDENCY_FILES)
        return got.commit, got.rule

    changed, quarter = "dependency files changed", "first commit of the quarter"
    assert anchor(code1) == anchor(code2) == (setup, changed)  # a docs requirements file is not read
    assert anchor(reqs) == anchor(code3) == (reqs, changed)
    assert anchor(april) == anchor(code4) == (april, quarter)  # never dated more than a quarter back
    dates = {c.created_at for c in history.commits() if c.commit in (code1, code2, code3, code4)}
    assert len(dates) == 4


def _git(repo: Path, *args: str, when: str = "2021-06-01T10:00:00Z") -> str:
    import subprocess

    env = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    done = subprocess.run(
        ["git", *ident, *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def test_a_long_lived_branch_is_unfolded_into_its_own_pull_requests(tmp_path: Path):
    """A release branch that merged pull requests of its own reaches the main line as one merge: its pull
    requests (and direct commits, and a maintenance branch's pull requests) become the candidates, the main
    line merged into it does not; a pull request's own branch merged into the main line (the control) stays
    one candidate."""
    import subprocess

    from swe_rl.mine.history import History

    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp_path)], check=True)
    _commit(tmp_path, "2021-01-01T10:00:00Z", {"pkg/a.py": "a = 1\n"})
    _git(tmp_path, "checkout", "-qb", "3.x")
    _git(tmp_path, "checkout", "-qb", "pr1")
    _commit(tmp_path, "2021-01-02T10:00:00Z", {"pkg/a.py": "a = 2\n"})
    _git(tmp_path, "checkout", "-q", "3.x")
    _git(tmp_path, "merge", "-q", "--no-ff", "pr1", "-m", "Merge pull request #1")
    pr1 = _git(tmp_path, "rev-parse", "HEAD")
    direct = _commit(tmp_path, "2021-01-03T10:00:00Z", {"pkg/b.py": "b = 1\n"})
    _git(tmp_path, "checkout", "-q", "main")
    _commit(tmp_path, "2021-01-04T10:00:00Z", {"pkg/c.py": "c = 1\n"})
    _git(tmp_path, "checkout", "-q", "3.x")
    _git(tmp_path, "merge", "-q", "--no-ff", "main", "-m", "Merge branch 'main' into 3.x")
    _git(
        tmp_path, "checkout", "-qb", "3.4.x"
    )  # a maintenance branch of the branch, with its own pull request
    _git(tmp_path, "checkout", "-qb", "pr3")
    _commit(tmp_path, "2021-01-04T12:00:00Z", {"pkg/e.py": "e = 1\n"})
    _git(tmp_path, "checkout", "-q", "3.4.x")
    _git(tmp_path, "merge", "-q", "--no-ff", "pr3", "-m", "Merge pull request #3")
    pr3 = _git(tmp_path, "rev-parse", "HEAD")
    _git(tmp_path, "checkout", "-q", "3.x")
    _git(tmp_path, "merge", "-q", "--no-ff", "3.4.x", "-m", "Merge branch '3.4.x' into 3.x")
    _git(tmp_path, "checkout", "-q", "main")
    _git(tmp_path, "merge", "-q", "--no-ff", "3.x", "-m", "Merge branch '3.x'")
    release = _git(tmp_path, "rev-parse", "HEAD")
    _git(tmp_path, "checkout", "-qb", "pr2")
    _commit(tmp_path, "2021-01-05T10:00:00Z", {"pkg/d.py": "d = 1\n"})
    _git(tmp_path, "checkout", "-q", "main")
    _git(tmp_path, "merge", "-q", "--no-ff", "pr2", "-m", "Merge pull request #2")
    history = History(tmp_path)
    merges = {c.commit: c for c in history.commits() if len(c.parents) > 1}
    unfolded = history.branch_line(merges[release])
    assert unfolded is not None
    line, left_out = unfolded
    assert [c.commit for c in line] == [pr1, direct, pr3] and left_out == 2  # main into 3.x; 3.4.x into 3.x
    assert {c.via for c in line} == {release}
    (pr2,) = set(merges) - {release}
    assert history.branch_line(merges[pr2]) is None


def test_the_test_command_reads_statuses_through_pytest_pretty_and_configured_color(tmp_path):
    """pydantic's tests run with pytest-pretty, whose summary replaces -rA's, and dask's addopts ask for
    --color=yes, which wraps each status in escape codes: every candidate of both was dropped as "no test
    passes with the fix". The stand-in for pytest-pretty is a plugin under its entry-point name ``pretty``
    that empties -rA's report characters; each control leaves out the option that counters one of them."""
    site = tmp_path / "site"
    (site / "hiding_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "hiding_plugin-1.0.dist-info" / "METADATA").write_text("Name: hiding-plugin\nVersion: 1.0\n")
    (site / "hiding_plugin-1.0.dist-info" / "entry_points.txt").write_text("[pytest11]\npretty = hiding\n")
    (site / "hiding.py").write_text("def pytest_configure(config):\n    config.option.reportchars = ''\n")
    (tmp_path / "test_a.py").write_text("def test_one():\n    assert True\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("PYTEST_ADDOPTS", None)

    def statuses(command: str, config: str) -> dict[str, str]:
        (tmp_path / "pytest.ini").write_text(f"[pytest]\naddopts = {config}\n")
        argv = [sys.executable, *shlex.split(command)[1:], "test_a.py"]
        out = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True).stdout
        return parse_test_log(out, LOG_PARSER)

    passed = {"test_a.py::test_one": "PASSED"}
    assert statuses(TEST_CMD.replace(" -p no:pretty", ""), "") == {}
    assert statuses(TEST_CMD.replace(" --color=no", ""), "--color=yes") != passed
    assert statuses(TEST_CMD, "--color=yes") == passed


def test_path_keeps_only_changes_to_source_files_at_or_under_it(tmp_path: Path):
    """``--path`` narrows the candidates to changes of a source file at or under a path, component by
    component (``pkg/a`` is the directory, not a prefix of ``pkg/ab.py``); the control without it keeps all
    three, and what it leaves out is counted, not lost."""
    import subprocess

    from swe_rl.mine.history import History
    from swe_rl.mine.pipeline import candidates_of

    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp_path)], check=True)
    _commit(tmp_path, "2021-01-01T10:00:00Z", {"pkg/a/core.py": "a = 1\n", "tests/test_a.py": "A = 1\n"})
    in_dir = _commit(
        tmp_path, "2021-01-02T10:00:00Z", {"pkg/a/core.py": "a = 2\n", "tests/test_a.py": "A = 2\n"}
    )
    sibling = _commit(
        tmp_path, "2021-01-03T10:00:00Z", {"pkg/ab.py": "b = 1\n", "tests/test_b.py": "B = 1\n"}
    )
    other = _commit(tmp_path, "2021-01-04T10:00:00Z", {"other/x.py": "x = 1\n", "tests/test_x.py": "X = 1\n"})
    history = History(tmp_path)
    commits = history.commits()

    def ids(paths: tuple[str, ...]) -> list[str]:
        return [c.commit for c in candidates_of(history, commits, paths)[0]]

    assert ids(()) == [in_dir, sibling, other]
    assert ids(("pkg/a",)) == [in_dir]
    assert ids(("pkg/ab.py", "other/")) == [sibling, other]
    assert candidates_of(history, commits, ("pkg/a",))[1]["history", "no source file under --path"] == 2


WORKFLOW = """jobs:
  test:
    strategy:
      matrix:
        python-version: [3.8, 3.10, pypy-3.8, "3.12-dev"]
    steps:
      - uses: actions/setup-python@v4
        with:
          python-version: ${{ matrix.python-version }}
"""


def test_ci_files_list_the_pythons_where_the_metadata_lists_none():
    """A workflow's matrix and .travis.yml name the versions CI runs: 3.10 stays 3.10 (YAML reads it as the
    float 3.1), pypy and development versions are not CPython releases. The controls: without CI files the
    commit's date alone picks 3.11; with a classifier, the project's own word wins over its CI."""
    import pytest

    from swe_rl.mine.envinfer import host_has

    if not all(host_has(v) for v in ("3.9", "3.10", "3.11")):
        pytest.skip("needs Pythons 3.9, 3.10 and 3.11 on this host (pyenv)")
    files = {"setup.py": "setup()", ".github/workflows/ci.yml": WORKFLOW, ".travis.yml": "python:\n  - 3.7\n"}

    def pick(files: dict[str, str]) -> tuple[str, str]:
        found = infer_env(files.get, sorted(files), as_of="2023-06-01T00:00:00Z", pytest="dated")
        return found.fields["python"], found.why["python"]

    python, why = pick(files)
    assert python == "3.10" and "versions its CI runs 3.10, 3.7, 3.8" in why
    assert pick({"setup.py": "setup()"})[0] == "3.11", "3.11 was the newest by the commit's date"
    classified = files | {"setup.py": 'setup(classifiers=["Programming Language :: Python :: 3.9"])'}
    assert pick(classified) == ("3.9", pick(classified)[1]) and "listed versions 3.9" in pick(classified)[1]
    broken = files | {".github/workflows/ci.yml": "jobs: [", ".travis.yml": "python: 3.8\n"}
    assert pick(broken)[0] == "3.8", "a file that does not parse says nothing; the other still does"
