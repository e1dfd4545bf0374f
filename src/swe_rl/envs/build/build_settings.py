"""What a repo's own build reads from its environment besides the installer's options.

Two things the official images' builds had from their checkout or their network, which a testbed here lacks:

- **A version.** setuptools_scm reads the project's version from the tags it finds with ``git describe``. The
  official harness built from a full clone with tags; a testbed made from a mirror without tags (matplotlib's
  snapshot has none) makes setuptools_scm say ``0.1.devN``, and a requirement on the project itself
  (``matplotlib>=3.6`` of a package in its environment file) no longer resolves. When no tag is reachable from
  HEAD, the build is given the version the task's ``version`` field implies (:func:`implied_version`) through
  ``SETUPTOOLS_SCM_PRETEND_VERSION_FOR_<NAME>``, and the build log says so.
- **C libraries.** matplotlib's build downloads FreeType (3.3 on) and qhull (3.4 on) unless its build
  configuration says to use the system's; here that configuration (``MPLSETUPCFG``, read by every matplotlib
  from 3.0) asks for the host's, where the host has them (pkg-config). The spec table names them as the
  build's needs, so that a host without them is told which Debian packages to install.
- **FreeType as the official builds had it.** From 3.3 matplotlib's build downloads FreeType 2.6.1, the version
  its baseline images were drawn with, and builds it into ft2font; with another FreeType its image comparisons
  that draw text fail (24026: 86 png comparisons of test_axes.py). Where the repo cache holds a mirror of
  ``freetype/freetype``, the release's tag is put where the download would have gone (``build/freetype-X``,
  with its configure script made by ``autogen.sh``) and matplotlib's build does the rest with its own options,
  as it did for the official images; the source is removed after the install (the library is linked into
  ft2font). Without the mirror the host's FreeType is linked, and the build log says what that costs.
"""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

from packaging.version import InvalidVersion, Version

from swe_rl.envs.build.pins import LOCAL_FREETYPE, VERSION_GIVEN
from swe_rl.envs.build.repo_sources import find_repo_source
from swe_rl.errors import EnvBuildError, RepoNotFoundError
from swe_rl.gitutil import git
from swe_rl.tasks.specs import check_system, present

MPL_SETUP_NAME = "swe-rl-mplsetup.cfg"
# [libs] options of matplotlib's mplsetup.cfg (setup.cfg before 3.4) and the pkg-config module each needs
MPL_SYSTEM_LIBS = {"system_freetype": "freetype2", "system_qhull": "qhull_r"}
FREETYPE_REPO = "freetype/freetype"
AUTOGEN_NEEDS = ("autoconf", "automake", "libtoolize", "make")  # freetype's autogen.sh, then its configure


def repo_build_settings(
    testbed: Path, venv: Path, version: str, *, repo_cache: Path | None = None, own_install: bool = True
) -> tuple[dict[str, str], list[str], list[str]]:
    """The environment the repo's install commands get besides the installer's (:func:`mpl_setup`,
    :func:`scm_version`), the lock's lines (the version given to the build, the FreeType put in place), and
    lines for the build log. ``own_install``: the repo's own build runs (:func:`local_freetype` then)."""
    ours = "MPLSETUPCFG" in _read(testbed / "setupext.py")  # the repo is matplotlib
    freetype = local_freetype(testbed, repo_cache) if ours and own_install else None
    mpl, said = mpl_setup(venv, local_freetype=freetype is not None)
    if not ours:
        said = ""  # set for matplotlib built as a dependency; said where the repo is matplotlib
    given, told = scm_version(testbed, version)
    notes = [f"{VERSION_GIVEN}{told.partition('; ')[2]}"] if given else []
    notes += [f"{LOCAL_FREETYPE}{freetype}"] if freetype else []
    lines = [said, told, LOCAL_FREETYPE.removeprefix("# ") + freetype if freetype else ""]
    return {**mpl, **given}, notes, [line for line in lines if line]


def local_freetype_version(setupext: str) -> str | None:
    """The FreeType a matplotlib build downloads by default (3.3 on: it extracts a tarball into ``build/``), read
    from its ``setupext.py``, e.g. '2.6.1'; None for an older matplotlib (it links the host's unless told
    otherwise) or another repo."""
    if "def get_and_extract_tarball" not in setupext:
        return None
    pattern = r"""^(?:TESTING_VERSION_OF_FREETYPE|LOCAL_FREETYPE_VERSION)\s*=\s*['"]([\d.]+)['"]"""
    found = re.search(pattern, setupext, re.M)
    return found[1] if found else None


def _freetype_release(version: str, repo_cache: Path | None) -> tuple[str, str] | None:
    """The repo cache's mirror of freetype/freetype and the tag of ``version`` in it, where it has both."""
    try:
        mirror = find_repo_source(FREETYPE_REPO, repo_cache)
    except RepoNotFoundError:
        return None
    tag = "VER-" + version.replace(".", "-")
    return (mirror, tag) if git(["tag", "--list", tag], Path(mirror), check=False).strip() else None


def provided_freetype(source: str, commit: str, repo_cache: Path | None) -> str:
    """For an env's key: the commit of the FreeType release :func:`local_freetype` would put in place for the
    repo at ``commit`` of ``source``; '' where it would put none (no mirror, or not a build that downloads)."""
    try:
        find_repo_source(FREETYPE_REPO, repo_cache)  # the common case, no mirror: no git call on the repo
    except RepoNotFoundError:
        return ""
    version = local_freetype_version(git(["show", f"{commit}:setupext.py"], Path(source), check=False))
    release = _freetype_release(version, repo_cache) if version else None
    if release is None:
        return ""
    mirror, tag = release
    return git(["rev-parse", f"refs/tags/{tag}^{{commit}}"], Path(mirror), check=False).strip()


def local_freetype(testbed: Path, repo_cache: Path | None) -> str | None:
    """Put the FreeType release matplotlib's build would download into ``build/freetype-<version>``, from the
    repo cache's mirror of freetype/freetype (its tag ``VER-2-6-1``), configure script made; what was put
    there ('2.6.1 from <mirror> at VER-2-6-1'), or None where the build downloads none or no mirror has it."""
    version = local_freetype_version(_read(testbed / "setupext.py"))
    release = _freetype_release(version, repo_cache) if version else None
    if version is None or release is None:
        return None
    mirror, tag = release
    check_system(AUTOGEN_NEEDS, f"FreeType {version} for matplotlib's build")
    dest = testbed / "build" / f"freetype-{version}"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", mirror, "archive", tag], capture_output=True, check=False)
    untar = subprocess.run(
        ["tar", "-x", "-C", str(dest)], input=archive.stdout, capture_output=True, check=False
    )
    made = subprocess.run(["sh", "autogen.sh"], cwd=dest, capture_output=True, text=True, check=False)
    if archive.returncode or untar.returncode or made.returncode:
        said = (archive.stderr or untar.stderr or b"").decode(errors="replace") + made.stdout + made.stderr
        raise EnvBuildError(
            f"FreeType {version} from {mirror} ({tag}) could not be prepared:\n{said[-2000:]}"
        )
    return f"{version} from {mirror} at {tag}"


def remove_local_freetype(testbed: Path) -> None:
    """After the install: the library is linked into ft2font, its source and objects are not needed."""
    version = local_freetype_version(_read(testbed / "setupext.py"))
    if version is not None:
        shutil.rmtree(testbed / "build" / f"freetype-{version}", ignore_errors=True)


def mpl_setup(venv: Path, *, local_freetype: bool = False) -> tuple[dict[str, str], str]:
    """``MPLSETUPCFG`` for install commands, pointing at a file in ``venv`` that asks matplotlib's build for the
    host's C libraries (each where the host has it; FreeType not where ``local_freetype`` was put in place);
    and a line for the build log."""
    libs = {k: v for k, v in MPL_SYSTEM_LIBS.items() if not (local_freetype and k == "system_freetype")}
    found = [option for option, module in libs.items() if present(f"pc:{module}")]
    config = configparser.ConfigParser()
    config["libs"] = {option: "True" for option in found}
    path = venv / MPL_SETUP_NAME
    with path.open("w") as out:
        config.write(out)
    said = ", ".join(found) if found else f"none of {', '.join(libs)} (pkg-config finds none of them)"
    # the official images' builds downloaded FreeType 2.6.1, the version matplotlib's baseline images were made
    # with: text renders otherwise with the host's, and image comparisons with text fail (matplotlib says so)
    caveat = (
        "; image comparisons with text expect the FreeType 2.6.1 its build would download (a mirror of "
        f"{FREETYPE_REPO} in the repo cache provides it)"
        if "system_freetype" in found
        else ""
    )
    return {"MPLSETUPCFG": str(path)}, f"swe-rl: matplotlib's build is told (MPLSETUPCFG): {said}{caveat}"


def uses_setuptools_scm(testbed: Path) -> bool:
    """The project's build takes its version from setuptools_scm (pyproject.toml, setup.py or setup.cfg)."""
    texts = [_read(testbed / name) for name in ("pyproject.toml", "setup.py", "setup.cfg")]
    return any(re.search(r"setuptools[_-]scm|use_scm_version", text) for text in texts)


def project_name(testbed: Path) -> str:
    """The distribution name the build gives the project ('' when it cannot be read without running it)."""
    try:
        name = tomllib.loads(_read(testbed / "pyproject.toml")).get("project", {}).get("name", "")
    except tomllib.TOMLDecodeError:
        name = ""
    if not name:
        config = configparser.ConfigParser(interpolation=None)
        try:
            config.read_string(_read(testbed / "setup.cfg"))
            name = config.get("metadata", "name", fallback="")
        except configparser.Error:
            name = ""
    # setup(name="matplotlib"), or the constant it names (pvlib's and scikit-learn's DISTNAME = "pvlib")
    pattern = r"""\b(?:name|DISTNAME|NAME)\s*=\s*["']([A-Za-z0-9._-]+)["']"""
    if not name and (found := re.search(pattern, _read(testbed / "setup.py"))):
        name = found[1]
    return str(name)


def has_reachable_tag(testbed: Path) -> bool:
    """``git describe --tags`` finds a tag (setuptools_scm's question) in the testbed's history."""
    return bool(git(["describe", "--tags", "--abbrev=0"], testbed, check=False).strip())


def implied_version(field: str, commit: str) -> str | None:
    """The version setuptools_scm's default scheme gives a commit after the release ``field`` names (the task's
    ``version``: the release line its repo was on, e.g. ``3.6``): the next patch's development release,
    ``3.6.1.dev0+g<commit>``. It keeps the release line (``>=3.6``, ``<3.7`` and ``==3.6.*`` hold, as for the
    harness's build). The distance from the tag, unknown without it, is written 0. None when ``field`` is not a
    version."""
    try:
        release = Version(field.strip().removeprefix("v")).release
    except InvalidVersion:
        return None
    parts = [*release, 0, 0][: max(3, len(release))]
    parts[-1] += 1
    local = f"+g{commit[:9]}" if re.fullmatch(r"[0-9a-f]{7,40}", commit) else ""
    return f"{'.'.join(str(p) for p in parts)}.dev0{local}"


def scm_version(testbed: Path, field: str) -> tuple[dict[str, str], str]:
    """For a setuptools_scm project whose testbed has no tag reachable from HEAD: the environment that gives its
    build :func:`implied_version`, and a line for the build log. Nothing ({}, '') otherwise."""
    if not field or not uses_setuptools_scm(testbed) or has_reachable_tag(testbed):
        return {}, ""
    commit = git(["rev-parse", "HEAD"], testbed, check=False).strip()
    version = implied_version(field, commit)
    if version is None:
        return {}, f"swe-rl: no tag in the testbed, and the task's version {field!r} is not a version to give"
    name = project_name(testbed)
    # named for the project: dependencies built from their sdists in the same command keep their own versions
    key = "SETUPTOOLS_SCM_PRETEND_VERSION" + (
        f"_FOR_{re.sub(r'[^A-Z0-9]+', '_', name.upper())}" if name else ""
    )
    said = (
        f"swe-rl: no tag reachable from HEAD in the testbed (setuptools_scm would say 0.1.devN); "
        f"{name or 'the project'} is built as {version}, as the task's version {field} implies ({key})"
    )
    return {key: version}, said


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
