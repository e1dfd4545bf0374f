"""How an environment is built: the interpreter and the packages. One recipe per (repo, version, setup).

A recipe comes from, in order: the builtin suite (pytest seeded from the host), the record's own
``python`` / ``install`` fields (SWE-Gym / SWE-smith style), the spec the row carries
(SWE-rebench's ``install_config``, :mod:`swe_rl.tasks.rowspec`), or swe-rl's spec table for known
SWE-bench repositories (:mod:`swe_rl.tasks.specs`). Options that change what gets installed (the
date to resolve as of, user constraints) are part of the recipe and so of its cache key.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.errors import ConfigError
from swe_rl.tasks.builtin import BUILTIN_OWNER
from swe_rl.tasks.model import Task
from swe_rl.tasks.rowspec import row_spec
from swe_rl.tasks.specs import spec_for

Installer = Literal["uv", "pip"]
# a requirement that pins pytest (``pytest==5.4.3``, ``pytest<7``): the spec's own pytest, kept as it is
PINNED_PYTEST = re.compile(r"pytest\s*[=<>!~]")


class InstallOptions(BaseModel):
    """User choices for env builds that apply to every task."""

    model_config = ConfigDict(frozen=True)

    installer: Installer = Field(default="uv", description="uv (pip when uv is not installed) or pip.")
    as_of_date: bool = Field(
        default=True, description="Resolve packages as of the task's created_at (uv --exclude-newer)."
    )
    constraints: tuple[str, ...] = Field(default=(), description="Lines of a user constraints file.")
    fetch_python: bool = Field(
        default=False, description="Install a missing Python with `uv python install` or conda."
    )

    @classmethod
    def with_constraints_file(cls, path: Path | None, **kwargs: object) -> InstallOptions:
        lines: tuple[str, ...] = ()
        if path is not None:
            if not path.is_file():
                raise ConfigError(f"constraints file not found: {path}")
            lines = tuple(s for line in path.read_text().splitlines() if (s := line.split("#")[0].strip()))
        return cls(constraints=lines, **kwargs)


class EnvRecipe(BaseModel):
    """Everything that decides the content of an env's venv (and so its cache key)."""

    model_config = ConfigDict(frozen=True)

    python: str = Field(default="3", description="Python version: '3' means the interpreter running swe-rl.")
    seed: list[str] = Field(default_factory=list, description="Host distributions copied in (offline).")
    pip: list[str] = Field(default_factory=list, description="Requirements installed before the repo.")
    undated: list[str] = Field(
        default_factory=list, description="Packages not held to exclude_newer (exact pins never are)."
    )
    requirements: list[str] = Field(
        default_factory=list, description="Requirement files in the repo: the first that exists."
    )
    env_yml: list[str] = Field(
        default_factory=list, description="Conda environment files in the repo: the first that exists."
    )
    system: list[str] = Field(default_factory=list, description="Host commands the build needs.")
    requirements_at: str = Field(default="", description="Commit the requirement files are read at.")
    pre_install: list[str] = Field(default_factory=list, description="Shell commands run before install.")
    install: str = Field(default="", description="Shell command run in the testbed with the venv active.")
    exclude_newer: str = Field(default="", description="Resolve as of this time (RFC 3339), '' for today.")
    constraints: list[str] = Field(default_factory=list, description="User constraints on every install.")
    source: str = Field(default="", description="Where the recipe came from: builtin, record or spec.")
    # not in the digest (excluded from dumps): the spec's source names it already, and envs keep their keys
    version: str = Field(
        default="",
        exclude=True,
        description="The task's version (the release line of its repo, e.g. 3.6): what a build gives a "
        "setuptools_scm project whose testbed has no tag (swe_rl.envs.build.build_settings).",
    )

    def digest(self, interpreter: Path) -> str:
        text = f"{interpreter}\n{self.model_dump_json()}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def installs(self) -> bool:
        return bool(self.pip or self.requirements or self.env_yml or self.pre_install or self.install)

    def shared(self) -> EnvRecipe:
        """What every instance of the recipe's version shares (the harness's env image): all but the repo's
        own install steps."""
        return self.model_copy(update={"pre_install": [], "install": ""})

    def own(self) -> EnvRecipe | None:
        """The repo's own install steps (the harness's instance image), run in an instance's clone of the
        shared venv; None when there are none."""
        if not (self.pre_install or self.install):
            return None
        # a pytest the spec pins stays as pinned (and keeps the installer's pytest floor out)
        pins = [p for p in self.pip if PINNED_PYTEST.match(p)]
        cleared = {"seed": [], "pip": [], "requirements": [], "env_yml": [], "requirements_at": ""}
        return self.model_copy(update={**cleared, "constraints": [*self.constraints, *pins]})


def recipe_for(
    task: Task, options: InstallOptions | None = None, *, as_of: str | None = None, read_at: str | None = None
) -> EnvRecipe:
    """The recipe of a task's env: builtin suite, the record's own setup, or the spec table. Packages are
    resolved as of ``as_of`` (an RFC 3339 time; the env cache passes the date of the version's environment
    setup commit, so that the instances of a version share one env), else as of the task's own date.
    Requirement files are read at ``read_at`` (the setup commit's stand-in), else at the setup commit."""
    options = options or InstallOptions()
    if task.repo.partition("/")[0] == BUILTIN_OWNER:
        return EnvRecipe(python="3", seed=["pytest"], source="builtin")
    own = row_spec(task)
    spec = own or spec_for(task)
    python = task.python or (spec.python if spec else "3")
    common = {
        "exclude_newer": dated(as_of or resolve_date(task), python) if options.as_of_date else "",
        "constraints": list(options.constraints),
    }
    if task.install is not None:
        seed = list(task.env_seed or [])
        return EnvRecipe(python=python, seed=seed, install=task.install, source="record", **common)
    if spec is not None:
        recipe = EnvRecipe(
            python=python,
            pip=list(spec.packages),
            undated=list(spec.undated),
            requirements=list(spec.requirements),
            env_yml=list(spec.env_yml),
            system=list(spec.system),
            requirements_at=(read_at or task.environment_setup_commit or task.base_commit)
            if spec.requirements or spec.env_yml
            else "",
            pre_install=list(spec.pre_install),
            install=spec.install,
            source=f"row:{task.instance_id}" if own else f"spec:{task.repo}@{task.version}",
            version=task.version or "",
            **common,
        )
        return with_runner_of_names(task, recipe)
    raise ConfigError(
        f"{task.instance_id}: no install recipe for {task.repo} version {task.version!r}; give the record an "
        "'install' field (a shell command run in the repo with the env's venv active) and a 'python' field"
    )


# pytest 8.0 puts "_" before the counter it appends to duplicate parametrize ids that end in a digit
# (`test_unparse[1234-1234_0]`, `..._1`; pytest 7 printed `[1234-12340]`)
DUPLICATE_ID = re.compile(r"^(.*\d)_(\d+)\]$")
PYTEST_8 = "pytest>=8.0,<8.1"
PYTEST_8_STACK = ("pytest", "pluggy", "iniconfig", "exceptiongroup", "tomli")  # resolved as of today's index


def named_by_pytest_8(names: list[str]) -> bool:
    """Some test of ``names`` is a duplicate parametrize id as pytest >= 8 names it: ``..._0`` and ``..._1``
    after a digit, both present."""
    counters: dict[str, set[str]] = {}
    for name in names:
        if found := DUPLICATE_ID.match(name):
            counters.setdefault(found[1], set()).add(found[2])
    return any({"0", "1"} <= seen for seen in counters.values())


def with_runner_of_names(task: Task, recipe: EnvRecipe) -> EnvRecipe:
    """``recipe`` with pytest 8.0 where the task's test names are pytest 8's (:func:`named_by_pytest_8`): they
    were read from a log of the official images' pytest, and a dated env's older pytest names those tests
    otherwise, so that they are never found in its log (sphinx-7462's test_unparse). Only for a Python pytest 8
    runs on (3.8+) and a recipe that does not pin pytest; others keep their recipe, and their keys."""
    version = tuple(int(p) for p in recipe.python.split(".")[:2] if p.isdigit())
    pinned = any(PINNED_PYTEST.match(p) for p in [*recipe.pip, *recipe.constraints])
    if (
        pinned
        or len(version) < 2
        or version < (3, 8)
        or not named_by_pytest_8(task.FAIL_TO_PASS + task.PASS_TO_PASS)
    ):
        return recipe
    undated = [*recipe.undated, *(p for p in PYTEST_8_STACK if p not in recipe.undated)]
    return recipe.model_copy(update={"constraints": [*recipe.constraints, PYTEST_8], "undated": undated})


# First releases of CPython x.y: nothing published before them was made to run on them.
PYTHON_RELEASED = {
    "2.7": "2010-07-03T00:00:00Z",
    "3.5": "2015-09-13T00:00:00Z",
    "3.6": "2016-12-23T00:00:00Z",
    "3.7": "2018-06-27T00:00:00Z",
    "3.8": "2019-10-14T00:00:00Z",
    "3.9": "2020-10-05T00:00:00Z",
    "3.10": "2021-10-04T00:00:00Z",
    "3.11": "2022-10-24T00:00:00Z",
    "3.12": "2023-10-02T00:00:00Z",
    "3.13": "2024-10-07T00:00:00Z",
}


def dated(task_date: str, python: str) -> str:
    """The date to resolve as of: the task's, or the first release of its Python when that is later.

    The official specs run 2019 tasks on Python 3.9 (2020): packages as of 2019 do not run there (an
    importlib_metadata of 2019 breaks 3.9's importlib.metadata, and pytest with it)."""
    released = PYTHON_RELEASED.get(".".join(python.split(".")[:2]), "")
    return max(task_date, released) if task_date else ""


def resolve_date(task: Task) -> str:
    """The task's created_at as an RFC 3339 UTC time, '' when the record has none."""
    if not task.created_at:
        return ""
    try:
        when = datetime.fromisoformat(task.created_at.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"{task.instance_id}: created_at {task.created_at!r} is not an ISO 8601 time"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
