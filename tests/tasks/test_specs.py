"""The spec table covers every repository and version of the official SWE-bench specs, as facts we can run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from swe_rl.envs.build.interpreters import find_python
from swe_rl.errors import ConfigError, EnvBuildError
from swe_rl.harness.evalscript import EVAL_SCRIPT, TEST_PATCH, eval_script
from swe_rl.harness.official import _swebench, parser_name
from swe_rl.tasks.model import Task
from swe_rl.tasks.spec_table import SPECS
from swe_rl.tasks.specs import check_system, conda_env_packages, spec_for

# The keys of MAP_REPO_VERSION_TO_SPECS_PY in swebench 4.1.0 (swebench/harness/constants/python.py, read from
# its wheel on PyPI), less swe-bench/humaneval, which is not a repository.
OFFICIAL = {
    "astropy/astropy": "3.0 3.1 3.2 4.1 4.2 4.3 5.0 5.1 5.2 v5.3 0.1 0.2 0.3 0.4 1.1 1.2 1.3",
    "dbt-labs/dbt-core": "0.13 0.14 0.15 0.16 0.17 0.18 0.19 0.20 0.21 1.0 1.1 1.2 1.3 1.4 1.5 1.6 1.7",
    "django/django": "1.7 1.8 1.9 1.10 1.11 2.0 2.1 2.2 1.4 1.5 1.6 3.0 3.1 3.2 4.0 4.1 4.2 5.0 5.1 5.2",
    "matplotlib/matplotlib": "3.5 3.6 3.7 3.8 3.9 3.1 3.2 3.3 3.4 3.0 2.0 2.1 2.2 1.0 1.1 1.2 1.3 1.4 1.5",
    "marshmallow-code/marshmallow": "2.18 2.19 2.20 3.0 3.1 3.10 3.11 3.12 3.13 3.15 3.16 3.19 3.2 3.4 3.8 3.9",
    "mwaskom/seaborn": "0.11 0.12 0.13 0.14",
    "pallets/flask": "2.0 2.1 2.2 2.3 3.0 3.1",
    "psf/requests": "0.7 0.8 0.9 0.11 0.13 0.14 1.1 1.2 2.0 2.2 2.3 2.4 2.5 2.7 2.8 2.9 2.10 2.11 2.12 2.17 2.18 "
    "2.19 2.22 2.26 2.25 2.27 2.31 3.0",
    "pvlib/pvlib-python": "0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9",
    "pydata/xarray": "0.12 0.18 0.19 0.20 2022.03 2022.06 2022.09 2023.07 2024.05",
    "pydicom/pydicom": "1.0 1.1 1.2 1.3 1.4 2.0 2.1 2.2 2.3 2.4 3.0",
    "pylint-dev/astroid": "2.10 2.12 2.13 2.14 2.15 2.16 2.5 2.6 2.7 2.8 2.9 3.0",
    "pylint-dev/pylint": "2.10 2.11 2.13 2.14 2.15 2.16 2.17 2.8 2.9 3.0 3.1 3.2 3.3 4.0",
    "pytest-dev/pytest": "4.4 4.5 4.6 5.0 5.1 5.2 5.3 5.4 6.0 6.2 6.3 7.0 7.1 7.2 7.4 8.0 8.1 8.2 8.3 8.4",
    "pyvista/pyvista": "0.20 0.21 0.22 0.23 0.24 0.25 0.26 0.27 0.28 0.29 0.30 0.31 0.32 0.33 0.34 0.35 0.36 0.37 "
    "0.38 0.39 0.40 0.41 0.42 0.43",
    "scikit-learn/scikit-learn": "0.20 0.21 0.22 1.3 1.4 1.5 1.6",
    "sphinx-doc/sphinx": "1.5 1.6 1.7 1.8 2.0 2.1 2.2 2.3 2.4 3.0 3.1 3.2 3.3 3.4 3.5 4.0 4.1 4.2 4.3 4.4 4.5 5.0 "
    "5.1 5.2 5.3 6.0 6.2 7.0 7.1 7.2 7.3 7.4 8.0 8.1",
    "sqlfluff/sqlfluff": "0.10 0.11 0.12 0.13 0.4 0.5 0.6 0.8 0.9 1.0 1.1 1.2 1.3 1.4 2.0 2.1 2.2",
    "sympy/sympy": "0.7 1.0 1.1 1.10 1.11 1.12 1.2 1.4 1.5 1.6 1.7 1.8 1.9 1.13 1.14",
}
# Pythons that the official specs name and that these machines lack (EOL: pyenv cannot fetch it offline).
NOT_ON_THIS_MACHINE = {"3.5"}


def task(repo: str, version: str, **fields: object) -> Task:
    return Task.model_validate(
        {
            "instance_id": f"{repo.replace('/', '__')}-1",
            "repo": repo,
            "base_commit": "abc123",
            "version": version,
        }
        | fields
    )


def test_every_official_repo_and_version_has_a_spec():
    missing = [(r, v) for r, vs in OFFICIAL.items() for v in vs.split() if spec_for(task(r, v)) is None]
    assert missing == []
    assert set(SPECS) == set(OFFICIAL)
    # and nothing the official specs do not know (a version typo would hide here)
    extra = [
        (r, v)
        for r, entries in SPECS.items()
        for vs, _ in entries
        for v in vs.split()
        if v not in OFFICIAL[r]
    ]
    assert extra == []


def test_every_spec_runs_here_as_data():
    _, registry = _swebench()
    pythons = {spec.python for entries in SPECS.values() for _, spec in entries}
    missing: set[str] = set()
    for version in sorted(pythons):
        try:
            exe, _ = find_python(version)
        except ConfigError as exc:  # a clear error that says how to provide it
            assert f"Python {version} is needed" in str(exc) and f"pyenv install {version}" in str(exc)
            missing.add(version)
            continue
        assert exe.is_file(), version
    for repo, entries in SPECS.items():
        for versions, spec in entries:
            assert spec.test_cmd.strip() and spec.install.strip()
            assert parser_name(task(repo, versions.split()[0])) in registry
    # a host with no Python but the running one (a contributor's: no pyenv) lacks the prerequisite; one that
    # provides some of them lacks the rest by mistake
    others = pythons - NOT_ON_THIS_MACHINE - {"{}.{}".format(*sys.version_info[:2])}
    if others and missing >= others:
        pytest.skip(
            f"no Python here but the running one (pyenv install {' '.join(sorted(others, key=Version))})"
        )
    assert missing <= NOT_ON_THIS_MACHINE


def test_known_facts():
    def python(repo: str, version: str) -> str:
        spec = spec_for(task(repo, version))
        assert spec is not None
        return spec.python

    assert [python("django/django", v) for v in ("2.2", "3.0", "3.2", "4.0", "4.1", "4.2", "5.0")] == [
        "3.6",
        "3.6",
        "3.6",
        "3.8",
        "3.9",
        "3.9",
        "3.11",
    ]
    assert (
        python("pvlib/pvlib-python", "0.6") == "3.9" and python("scikit-learn/scikit-learn", "0.20") == "3.6"
    )
    sympy = spec_for(task("sympy/sympy", "1.12"))
    assert sympy is not None and "bin/test -C --verbose" in sympy.test_cmd
    sphinx = spec_for(task("sphinx-doc/sphinx", "3.5"))
    assert sphinx is not None and sphinx.test_cmd.startswith("tox --current-env")
    assert any("pytest -rA" in line for line in sphinx.pre_install)
    django = {v: spec_for(task("django/django", v)) for v in ("1.9", "2.2", "3.0", "4.0")}
    assert django["1.9"] is not None and django["1.9"].test_cmd == "./tests/runtests.py --verbosity 2"
    assert django["2.2"] is not None and "export PYTHONIOENCODING=utf8" in django["2.2"].eval_commands
    # 3.x sets the locale only; 4.0 and later set nothing
    assert django["3.0"] is not None and django["3.0"].eval_commands == (
        "export LANG=C.UTF-8",
        "export LANGUAGE=en_US:en",
        "export LC_ALL=C.UTF-8",
    )
    assert django["4.0"] is not None and django["4.0"].eval_commands == ()
    assert all(s is not None and s.directives == "django_modules" for s in django.values())


# setup.py requirement lines of sphinx 3.5 (caps unbounded) and 4.2 (htmlhelp/serializinghtml with lower bounds)
SPHINX_SETUP = {
    "3.5": "    'sphinxcontrib-htmlhelp',\n    'sphinxcontrib-serializinghtml',\n    'Jinja2>=2.3',\n",
    "4.2": "    'sphinxcontrib-htmlhelp>=2.0.0',\n    'sphinxcontrib-serializinghtml>=1.1.5',\n    'Jinja2>=2.3',\n",
}


@pytest.mark.parametrize(
    ("version", "setup"), [("3.5", "3.5"), ("4.1", "3.5"), ("4.1", "4.2"), ("4.2", "4.2")]
)
def test_sphinx_pre_install_edits_leave_valid_capped_requirements(tmp_path: Path, version: str, setup: str):
    spec = spec_for(task("sphinx-doc/sphinx", version))
    assert spec is not None
    (tmp_path / "setup.py").write_text(f"install_requires = [\n{SPHINX_SETUP[setup]}]\n")
    (tmp_path / "tox.ini").write_text("[testenv]\ncommands = pytest {posargs}\n")
    for line in spec.pre_install:
        subprocess.run(["bash", "-c", line], cwd=tmp_path, check=True)
    edited = (tmp_path / "setup.py").read_text()
    reqs = {r.name: r for r in (Requirement(x.strip(" ',")) for x in edited.splitlines()[1:-1])}
    assert not reqs["sphinxcontrib-htmlhelp"].specifier.contains("2.0.5")
    assert not reqs["sphinxcontrib-serializinghtml"].specifier.contains("1.1.10")
    assert str(reqs["Jinja2"].specifier) == "<3.0"
    assert "pytest -rA {posargs}" in (tmp_path / "tox.ini").read_text()


def test_django_runs_dotted_modules_in_a_utf8_locale():
    patch = (
        "diff --git a/tests/admin_views/test_forms.py b/tests/admin_views/test_forms.py\n"
        "diff --git a/tests/i18n/data/fixture.json b/tests/i18n/data/fixture.json\n"
    )
    script = eval_script(task("django/django", "3.0", test_patch=patch))
    assert (
        "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 admin_views.test_forms\n"
        in script
    )
    assert "export LANG=C.UTF-8" in script and "export LC_ALL=C.UTF-8" in script
    assert "fixture.json" in script.split("\n")[2]  # data files are still reset, only not run
    # a pytest repo keeps paths
    script = eval_script(task("pallets/flask", "2.3", test_patch=patch.replace("tests/admin_views", "tests")))
    assert "pytest -rA tests/test_forms.py\n" in script


def test_a_composed_django_script_runs_dotted_modules_in_a_real_repo(tmp_path: Path):
    """The composed script through bash on a git repo whose runtests.py reports its arguments and locale."""
    repo = tmp_path / "django"
    (repo / "tests" / "admin_views").mkdir(parents=True)
    (repo / "tests" / "runtests.py").write_text(
        '#!/bin/sh\necho "runtests $* LC_ALL=$LC_ALL LANG=$LANG"\nexit 3\n'
    )
    (repo / "tests" / "runtests.py").chmod(0o755)
    (repo / "tests" / "admin_views" / "test_forms.py").write_text("A = 1\n")

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    base = git("rev-parse", "HEAD").strip()
    (repo / "tests" / "admin_views" / "test_forms.py").write_text("A = 2\n")
    patch = git("diff")
    git("checkout", "-q", "--", ".")
    (repo / TEST_PATCH).parent.mkdir(parents=True)
    (repo / TEST_PATCH).write_text(patch)
    (repo / EVAL_SCRIPT).write_text(
        eval_script(task("django/django", "3.1", base_commit=base, test_patch=patch))
    )
    # a candidate patch changed the test file: the script resets it by its real path (the directive is a
    # dotted module) before the test patch, which then applies
    (repo / "tests" / "admin_views" / "test_forms.py").write_text("A = 3\n")
    run = subprocess.run(["bash", EVAL_SCRIPT], cwd=repo, capture_output=True, text=True, check=False)
    assert "runtests --verbosity 2 --settings=test_sqlite --parallel 1 admin_views.test_forms" in run.stdout
    assert "LC_ALL=C.UTF-8 LANG=C.UTF-8" in run.stdout
    assert ">>>>> Test Exit Code: 3" in run.stdout
    assert (repo / "tests" / "admin_views" / "test_forms.py").read_text() == "A = 2\n"


def test_a_build_that_needs_a_missing_compiler_names_the_package():
    check_system(["bash", "git"], "control")  # present commands pass
    with pytest.raises(EnvBuildError, match=r"needs swe-rl-no-such-cc .*apt-get install swe-rl-no-such-cc"):
        check_system(["bash", "swe-rl-no-such-cc"], "scikit-learn")


def test_a_shared_library_the_tests_load_is_checked_and_its_package_named():
    check_system(["lib:c"], "control")  # libc is found by the same lookup
    with pytest.raises(
        EnvBuildError, match=r"needs lib:swe-rl-no-such-lib .*apt-get install libswe-rl-no-such-lib"
    ):
        check_system(["lib:swe-rl-no-such-lib"], "xarray")
    xarray = spec_for(task("pydata/xarray", "0.12"))
    assert xarray is not None and "lib:eccodes" in xarray.system  # cfgrib's ecCodes: libeccodes0 on Debian


def test_conda_environment_files_read_as_pip_requirements():
    text = (
        "name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.10\n  - numpy=1.23\n  - scipy>=1.5\n"
    )
    text += "  - iris\n  - matplotlib-base=3.5\n  - dask-core>=2022\n"
    text += "  - pip\n  - pip:\n      - pytest-env\n"
    # conda-forge's iris is PyPI's scitools-iris: PyPI's `iris` is a placeholder whose import raises
    expected = ["numpy==1.23", "scipy>=1.5", "scitools-iris", "matplotlib==3.5", "dask>=2022", "pytest-env"]
    assert conda_env_packages(text) == expected
    with pytest.raises(ValueError, match="not a conda environment file"):
        conda_env_packages("dependencies: [unclosed")


def test_an_eval_script_written_for_the_official_image_is_composed_again_outside_it():
    official = "#!/bin/bash\nsource /opt/miniconda3/bin/activate\nconda activate testbed\ncd /testbed\n./tests/runtests.py\n"
    patch = "diff --git a/tests/admin_views/tests.py b/tests/admin_views/tests.py\n"
    row = task("django/django", "3.0", test_patch=patch, eval_script=official)
    assert "admin_views.tests" in eval_script(row) and "conda" not in eval_script(row)
    assert eval_script(row, image_env=True) == official  # in the image it was written for: as written
    own = "#!/bin/bash\necho '>>>>> Start Test Output'\npytest -rA\n"
    assert eval_script(task("django/django", "3.0", eval_script=own)) == own  # not image-bound: as written
    unknown = task("acme/widget", "1.0", eval_script=official)
    assert eval_script(unknown) == official  # nothing to compose it from: as written


def test_a_date_before_the_specs_python_moves_up_to_its_release():
    from swe_rl.envs.build.recipe import recipe_for

    early = task(
        "marshmallow-code/marshmallow", "3.0", created_at="2019-08-21T00:00:00Z"
    )  # its spec: Python 3.9
    assert recipe_for(early).exclude_newer == "2020-10-05T00:00:00Z"
    late = task("django/django", "4.1", created_at="2022-05-24T10:00:00Z")  # 3.9 existed by then
    assert recipe_for(late).exclude_newer == "2022-05-24T10:00:00Z"


def test_sphinx_tox_env_python_runs_the_venvs_python_with_tox_bin_first_on_path(tmp_path):
    """tox runs `.tox/py39/bin/python -m pytest` with `.tox/py39/bin` first on PATH: the script must not find
    itself (a plain `exec python` looped forever, burning a core per validation until the run timed out)."""
    import sys

    from swe_rl.tasks.spec_families.dev_tools import _TOX_VENV_PYTHON

    subprocess.run(["bash", "-c", _TOX_VENV_PYTHON], cwd=tmp_path, check=True)
    shim = tmp_path / ".tox" / "py39" / "bin" / "python"
    path = f"{shim.parent}:{Path(sys.executable).parent}:/usr/bin:/bin"
    ran = subprocess.run(
        [str(shim), "-c", "import sys; print(sys.executable)"],
        env={"PATH": path},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ran.returncode == 0 and ".tox" not in ran.stdout
    # control: the previous script, on the same PATH, never returns
    shim.write_text('#!/bin/sh\nexec python "$@"\n')
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([str(shim), "-c", "pass"], env={"PATH": path}, capture_output=True, timeout=3)


def test_a_library_a_build_compiles_against_is_found_by_pkg_config_and_its_package_named(
    tmp_path, monkeypatch
):
    """matplotlib's build downloads FreeType and qhull unless told to use the host's: the spec names them, and a
    host without them is told the Debian packages (no pkg-config at all: that too)."""
    monkeypatch.setenv("PKG_CONFIG_LIBDIR", str(tmp_path))  # the host's modules out of sight
    monkeypatch.setenv("PKG_CONFIG_PATH", str(tmp_path))
    with pytest.raises(
        EnvBuildError, match=r"needs pc:freetype2, pc:qhull_r .*apt-get install libfreetype-dev libqhull-dev"
    ):
        check_system(["pc:freetype2", "pc:qhull_r"], "matplotlib")
    with pytest.raises(EnvBuildError, match=r"apt-get install libswe-rl-no-such-dev\)"):
        check_system(["pc:swe-rl-no-such"], "x")
    (tmp_path / "freetype2.pc").write_text("Name: freetype2\nDescription: t\nVersion: 24.3.18\n")
    check_system(["pc:freetype2"], "control")  # found where pkg-config looks
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    with pytest.raises(
        EnvBuildError, match=r"needs pkg-config, pc:freetype2 .*apt-get install pkg-config libfreetype-dev"
    ):
        check_system(["pc:freetype2"], "matplotlib")
    new, old = spec_for(task("matplotlib/matplotlib", "3.6")), spec_for(task("matplotlib/matplotlib", "3.3"))
    assert new is not None and {"pc:freetype2", "pc:qhull_r", "gs"} <= set(
        new.system
    )  # 3.4 on download qhull
    assert old is not None and "pc:freetype2" in old.system and "pc:qhull_r" not in old.system  # extern/
