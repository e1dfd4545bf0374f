"""What a dated install's failure calls for: a dependency taken from today's index, or built from its sdist.

A build resolved as of the task's date (uv ``--exclude-newer``) meets releases that no longer resolve or build
here: a dependency the date filtered out, a dated sdist that lacks a C library's header or does not build at
all, or (what the wheels-only probe finds) a release with no wheel for the env's Python. :func:`to_widen` and
:func:`probe_remedy` read what uv said and choose the change of resolution, one package at a time;
:class:`~swe_rl.envs.build.installer.InstallRun` applies it, logs it and retries. The packages
:func:`undated_packages` names are never chosen: they are exempt from the date already.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from swe_rl.envs.build.dating import (
    BUILD_TOOLS,
    PYTEST_RA_AS_OF,
    PYTEST_RA_FLOOR,
    UNDATED,
    WIDENED,
    Resolver,
    Widening,
    norm,
    pinned_versions,
    to_wheel,
    unreachable,
)
from swe_rl.envs.build.import_check import ImportFailure, import_remedies
from swe_rl.envs.build.recipe import PINNED_PYTEST, EnvRecipe
from swe_rl.envs.build.uv_output import (
    BAD_METADATA,
    DEPENDENCY_FAILED,
    FILTERED,
    NO_LIBRARY,
    NO_WHEEL,
    SDIST_DISABLED,
    pinned_by,
)

# the reasons of widenings for a build that failed (held_to_first_wheel acts on those two only)
NOT_BUILDING = "the dated release does not build here"
PINS = "it pins "


@dataclass(frozen=True)
class ProbeRemedy:
    """What the wheels-only probe's finding calls for: ``name`` widened, or built from its sdist (and why)."""

    name: str
    found: Widening | str  # the widening, or why the dependency builds from its sdist
    # a widening to remove first: the requirements hold the dependency below its first release with a wheel
    take_back: Widening | None = None


def to_widen(
    recipe: EnvRecipe, widened: list[Widening], output: str, command: str, *, dependencies: bool
) -> Widening | None:
    """The first dependency, not widened or undated yet, that a dated build should take from today's index:
    one uv says the date filtered out, one whose dated sdist lacks a C library's header (pylibmc 1.6.1,
    django 4.x's py3.txt as of 2021, needs libmemcached's; the official images, resolved in 2024, got
    1.6.3's wheel), and with ``dependencies`` one whose dated release uv failed to build at all."""
    if not recipe.exclude_newer:
        return None
    candidates = [Widening(package=name, needed_by=f"`{command}`") for name in FILTERED.findall(output)]
    candidates += [
        Widening(
            package=name,
            needed_by=f"{name}=={version}",
            reason=f"the dated sdist does not build here (no {header})",
        )
        for header, name, version in NO_LIBRARY.findall(output)
    ]
    if dependencies:
        for name, version in DEPENDENCY_FAILED.findall(output):
            candidates.append(
                Widening(
                    package=name,
                    needed_by=f"{name}=={version}",
                    reason=NOT_BUILDING,
                )
            )
            # then the releases that pin it (numba 0.51.2 pins llvmlite 0.34, which needs LLVM 9 or 10)
            candidates += [
                Widening(
                    package=parent,
                    needed_by=f"{name}=={version}",
                    reason=f"{PINS}{name}, whose dated release does not build here",
                )
                for parent in pinned_by(output, name)
            ]
    done = {w.package for w in widened} | set(undated_packages(recipe))
    return next((w for w in candidates if w.package not in done), None)


def probe_remedy(
    said: str,
    command: str,
    recipe: EnvRecipe,
    resolver: Resolver,
    widened: list[Widening],
    from_source: set[str],
) -> ProbeRemedy | None:
    """For a dependency the probe found with no wheel for this Python as of the date (uv would compile it:
    pvlib 0.6's numpy, pandas and scipy for Python 3.9, hours on 2 cores): when a later release has a platform
    wheel, the dependency is resolved as of the earliest such release's upload; a pure-Python package (whose
    first wheel is ``none-any``) or one with no wheel at all builds from its sdist, as before, and so does one
    whose widening the requirements do not allow (astroid 2.5 pins ``wrapt<1.13``). An exact pin is replaced by
    its series' first release with a platform wheel (:func:`pin_to_wheel`), or else builds. A dependency the date
    filtered out is widened as :func:`to_widen` does, and one whose dated releases uv cannot read the metadata of
    (pandas before 0.25) is taken from today's index. None when the probe says anything else: it ends for the
    command, which then runs as it would without."""
    named = list(dict.fromkeys(NO_WHEEL.findall(said)))  # pandas, then numpy, which pandas 1.1.3 needs
    handled = {norm(n) for n in [*from_source, *(w.package for w in widened)]}
    unread = [(n, v) for n, v in BAD_METADATA.findall(said) if norm(n) not in handled]
    if unread and norm(unread[0][0]) not in {norm(n) for n in undated_packages(recipe)}:
        # its dated releases cannot be used by uv at all (the older ones it falls back to are older still):
        # today's index, as the official images, built in 2024, took it
        name, version = unread[0]
        why = "uv cannot read the dated release's metadata (a version PEP 440 refuses)"
        return ProbeRemedy(name, Widening(package=name, needed_by=f"{name}=={version}", reason=why))
    name = next((n for n in named if norm(n) not in handled), None)
    if name is not None:
        if norm(name) in {norm(n) for n in undated_packages(recipe)}:
            # the spec's own pins only: a user's constraints file is the user's word
            pin = pinned_versions(recipe.pip).get(norm(name), "")
            return ProbeRemedy(name, pin_to_wheel(resolver, name, pin))
        return ProbeRemedy(name, to_wheel(resolver, name, f"`{command}`"))
    if local := [n for n in SDIST_DISABLED.findall(said) if norm(n) not in handled]:
        # uv builds most editables even so, not all (astroid 2.5's setup.py): the repo itself is built anyway
        return ProbeRemedy(local[0], "the repo itself, or a requirement given as a path or URL")
    if (filtered := to_widen(recipe, widened, said, command, dependencies=False)) is not None:
        # a widened release needs a dependency newer than the date (numba 0.53.0, llvmlite 0.36): from today's
        # index, as the install itself would take it, held by the widened release's requirement
        return ProbeRemedy(filtered.package, filtered)
    # all widened already: the requirements hold one below its first wheel (astroid 2.5's wrapt<1.13)
    again = [w for w in widened if norm(w.package) in {norm(n) for n in named}]
    if not again:
        return None
    why = "the requirements do not allow its first release with a wheel"
    return ProbeRemedy(again[0].package, why, take_back=again[0] if again[0].as_of else None)


def held_to_first_wheel(found: Widening, resolver: Resolver | None, exclude_newer: str) -> Widening:
    """A dependency widened because its dated release does not build here (or because it pins one that does
    not), resolved as of the upload of its earliest release with a platform wheel for this Python, not from
    today's index; the date itself when that release is older than the date (other requirements held the pick
    back: a widening cannot change it). Today's index when no release has a platform wheel.

    Why not today's: uv builds sdists in parallel and reports the first that fails, so which of two failing
    builds is widened first follows timing. Taken to today's, the order decided the env (xarray-6599 on
    Python 3.10: numba 0.53.1 and llvmlite 0.36.0 both refuse it; llvmlite first took both to today's and numba
    0.68.1 broke ``import sparse`` beside the dated coverage, numba first left sparse out). Held to the first
    wheel, either order ends in the same env, and the drift from the task's date is the least that builds."""
    if resolver is None or found.as_of or not found.reason.startswith((NOT_BUILDING, PINS)):
        return found
    # after the release that failed, when it is the one named (a wheel-less release between is no help)
    name, _, failed = found.needed_by.partition("==")
    release = resolver.first_wheel(found.package, failed if norm(name) == norm(found.package) else "")
    if release is None or not release.compiled or not release.uploaded:
        return found
    if release.uploaded <= exclude_newer:
        reason = f"{found.reason}; its first {resolver.python_tag()} wheel ({release.version}) is older than the date"
        return found.model_copy(update={"reason": reason, "as_of": exclude_newer})
    reason = f"{found.reason}; earliest with a {resolver.python_tag()} wheel: {release.version}"
    return found.model_copy(update={"reason": reason, "as_of": release.uploaded})


def pin_to_wheel(resolver: Resolver, name: str, pin: str) -> Widening | str:
    """An exact pin with no wheel for this Python: the first later release of the pin's minor series that has a
    platform wheel, named in the pin's place; or why the pin builds from its sdist (a ``str``).

    scikit-learn 1.3's spec pins numpy==1.19.2 and scipy==1.5.2 for Python 3.9, which the official images get
    from conda, built for 3.9. PyPI has no cp39 wheel of either, and numpy 1.19.2's sdist does not build here
    (its Cython sources fail under the build's Cython). The series' next bug-fix releases, 1.19.3 and 1.5.4,
    are the first with cp39 wheels: as near to the pin as PyPI comes. Never beyond the series, where the API
    may change; none there, and the pin is built from its sdist as before. The commands are then run with the
    release in the pin's place (:func:`replace_pins`)."""
    try:
        release = Version(pin).release
    except InvalidVersion:
        return "pinned"
    if len(release) < 2:
        return "pinned"
    series = f"{release[0]}.{release[1]}"
    found = resolver.first_wheel(name, pin, below=f"{release[0]}.{release[1] + 1}")
    if found is None or not found.compiled or not found.uploaded:
        return f"pinned; no later release of {series} has a platform wheel for this Python"
    tag = resolver.python_tag()
    return Widening(
        package=name,
        needed_by=f"{name}=={pin}",
        reason=f"the pinned release has no {tag} wheel; the first of {series} with one: {found.version}",
        as_of=found.uploaded,
        release=found.version,
        replaces=f"{name}=={pin}",
    )


def replace_pins(command: str, widened: list[Widening]) -> str:
    """``command`` with each pin :func:`pin_to_wheel` replaced written as its release (``numpy==1.19.2`` ->
    ``numpy==1.19.3``), in the command's own text. Not uv's ``--override``: an override also replaces what other
    packages require of it, and scikit-learn 1.3's env then took pandas 1.5.3 (``numpy>=1.20.3``) beside numpy
    1.19.3, which pandas refuses at import."""
    for w in widened:
        name, _, version = w.replaces.partition("==")
        if not (name and version and w.release):
            continue
        spelled = "[-_.]+".join(re.escape(part) for part in re.split(r"[-_.]+", name))
        pin = re.compile(rf"(?<![\w.-])({spelled})=={re.escape(version)}(?![\w.+-])", re.IGNORECASE)
        command = pin.sub(rf"\g<1>=={w.release}", command)
    return command


def undated_packages(recipe: EnvRecipe) -> list[str]:
    """Packages exempt from the date: the recipe's ``undated`` and every exact ``name==version`` pin."""
    names = list(recipe.undated)
    for requirement in [*recipe.pip, *recipe.constraints]:
        name, sep, version = requirement.partition("==")
        if sep and re.fullmatch(r"[A-Za-z0-9._-]+", name.strip()) and version.strip():
            names.append(name.strip())
    return sorted(set(names))


def runner_floor(recipe: EnvRecipe, *, own: bool = False) -> tuple[list[str], str]:
    """pytest >= 4.6 for a date before it, and a line for the build log: older pytest lists no passed test under
    ``-rA``, and SWE-bench's log parsers read that list (the official images ran pytest from their own build
    time, 2023-24). Not when the recipe pins pytest itself, nor for pytest's ``own`` repo (it is the runner: a
    floor above it would make its own install unsatisfiable)."""
    if own or not recipe.exclude_newer or recipe.exclude_newer >= PYTEST_RA_AS_OF:
        return [], ""
    if any(PINNED_PYTEST.match(p) for p in [*recipe.pip, *recipe.constraints]):
        return [], ""
    said = f"swe-rl: {PYTEST_RA_FLOOR} as of {PYTEST_RA_AS_OF[:10]} (older pytest lists no passed test under -rA)"
    return [PYTEST_RA_FLOOR], said


def dated_options(
    recipe: EnvRecipe, widened: list[Widening], tools_as_of: str, pytest_floor: bool
) -> list[str]:
    """uv's options for an install resolved as of ``recipe.exclude_newer``: the date, the build tools' own date
    (:meth:`~swe_rl.envs.build.installer.InstallRun.build_tools_as_of`), and the packages exempt from the date (exact
    pins, widenings) or held to another (pytest's floor)."""
    opts = ["--exclude-newer", recipe.exclude_newer]
    tools: set[str] = set()
    if tools_as_of > recipe.exclude_newer:
        tools = set(BUILD_TOOLS)
        for tool in BUILD_TOOLS:
            opts += ["--exclude-newer-package", f"{tool}={tools_as_of}"]
    # a spec's exact pins name versions on purpose, sometimes newer than the task; not the build tools' date,
    # though: that is what builds its sdists (astropy 1.3's setuptools==38.2.4 pin made MarkupSafe 1.0's build
    # env take today's setuptools, which has no Feature, at the dated retry)
    undated = {name: UNDATED for name in undated_packages(recipe) if name.lower() not in tools}
    # a widening that names its release wins over an earlier one of the same package (its first wheel's date)
    undated.update({w.package: w.as_of or UNDATED for w in sorted(widened, key=lambda w: bool(w.release))})
    if pytest_floor and "pytest" not in undated:
        opts += ["--exclude-newer-package", f"pytest={PYTEST_RA_AS_OF}"]
    for name, as_of in undated.items():
        opts += ["--exclude-newer-package", f"{name}={as_of}"]
    return opts


def after_build(
    recipe: EnvRecipe,
    widened: list[Widening],
    failures: list[ImportFailure],
    lock: list[str],
    resolver: Resolver,
    note: Callable[[str], None],
    base: Path | None = None,
) -> list[Widening]:
    """What a dated build is made again with: the dependencies it must take from today's index
    (:func:`~swe_rl.envs.build.dating.unreachable`), then the remedies of its import failures
    (:func:`~swe_rl.envs.build.import_check.import_remedies`), none for a package held already. An instance's clone
    holds its version's pins too (``base``: the lock it was cloned with): its numpy cannot be bounded there. Each
    said with ``note``."""
    found = unreachable(resolver, lock, set(undated_packages(recipe)) | {w.package for w in widened})
    for item in found:
        note(f"swe-rl: widened {item.package}: {item.lock_line()[len(WIDENED) :]}")
    # held: pinned, undated, or widened to today's index; one widened as of a date (its first wheel for this
    # Python: numba 0.55.0) can still be taken at a later release where that one fails at import
    held = {
        norm(n) for n in [*undated_packages(recipe), *(w.package for w in [*widened, *found] if not w.as_of)]
    }
    cloned = base.read_text().splitlines() if base is not None and base.is_file() else []
    held |= {"numpy"} & set(pinned_versions(cloned))
    return found + import_remedies(failures, lock, resolver, held, note)


def tools_apart(freeze: list[str]) -> str | None:
    """``setuptools>=61`` where the venv has setuptools_scm >= 8 beside a setuptools before 61, else None.

    A build brings setuptools_scm as of the build tools' date (2024: 8.x) while the venv keeps the setuptools
    its Python's ensurepip gave (Python 3.8's 56.0); setuptools_scm 8 warns at import that the pair is broken,
    and a project that imports it at run time for its version (matplotlib 3.4 from a git checkout) fails every
    test that reads ``__version__`` under ``filterwarnings = error``. The official images had both of 2024."""
    have = pinned_versions(freeze)
    scm, tools = have.get("setuptools-scm", ""), have.get("setuptools", "")
    major = [int(v.split(".")[0]) if v.split(".")[0].isdigit() else 0 for v in (scm, tools)]
    return "setuptools>=61" if scm and tools and major[0] >= 8 and major[1] < 61 else None
