"""The repo's files a recipe installs from: its requirement file and its conda environment file, read at the
commit the recipe names (swebench reads them at the environment setup commit), as pip requirements."""

from __future__ import annotations

import posixpath
import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

from swe_rl.envs.build.recipe import EnvRecipe
from swe_rl.errors import EnvBuildError
from swe_rl.tasks.specs import conda_env_packages

# Requirements that no longer install, and what replaces them (types-pkg_resources was yanked from PyPI;
# the SWE-bench harness makes the same substitution).
REPLACED_REQUIREMENTS = {"types-pkg_resources": "types-setuptools", "types-pkg-resources": "types-setuptools"}


class RecipeFiles:
    """The requirement and conda environment files of one recipe, read from the repo's source or its testbed."""

    def __init__(self, recipe: EnvRecipe, testbed: Path, source: str | None) -> None:
        self.recipe, self.testbed, self.source = recipe, testbed, source
        # the files read from the testbed (the base commit) where the recipe names another commit: why each
        self.read_at_base: dict[str, str] = {}
        self._known: bool | None = None

    def requirements(self) -> list[str]:
        """The lines of the recipe's requirement file (the first of its names that exists)."""
        if not self.recipe.requirements:
            return []
        name = self._first_file(self.recipe.requirements, "requirements file")
        return read_requirements(name, self.read)

    def conda_packages(self) -> list[str]:
        """The dependencies of the recipe's conda environment file, as pip requirements."""
        if not self.recipe.env_yml:
            return []
        name = self._first_file(self.recipe.env_yml, "conda environment file")
        try:
            return conda_env_packages(self.read(name) or "")
        except ValueError as exc:
            raise EnvBuildError(f"{name}: {exc}") from None

    def read(self, name: str) -> str | None:
        """A file of the repo at the commit the recipe reads requirements at (swebench reads them at the
        environment setup commit), from the repo's source; else the testbed's copy."""
        at = self.recipe.requirements_at
        why = ""
        if self.source and at:
            if self._commit_known():
                proc = self._git("show", f"{at}:{name}")
                if proc.returncode == 0:
                    return proc.stdout
                why = f"no {name} at {at[:12]}"
            else:
                why = f"{at[:12]} is not in the repo's source"
        path = self.testbed / name
        if not path.is_file():
            return None
        # a fallback taken is recorded as taken: the recipe names a commit this file did not come from
        if why:
            self.read_at_base[name] = why
        return path.read_text()

    def _commit_known(self) -> bool:
        if self._known is None:
            self._known = (
                self._git("cat-file", "-e", f"{self.recipe.requirements_at}^{{commit}}").returncode == 0
            )
        return self._known

    def _git(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert self.source is not None
        command = ["git", "-c", "safe.directory=*", "-C", self.source, *args]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    def _first_file(self, names: list[str], what: str) -> str:
        for name in names:
            if self.read(name) is not None:
                return name
        raise EnvBuildError(
            f"no {what} ({', '.join(names)}) in the repo at {self.recipe.requirements_at[:12]}"
        )


def read_requirements(name: str, read: Callable[[str], str | None]) -> list[str]:
    """Requirement lines of a file (comments, options and nested files resolved), with replacements."""
    text = read(name)
    if text is None:
        raise EnvBuildError(f"requirements file {name} not found in the repo")
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            out += read_requirements(
                posixpath.normpath(posixpath.join(posixpath.dirname(name), line.split()[1])), read
            )
            continue
        if line.startswith("-"):
            continue  # index options and editable installs: the spec's install covers the repo itself
        name = re.split(r"[<>=!~ ;\[]", line, maxsplit=1)[0]
        out.append(REPLACED_REQUIREMENTS.get(name, line))
    return out


def install_best_effort(
    packages: list[str], run: Callable[[str], None], note: Callable[[str], None]
) -> list[str]:
    """Conda's packages with pip (``run`` an install command): all at once, else one by one, skipping what pip
    cannot install (conda-only names, libraries pip would have to build without their C dependencies). Returns
    the packages skipped; ``note`` logs each."""
    if not packages:
        return []
    try:
        run("python -m pip install " + " ".join(shlex.quote(p) for p in packages))
        return []
    except EnvBuildError:
        note("swe-rl: the conda environment's packages do not install together with pip; one by one")
    skipped = []
    for package in packages:
        try:
            run(f"python -m pip install {shlex.quote(package)}")
        except EnvBuildError:
            skipped.append(package)
            note(f"swe-rl: skipped conda package {package}: pip cannot install it here")
    return skipped
