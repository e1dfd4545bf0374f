"""An env's lock file (``swe-rl-lock.txt``, a lock file as package managers mean it; file locks are
swe_rl.locks): the resolved set of a build in ``pip freeze`` format with swe-rl's note lines, and what two
locks pin differently."""

from __future__ import annotations

LOCK_NAME = "swe-rl-lock.txt"
SKIPPED = (
    "# swe-rl: skipped conda package: "  # a lock line: a conda environment's package pip could not install
)
# a lock line per install command that built only with the build tools of the task's date
DATED_BUILD_TOOLS = "# swe-rl: build tools as of the task's date (a build failed with 2024's): "
FALLBACK = "# swe-rl: pip fallback: "  # a lock line: an install command that uv could not build and pip ran
# a lock line per repo file read from the testbed (the base commit) instead of the commit the recipe names
READ_AT_BASE = "# swe-rl: read at the base commit: "
# a lock line: the version given to a setuptools_scm build whose testbed has no tag (swe_rl.envs.build.build_settings)
VERSION_GIVEN = "# swe-rl: version given to the build: "
LOCAL_FREETYPE = "# swe-rl: FreeType built by matplotlib's build: "  # where it came from (build_settings)
# a lock line per module that still fails to import after the build (swe_rl.envs.build.import_check)
IMPORT_FAILS = "# swe-rl: import fails: "


def pinned(lock: list[str]) -> list[str]:
    """The lock's ``name==version`` lines (editable and local installs are rebuilt from the repo)."""
    return [line for line in lock if "==" in line and " @ " not in line and not line.startswith(("-", "#"))]


def lock_difference(expected: list[str], got: list[str]) -> list[str]:
    """Pinned lines that differ between two locks (added with +, missing with -)."""
    a, b = set(pinned(expected)), set(pinned(got))
    return sorted([f"-{x}" for x in a - b] + [f"+{x}" for x in b - a])
