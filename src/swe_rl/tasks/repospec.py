"""One repository's install and test recipe at one version: the type of the spec table's entries."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Directives = Literal["paths", "django_modules"]


class RepoSpec(BaseModel):
    """How to install and test one repository at one version."""

    model_config = ConfigDict(frozen=True)

    python: str = Field(description="Python version, e.g. '3.9'.")
    packages: tuple[str, ...] = Field(default=(), description="Requirements installed before the repo.")
    requirements: tuple[str, ...] = Field(
        default=(), description="Requirement files in the repo: the first that exists is installed."
    )
    env_yml: tuple[str, ...] = Field(
        default=(),
        description="Conda environment files in the repo: the first that exists has its dependencies "
        "installed with pip (conda's name=1.2 read as name==1.2).",
    )
    pre_install: tuple[str, ...] = Field(default=(), description="Shell commands run before the install.")
    undated: tuple[str, ...] = Field(
        default=(),
        description="Packages resolved from today's index even when the build resolves as of a date.",
    )
    install: str = Field(default="python -m pip install -e .", description="Installs the repo itself.")
    test_cmd: str = Field(default="pytest -rA", description="Test command; the test directives are appended.")
    directives: Directives = Field(
        default="paths",
        description="How test files become arguments: as paths, or as django's dotted test modules.",
    )
    eval_commands: tuple[str, ...] = Field(
        default=(), description="Shell lines the eval runs before the tests (environment variables)."
    )
    system: tuple[str, ...] = Field(
        default=(), description="Host commands the build needs (compilers): checked before building."
    )
