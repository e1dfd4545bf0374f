"""The repo's files a recipe installs from: its requirement file and its conda environment file, read at the
commit the recipe names (swebench reads them at the environment setup commit), as pip requirements."""

from __future__ import annotations

import posixpath
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from swe_rl.envs.recipe import EnvRecipe
from swe_rl.errors import EnvBuildError
from swe_rl.tasks.specs import conda_env_packages

# Requirements that no longer install, and what replaces them (types-pkg_resources was yanked from PyPI;
# the SWE-bench harness makes the same substitution).
REPLACED_REQUIREMENTS = {"types-pkg_resources": "types-setuptools", "types-pkg-resources": "types-setuptools"}


class RecipeFiles:
    """The requirement and conda environment files of one recipe, read from the repo's source or its testbed."""

    def __init__(self, recipe: EnvRecipe, testbed: Path, source: str | None) -> None:
        self.recipe, self.testbed, self.source = recipe, testbed, source

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
        if self.source and self.recipe.requirements_at:
            proc = subprocess.run(
                [
                    "git",
                    "-c",
                    "safe.directory=*",
                    "-C",
                    self.source,
                    "show",
                    f"{self.recipe.requirements_at}:{name}",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode == 0:
                return proc.stdout
        path = self.testbed / name
        return path.read_text() if path.is_file() else None

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
