"""Install specs of common SWE-bench repositories, for classic rows that carry no setup of their own.

swebench 5 ships no per-repo install specs (its rows carry an ``eval_script``); classic SWE-bench,
Lite and Verified rows name only ``repo`` and ``version``. This table is swe-rl's own: the facts
(Python version, packages, test command per repo and version) are those the SWE-bench harness
(swebench 4.1, ``MAP_REPO_VERSION_TO_SPECS``) uses for its evaluation images, written here as data.
Conda packages of those specs are installed with pip; ``requirements`` files are read from the repo.
Additions of swe-rl's own are marked where they appear (pydicom: ``pydicom-data``, the test files its
tests otherwise download at test time; sandboxes have no network).
A record's own ``python`` / ``install`` / ``test_cmd`` fields always win over this table.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.tasks.model import Task


class RepoSpec(BaseModel):
    """How to install and test one repository at one version."""

    model_config = ConfigDict(frozen=True)

    python: str = Field(description="Python version, e.g. '3.9'.")
    packages: tuple[str, ...] = Field(default=(), description="Requirements installed before the repo.")
    requirements: tuple[str, ...] = Field(default=(), description="Requirement files in the repo, installed.")
    pre_install: tuple[str, ...] = Field(default=(), description="Shell commands run before the install.")
    undated: tuple[str, ...] = Field(
        default=(),
        description="Packages resolved from today's index even when the build resolves as of a date.",
    )
    install: str = Field(default="python -m pip install -e .", description="Installs the repo itself.")
    test_cmd: str = Field(default="pytest -rA", description="Test command; the test files are appended.")


def _versions(text: str) -> list[str]:
    return text.split()


_PYTEST_PINS_74 = (
    "iniconfig==2.0.0",
    "packaging==23.1",
    "pluggy==1.3.0",
    "exceptiongroup==1.1.3",
    "tomli==2.0.1",
)
_PYTEST_PINS_71 = (
    "attrs==23.1.0",
    "iniconfig==2.0.0",
    "packaging==23.1",
    "pluggy==0.13.1",
    "py==1.11.0",
    "tomli==2.0.1",
)
_PYTEST_PINS_54 = (
    "py==1.11.0",
    "packaging==23.1",
    "attrs==23.1.0",
    "more-itertools==10.1.0",
    "pluggy==0.13.1",
)
_PYDICOM = ("numpy", "pytest", "pydicom-data")
_SYMPY_TEST = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"
_FLASK_21 = (
    "setuptools==70.0.0",
    "click==8.1.3",
    "itsdangerous==2.1.2",
    "Jinja2==3.1.2",
    "MarkupSafe==2.1.1",
    "Werkzeug==2.3.7",
)

# repo -> [(versions, spec)]; the first entry whose versions list the task's version applies.
SPECS: dict[str, list[tuple[list[str], RepoSpec]]] = {
    "pydicom/pydicom": [  # + pydicom-data (swe-rl's): offline copies of the test files pydicom downloads
        (_versions("1.0 1.1 1.2 1.3"), RepoSpec(python="3.6", packages=_PYDICOM, undated=("pydicom-data",))),
        (_versions("1.4 2.0"), RepoSpec(python="3.8", packages=_PYDICOM, undated=("pydicom-data",))),
        (_versions("2.1 2.2"), RepoSpec(python="3.9", packages=_PYDICOM, undated=("pydicom-data",))),
        (_versions("2.3"), RepoSpec(python="3.10", packages=_PYDICOM, undated=("pydicom-data",))),
        (_versions("2.4 3.0"), RepoSpec(python="3.11", packages=_PYDICOM, undated=("pydicom-data",))),
    ],
    "pylint-dev/astroid": [
        (
            _versions("2.5 2.6 2.7 2.8 2.9 2.10 2.12 2.13 2.14 2.15 2.16 3.0"),
            RepoSpec(python="3.9", packages=("pytest",)),
        ),
    ],
    "sqlfluff/sqlfluff": [
        (
            _versions("0.4 0.5 0.6 0.8 0.9 0.10 0.11 0.12 0.13 1.0 1.1 1.2 1.3 1.4 2.0 2.1 2.2"),
            RepoSpec(python="3.9", requirements=("requirements_dev.txt",)),
        ),
    ],
    "pytest-dev/pytest": [
        (_versions("7.4 8.0 8.1 8.2 8.3 8.4"), RepoSpec(python="3.9", packages=_PYTEST_PINS_74)),
        (
            _versions("7.1 7.2"),
            RepoSpec(
                python="3.9",
                packages=_PYTEST_PINS_71,
            ),
        ),
        (
            _versions("5.4"),
            RepoSpec(
                python="3.9",
                packages=_PYTEST_PINS_54,
            ),
        ),
    ],
    "sympy/sympy": [
        (
            _versions("0.7 1.0 1.1 1.2 1.4 1.5 1.6 1.7 1.8 1.9 1.10 1.11 1.12"),
            RepoSpec(
                python="3.9",
                packages=("mpmath==1.3.0", "flake8", "flake8-comprehensions"),
                test_cmd=_SYMPY_TEST,
            ),
        ),
        (
            _versions("1.13 1.14"),
            RepoSpec(
                python="3.9",
                packages=("mpmath==1.3.0",),
                requirements=("requirements-dev.txt",),
                test_cmd=_SYMPY_TEST,
            ),
        ),
    ],
    "psf/requests": [
        (
            _versions("0.7 0.8 0.9 0.11 0.13 0.14 1.1 1.2 2.0 2.2 2.3 2.4 2.5 2.7 2.8 2.9 2.10 2.11 2.12")
            + _versions("2.17 2.18 2.19 2.22 2.25 2.26 2.27 2.31 3.0"),
            RepoSpec(python="3.9", packages=("pytest",), install="python -m pip install ."),
        ),
    ],
    "pallets/flask": [
        (
            _versions("2.1"),
            RepoSpec(python="3.10", packages=_FLASK_21, requirements=("requirements/dev.txt",)),
        ),
        (
            _versions("2.2 2.3 3.0 3.1"),
            RepoSpec(python="3.11", packages=_FLASK_21, requirements=("requirements/dev.txt",)),
        ),
    ],
    "marshmallow-code/marshmallow": [
        (
            _versions("2.18 2.19 2.20 3.0 3.1 3.2 3.4 3.8 3.9 3.10 3.11 3.12 3.13 3.15 3.16 3.19"),
            RepoSpec(python="3.9", install="python -m pip install -e '.[dev]'"),
        ),
    ],
    "pylint-dev/pylint": [
        (
            _versions("2.9 2.10 2.11 2.13 2.14 2.15 2.16 2.17"),
            RepoSpec(python="3.9", requirements=("requirements_test.txt",)),
        ),
    ],
}


def spec_for(task: Task) -> RepoSpec | None:
    """The table's spec for the task's repo and version, or None when the table does not know it."""
    for versions, spec in SPECS.get(task.repo, []):
        if task.version in versions:
            return spec
    return None


def known_repos() -> list[str]:
    return sorted(SPECS)
