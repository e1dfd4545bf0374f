"""What a repo's build reads besides the installer's options, and what the build checks after it.

Real builds with uv on the loopback index, of git repos made here. Each test shows the failure first (the
control), then what the installer does about it:

- a setuptools_scm project whose testbed has no tag gets the version its task's ``version`` implies, so a
  package that requires it at that version installs beside it (matplotlib without tags: ``0.1.devN``);
- a matplotlib-style build that would download FreeType is told to use the host's (``MPLSETUPCFG``), or, where
  the repo cache has a mirror of freetype/freetype, finds the release's tag where its download would have gone;
- a release whose old metadata does not bound numpy, which then fails at import, has numpy bounded to the
  releases of its own time (numba 0.53.1 beside numpy 1.25);
- a dated release made before the env's Python, which fails at import there and makes the repo's own import fail
  through it, is taken at its next release (pydap 3.2.2 under xarray 0.12 on Python 3.10);
- the pip fallback does not hold the repo to a release of it from the index (matplotlib 3.6.1 beside 3.6's repo).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.envs.helpers import git, make_repo
from tests.envs.test_dating import AFTER, BEFORE, build, make_old_backend_repo, pins

from swe_rl.envs.build.install_tools import uv_binary
from swe_rl.envs.build.pins import LOCK_NAME
from swe_rl.envs.build.recipe import InstallOptions
from swe_rl.envs.cache import EnvCache
from swe_rl.errors import EnvBuildError
from swe_rl.tasks.model import Task

pytestmark = [
    pytest.mark.skipif(uv_binary() is None, reason="uv is not installed (pip install uv)"),
    pytest.mark.heavy,  # real environment builds, ~10 s each
]

# setuptools_scm's contract, as a PEP 517 backend of the repo's own (setuptools_scm is not installed here): the
# version is the tag `git describe` finds, else SETUPTOOLS_SCM_PRETEND_VERSION_FOR_<NAME>, else 0.1.dev<N>
SCM_BACKEND = """
import base64, hashlib, os, subprocess, zipfile


def _version():
    pretend = os.environ.get("SETUPTOOLS_SCM_PRETEND_VERSION_FOR_WIDGET")
    if pretend:
        return pretend
    tag = subprocess.run(["git", "describe", "--tags"], capture_output=True, text=True)
    if tag.returncode == 0:
        return tag.stdout.strip().lstrip("v")
    count = subprocess.run(["git", "rev-list", "--count", "HEAD"], capture_output=True, text=True, check=True)
    return "0.1.dev" + count.stdout.strip()


def get_requires_for_build_editable(config_settings=None):
    return []


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    info = "widget-%s.dist-info" % version
    files = {
        "widget.pth": os.getcwd() + "\\n",
        info + "/METADATA": "Metadata-Version: 2.1\\nName: widget\\nVersion: %s\\n" % version,
        info + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(text.encode())))
    files[info + "/RECORD"] = "\\n".join(record + [info + "/RECORD,,"]) + "\\n"
    name = "widget-%s-py3-none-any.whl" % version.replace("-", "_")
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)
    return name
"""


def scm_repo(repo_cache: Path) -> str:
    """acme/widget as a setuptools_scm project (pyproject.toml names it) with no tag; returns the commit."""
    make_repo(repo_cache)
    repo = repo_cache / "acme/widget"
    (repo / "scmbackend.py").write_text(SCM_BACKEND)
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "scmbackend"\nbackend-path = ["."]\n\n'
        '[project]\nname = "widget"\ndynamic = ["version"]\n\n[tool.setuptools_scm]\n'
    )
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "setuptools_scm")
    return git(repo, "rev-parse", "HEAD")


def installed_version(venv: Path, name: str) -> str:
    proc = subprocess.run(
        [venv / "bin" / "python", "-c", f"import importlib.metadata as m; print(m.version({name!r}))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.strip()


def row_task(commit: str, version: str, install: str, packages: str = "") -> Task:
    """A task whose row carries its own install spec (as SWE-rebench's do): its ``version`` reaches the recipe;
    ``packages`` go to the version's shared venv, ``install`` runs in the instance's clone of it."""
    return Task.model_validate(
        {
            "instance_id": "acme__widget-1",
            "repo": "acme/widget",
            "base_commit": commit,
            "version": version,
            "created_at": "2019-01-01T00:00:00Z",
            "install_config": {"python": "3", "install": install, "pip_packages": packages},
        }
    )


def test_a_setuptools_scm_project_without_tags_is_built_as_its_task_version_implies(tmp_path, index):
    index.add(
        "usesit", "1.0", BEFORE, requires=("widget>=3.6",)
    )  # (seaborn or mpl-sphinx-theme: matplotlib>=)
    commit = scm_repo(tmp_path / "mirrors")
    install = "python -m pip install -e . && python -m pip install usesit"
    # control: with no version to give, the build says 0.1.dev1 and the package that requires 3.6 cannot install
    cache = EnvCache(tmp_path / "control", repo_cache=tmp_path / "mirrors")
    with pytest.raises(EnvBuildError, match="widget"):
        cache.ensure(row_task(commit, "", install))
    env = EnvCache(tmp_path / "envs", repo_cache=tmp_path / "mirrors").ensure(
        row_task(commit, "3.6", install)
    )
    assert env.venv is not None
    given = f"3.6.1.dev0+g{commit[:9]}"  # the next patch's development release, as setuptools_scm names it
    lock = (env.venv / LOCK_NAME).read_text().splitlines()
    assert "usesit==1.0" in lock and installed_version(env.venv, "widget") == given
    assert any(line.startswith("# swe-rl: version given to the build: ") and given in line for line in lock)
    assert "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_WIDGET" in (env.venv / "swe-rl-install.log").read_text()


def test_a_tag_in_the_testbed_is_left_to_setuptools_scm(tmp_path, index):
    commit = scm_repo(tmp_path / "mirrors")
    git(tmp_path / "mirrors/acme/widget", "tag", "v3.7.2")
    env = EnvCache(tmp_path / "envs", repo_cache=tmp_path / "mirrors").ensure(
        row_task(commit, "3.6", "python -m pip install -e .")
    )
    assert env.venv is not None and installed_version(env.venv, "widget") == "3.7.2"
    assert "version given" not in (env.venv / LOCK_NAME).read_text()


# matplotlib's setupext.py, reduced to its FreeType choice: the host's when mplsetup.cfg (MPLSETUPCFG) says
# system_freetype, else a download that cannot succeed offline; the backend runs it as matplotlib's setup.py does
SETUPEXT = """import configparser, os
config = configparser.ConfigParser()
config.read(os.environ.get("MPLSETUPCFG") or "mplsetup.cfg")
if not config.getboolean("libs", "system_freetype", fallback=False):
    raise SystemExit("downloading freetype-2.6.1.tar.gz: network unreachable")
"""
MPL_BACKEND = SCM_BACKEND.replace(
    "def build_editable(wheel_directory, config_settings=None, metadata_directory=None):\n",
    "def build_editable(wheel_directory, config_settings=None, metadata_directory=None):\n    import setupext\n",
)


def mpl_repo(tmp_path: Path, setupext: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """acme/widget with a matplotlib-style ``setupext`` run by its build, and a FreeType that pkg-config finds
    (the host's own may be absent); returns the commit."""
    pc_dir = tmp_path / "pkgconfig"
    pc_dir.mkdir()
    (pc_dir / "freetype2.pc").write_text(
        "Name: freetype2\nDescription: t\nVersion: 24.3.18\nLibs:\nCflags:\n"
    )
    monkeypatch.setenv("PKG_CONFIG_PATH", str(pc_dir))
    scm_repo(tmp_path / "mirrors")
    repo = tmp_path / "mirrors/acme/widget"
    (repo / "scmbackend.py").write_text(MPL_BACKEND)
    (repo / "setupext.py").write_text(setupext)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "freetype")
    return git(repo, "rev-parse", "HEAD")


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="needs pkg-config")
def test_a_build_that_would_download_freetype_is_told_to_use_the_hosts(tmp_path, index, monkeypatch):
    commit = mpl_repo(tmp_path, SETUPEXT, monkeypatch)
    repo = tmp_path / "mirrors/acme/widget"
    env = EnvCache(tmp_path / "envs", repo_cache=tmp_path / "mirrors").ensure(
        row_task(commit, "3.6", "python -m pip install -e .")
    )
    assert env.venv is not None
    log = (env.venv / "swe-rl-install.log").read_text()
    assert "matplotlib's build is told (MPLSETUPCFG): system_freetype" in log
    # control: the same build without MPLSETUPCFG would download FreeType
    build = "import scmbackend, tempfile; scmbackend.build_editable(tempfile.mkdtemp())"
    proc = subprocess.run(
        [env.venv / "bin" / "python", "-c", build], cwd=repo, capture_output=True, text=True
    )
    assert proc.returncode != 0 and "downloading freetype" in proc.stderr


# matplotlib 3.3+: the download goes to build/freetype-<version>, skipped where that directory is there; the build
# then runs the release's configure (made by autogen.sh from a git checkout) and links what it builds
SETUPEXT_LOCAL = SETUPEXT.replace(
    "if not config.getboolean",
    """def get_and_extract_tarball(urls, sha, dirname):
    pass
LOCAL_FREETYPE_VERSION = '2.6.1'
source = os.path.join("build", "freetype-" + LOCAL_FREETYPE_VERSION, "builds", "unix", "configure")
if os.path.exists(source):  # the build uses it: what it says ends up in the installed package
    open("widget.py", "a").write("FREETYPE = " + repr(open(source).read()) + "\\n")
elif not config.getboolean""",
)


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="needs pkg-config")
def test_a_freetype_mirror_in_the_repo_cache_gives_the_build_the_release_it_would_download(
    tmp_path, index, monkeypatch
):
    commit = mpl_repo(tmp_path, SETUPEXT_LOCAL, monkeypatch)
    task = row_task(commit, "3.6", "python -m pip install -e .")
    # control: no mirror of freetype/freetype, the host's is linked (and the log says what that costs)
    host = EnvCache(tmp_path / "host", repo_cache=tmp_path / "mirrors").ensure(task)
    assert host.venv is not None and "FREETYPE" not in (host.testbed / "widget.py").read_text()
    assert "expect the FreeType 2.6.1" in (host.venv / "swe-rl-install.log").read_text()

    freetype = tmp_path / "mirrors/freetype/freetype"  # the release's tag; its autogen.sh makes configure
    freetype.mkdir(parents=True)
    git(freetype, "init", "-q", "-b", "master")
    (freetype / "autogen.sh").write_text(
        "mkdir -p builds/unix && echo 'configure of 2.6.1, made by autogen.sh' > builds/unix/configure\n"
    )
    git(freetype, "add", "-A")
    git(freetype, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "2.6.1")
    git(freetype, "tag", "VER-2-6-1")
    env = EnvCache(tmp_path / "envs", repo_cache=tmp_path / "mirrors").ensure(task)
    assert env.venv is not None and env.key != host.key
    assert "FREETYPE = 'configure of 2.6.1, made by autogen.sh\\n'" in (env.testbed / "widget.py").read_text()
    assert not (env.testbed / "build" / "freetype-2.6.1").exists(), "the source is removed after the install"
    lock = (env.venv / LOCK_NAME).read_text()
    assert f"# swe-rl: FreeType built by matplotlib's build: 2.6.1 from {freetype} at VER-2-6-1" in lock
    log = (env.venv / "swe-rl-install.log").read_text()
    assert "system_freetype" not in log and "expect the FreeType" not in log


NUMBA_LIKE = (
    "import numpy\n"
    "if tuple(int(p) for p in numpy.VERSION.split('.')[:2]) > (1, 20):\n"
    "    raise ImportError('Numbish needs NumPy 1.20 or less')\n"
)


def test_a_release_that_fails_to_import_beside_a_later_numpy_has_numpy_bounded_to_its_time(tmp_path, index):
    """numba 0.53.1's metadata says numpy>=1.15 only; 0.57.1 says numpy<1.25. A resolver that takes the newest
    numpy first backtracks to numba 0.53.1, which refuses numpy 1.25 at import: every test run fails."""
    index.add("numpy", "1.20.0", "2021-01-30T00:00:00Z")
    index.add("numpy", "1.25.0", "2023-06-17T00:00:00Z")
    index.add("numbish", "0.53.1", "2021-03-25T00:00:00Z", requires=("numpy>=1.15",), source=NUMBA_LIKE)
    index.add("numbish", "0.57.1", "2023-06-21T00:00:00Z", requires=("numpy<1.25,>=1.21",), source=NUMBA_LIKE)
    repo_cache = tmp_path / "mirrors"
    commit = make_repo(repo_cache)
    task = Task.model_validate(
        {
            "instance_id": "acme__widget-1",
            "repo": "acme/widget",
            "base_commit": commit,
            "created_at": "2023-08-01T00:00:00Z",
            "install": "python -m pip install numpy numbish",
        }
    )
    # control: uv alone pairs them (built with the import check's remedy out of reach: no date to bound to)
    control = EnvCache(tmp_path / "latest", repo_cache=repo_cache, options=InstallOptions(as_of_date=False))
    venv = control.ensure(task).venv
    assert venv is not None and {"numpy==1.25.0", "numbish==0.53.1"} <= pins(venv)
    assert "fails: ImportError: Numbish needs NumPy 1.20 or less" in (venv / LOCK_NAME).read_text()
    env = EnvCache(tmp_path / "envs", repo_cache=repo_cache).ensure(task)
    assert env.venv is not None
    assert {"numpy==1.20.0", "numbish==0.53.1"} <= pins(env.venv)
    subprocess.run([env.venv / "bin" / "python", "-c", "import numbish"], check=True)
    lock = (env.venv / LOCK_NAME).read_text()
    assert "# swe-rl: bounded numpy (needed by numbish==0.53.1;" in lock and "import fails" not in lock
    record = json.loads((env.venv / "swe-rl-env.json").read_text())
    assert [(w["package"], w["as_of"]) for w in record["widened"]] == [("numpy", "2021-03-25T00:00:01Z")]


def test_a_release_that_does_not_import_on_the_envs_python_is_taken_at_its_next_release(tmp_path, index):
    """xarray 0.12's env is resolved as of a 2021 date on Python 3.10; the newest pydap then is 3.2.2 (2017), whose
    `from collections import Mapping` fails there, and xarray's own import fails through it: every test errors at
    collection. The import check names the distribution whose file raised (pydap, not xarray) and the build is
    made again with pydap's next release, in the instance's clone of the version's venv."""
    index.add("oldlib", "1.0", BEFORE, source="from collections import Mapping\n")  # gone in Python 3.10
    index.add("oldlib", "2.0", AFTER, source="from collections.abc import Mapping\n")
    scm_repo(tmp_path / "mirrors")
    repo = tmp_path / "mirrors/acme/widget"
    (repo / "widget.py").write_text("import oldlib\n\n\ndef answer():\n    return 41\n")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "use oldlib")
    task = row_task(git(repo, "rev-parse", "HEAD"), "3.6", "python -m pip install -e .", packages="oldlib")
    env = EnvCache(tmp_path / "envs", repo_cache=tmp_path / "mirrors").ensure(task)
    assert env.venv is not None
    log = (env.venv / "swe-rl-install.log").read_text()
    # the control: the first build, as of the date, failed at import through oldlib 1.0
    assert "`import widget` (widget==" in log and "fails: ImportError: cannot import name 'Mapping'" in log
    shared = env.venv.parent / json.loads((env.venv / "swe-rl-env.json").read_text())["shared_env"]
    assert "oldlib==1.0" in pins(shared)  # the version's venv keeps the date's
    assert "oldlib==2.0" in pins(env.venv)
    subprocess.run([env.venv / "bin" / "python", "-c", "import widget"], cwd=env.testbed, check=True)
    lock = (env.venv / LOCK_NAME).read_text()
    assert "# swe-rl: widened oldlib (needed by `import widget` (widget==" in lock, lock
    assert "oldlib 1.0 fails on this Python; its next release, 2.0 (ImportError" in lock
    assert "import fails" not in lock


NUMBISH = "import numpy\nif tuple(int(p) for p in numpy.VERSION.split('.')[:2]) > ({}):\n    raise ImportError('Numbish needs NumPy {} or less')\n"


def numbish_releases(index) -> None:  # type: ignore[no-untyped-def]
    """numba's releases as they bound numpy: 0.55.0's metadata does not say what it refuses at import."""
    index.add("numpy", "1.23.0", "2022-06-22T00:00:00Z")
    for version, uploaded, requires, most in (
        ("0.55.0", "2022-01-13", "numpy>=1.18", "1, 21"),
        ("0.56.0", "2022-07-25", "numpy<1.23,>=1.18", "1, 22"),
        ("0.56.2", "2022-09-01", "numpy<1.24,>=1.18", "1, 23"),
        ("0.60.0", "2024-06-13", "numpy<2.1,>=1.22", "2, 0"),
    ):
        source = NUMBISH.format(most, most.replace(", ", "."))
        index.add("numbish", version, f"{uploaded}T00:00:00Z", requires=(requires,), source=source)


@pytest.mark.parametrize("where", ["version", "instance"])
def test_a_release_that_refuses_a_numpy_the_spec_pins_is_taken_at_its_first_release_that_admits_it(
    tmp_path, index, where
):
    """xarray 0.12's spec pins numpy 1.23.0; its dated resolution had numba 0.55.0, which says "Numba needs NumPy
    1.21 or less" at import, so sparse and numbagg fail too and their tests do not run. numpy cannot be bounded
    (it is pinned): numba is taken at its first release whose metadata admits numpy 1.23.0. In the version's venv,
    or in an instance's clone of it, where the numpy of the version's venv is as fixed as a pin."""
    numbish_releases(index)
    scm_repo(tmp_path / "mirrors")
    commit = git(tmp_path / "mirrors/acme/widget", "rev-parse", "HEAD")
    install = "python -m pip install -e ."
    if where == "version":
        task = row_task(commit, "3.6", install, packages="numpy==1.23.0 numbish")
    else:
        task = row_task(
            commit, "3.6", f"python -m pip install numbish && {install}", packages="numpy==1.23.0"
        )
    task = task.model_copy(update={"created_at": "2022-03-01T00:00:00Z"})
    env = EnvCache(tmp_path / "envs", repo_cache=tmp_path / "mirrors").ensure(task)
    assert env.venv is not None
    # the control: the first build, as of the date, had 0.55.0, which refused numpy 1.23.0 at import
    log = (env.venv / "swe-rl-install.log").read_text()
    assert "(numbish==0.55.0) fails: ImportError: Numbish needs NumPy 1.21 or less" in log
    assert {"numpy==1.23.0", "numbish==0.56.2"} <= pins(env.venv)  # not 0.56.0 (refuses it), nor today's 0.60
    subprocess.run([env.venv / "bin" / "python", "-c", "import numbish"], check=True)
    shared = env.venv.parent / json.loads((env.venv / "swe-rl-env.json").read_text())["shared_env"]
    lock = (env.venv / LOCK_NAME).read_text() + (shared / LOCK_NAME).read_text()  # made again where it failed
    why = "numbish 0.55.0 refuses the numpy 1.23.0 the env holds; its first release whose metadata admits it, 0.56.2"
    assert why in lock and "import fails" not in lock and "bounded numpy" not in log


def test_a_release_widened_to_its_first_wheel_that_refuses_the_pinned_numpy_is_taken_further(tmp_path, index):
    """xarray 0.12 on Python 3.10: numba as of the date has no cp310 wheel, so it is taken at its first release that
    has one (0.55.0), which then refuses the pinned numpy 1.23.0 at import; that widening is not the last word."""
    from tests.envs.test_wheels import PLATFORM_TAG, serve_sdist

    index.add("numpy", "1.23.0", "2022-06-22T00:00:00Z")
    serve_sdist(
        index, "numbish", "0.54.0", "2021-10-01T00:00:00Z"
    )  # as of the date: no wheel for this Python
    for version, uploaded, requires, most in (
        ("0.55.0", "2022-01-13", "numpy>=1.18", "1, 21"),
        ("0.56.2", "2022-09-01", "numpy<1.24,>=1.18", "1, 23"),
    ):
        source = NUMBISH.format(most, most.replace(", ", "."))
        index.add("numbish", version, f"{uploaded}T00:00:00Z", (requires,), PLATFORM_TAG, source)
    commit = scm_repo(tmp_path / "mirrors")
    task = row_task(commit, "3.6", "python -m pip install -e .", packages="numpy==1.23.0 numbish")
    env = EnvCache(tmp_path / "envs", repo_cache=tmp_path / "mirrors").ensure(
        task.model_copy(update={"created_at": "2021-11-01T00:00:00Z"})
    )
    assert env.venv is not None
    log = (env.venv / "swe-rl-install.log").read_text()
    assert "earliest with one: 0.55.0" in log and "(numbish==0.55.0) fails: ImportError" in log  # the control
    assert {"numpy==1.23.0", "numbish==0.56.2"} <= pins(env.venv)
    subprocess.run([env.venv / "bin" / "python", "-c", "import numbish"], check=True)


def test_the_pip_fallback_does_not_hold_the_repo_to_a_copy_of_it_from_the_index(tmp_path, index, monkeypatch):
    """matplotlib 3.6's environment file pulled matplotlib 3.6.1 from the index (mpl-sphinx-theme needs it); when pip
    then ran the repo's own editable install, it held every installed distribution to its version, the repo's own
    included: `matplotlib 0.1.0.dev44475 ... conflicting dependencies: (constraint) matplotlib==3.6.1`."""
    import ensurepip

    setuptools = next((Path(ensurepip.__file__).parent / "_bundled").glob("setuptools-*.whl"), None)
    if setuptools is None:
        pytest.skip("this interpreter bundles no setuptools wheel for pip's build environment")
    links = tmp_path / "links"
    links.mkdir()
    (links / setuptools.name).write_bytes(setuptools.read_bytes())
    for key in ("PIP_FIND_LINKS", "UV_FIND_LINKS"):
        monkeypatch.setenv(key, str(links))
    index.add("oldpkg", "0.5", BEFORE)  # the repo's own distribution, released
    make_old_backend_repo(tmp_path / "mirrors")
    venv, record = build(
        tmp_path, "python -m pip install oldpkg && python -m pip install -e .", as_of_date=False
    )
    assert record["pip_fallbacks"] == ["python -m pip install oldpkg && python -m pip install -e ."]
    # the repo's own release gave way to the editable install (its metadata is in the testbed, /testbed here)
    assert "oldpkg==0.5" not in pins(venv)
    assert "Successfully installed oldpkg-1.0" in (venv / "swe-rl-install.log").read_text()
