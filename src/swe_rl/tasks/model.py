"""The task record: SWE-bench's schema plus the extra fields of SWE-Gym, SWE-smith and swebench 5."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from swe_rl.errors import TaskFormatError


def _test_list(value: Any) -> list[str]:
    """FAIL_TO_PASS / PASS_TO_PASS arrive as lists or as JSON-encoded strings (HF SWE-bench)."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a JSON list of test names: {exc.msg}") from None
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a list of test names (strings)")
    return list(value)


class Task(BaseModel):
    """One SWE task instance, exactly SWE-bench's fields plus optional extras.

    Unknown extra fields are kept (``model_extra``) so that a record round-trips unchanged.
    """

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    instance_id: str = Field(min_length=1, description="Unique id, e.g. 'astropy__astropy-12907'.")
    repo: str = Field(min_length=1, description="'owner/name' of the repository.")
    base_commit: str = Field(min_length=4, description="Commit the agent starts from.")
    patch: str = Field(default="", description="Gold patch (non-test files).")
    test_patch: str = Field(default="", description="Patch adding/changing the tests that judge the fix.")
    problem_statement: str = Field(default="", description="The issue text shown to the agent.")
    hints_text: str = Field(default="", description="Comments on the issue before the fix.")
    created_at: str = Field(default="", description="Creation time of the fix PR (ISO 8601).")
    version: str = Field(default="", description="Release line of the repo, keys swebench's install specs.")
    environment_setup_commit: str = Field(default="", description="Commit used to install the environment.")
    FAIL_TO_PASS: list[str] = Field(default_factory=list, description="Tests the fix must make pass.")
    PASS_TO_PASS: list[str] = Field(default_factory=list, description="Tests that must keep passing.")
    # Extras (swebench 5 / SWE-Gym / SWE-smith rows)
    eval_script: str | None = Field(default=None, description="Full eval script (swebench 5 rows).")
    log_parser: str | None = Field(default=None, description="Name in swebench's PARSER_REGISTRY.")
    eval_type: str | None = Field(default=None, description="'pass_and_fail' (default) or 'fail_only'.")
    image_name: str | None = Field(default=None, description="Evaluation image named by the record.")
    test_cmd: str | None = Field(default=None, description="Test command, when the record carries one.")
    python: str | None = Field(default=None, description="Python version the env needs, e.g. '3.11'.")
    install: str | None = Field(
        default=None, description="Install command run in the repo (task's own setup)."
    )
    env_seed: list[str] | None = Field(
        default=None, description="Distributions copied from the host into the env offline, e.g. ['pytest']."
    )
    setup_stand_in: str | None = Field(
        default=None,
        description="Base commit of the newest row of the task's (repo, version, environment setup commit) in "
        "the file it was loaded from, where that is another row's: its env is built at that commit when the "
        "repo's source lacks the setup commit (a fork's snapshot), so the version's instances still share one.",
    )
    repo_source: str | None = Field(
        default=None,
        description="Git source of the repo (bare repo path or URL) when no mirror holds it, e.g. the "
        "repository of synthesized tasks; a relative path in a task file is read against the file's folder.",
    )

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _parse_tests(cls, value: Any) -> list[str]:
        return _test_list(value)

    @field_validator("version", mode="before")
    @classmethod
    def _version_str(cls, value: Any) -> Any:
        # HF parquet exports sometimes carry versions as floats (e.g. 3.0).
        return str(value) if isinstance(value, int | float) else ("" if value is None else value)

    @field_validator(
        "hints_text",
        "created_at",
        "environment_setup_commit",
        "patch",
        "test_patch",
        "problem_statement",
        mode="before",
    )
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value

    @property
    def test_files(self) -> list[str]:
        """Files the test patch touches, in order: the test directives of the eval run."""
        return patch_files(self.test_patch)

    def to_record(self) -> dict[str, Any]:
        """The record as SWE-bench writes it (tests as lists), extras included, Nones dropped."""
        return self.model_dump(exclude_none=True)


def patch_files(patch: str) -> list[str]:
    """Paths a unified diff touches (post-image names; deleted files by their old name)."""
    files: list[str] = []
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            parts = line.split(" b/", 1)
            if len(parts) == 2 and parts[1] not in files:
                files.append(parts[1])
    return files


def parse_task(record: Any, *, where: str = "") -> Task:
    """Validate one raw record into a :class:`Task`, or raise :class:`TaskFormatError`.

    ``where`` says where the record came from (file and line) for the error message.
    """
    if not isinstance(record, dict):
        raise TaskFormatError(f"expected a JSON object, got {type(record).__name__}", record=where or None)
    name = str(record.get("instance_id") or where or "<unnamed>")
    if where and record.get("instance_id"):
        name = f"{record['instance_id']} ({where})"
    try:
        task = Task.model_validate(record)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        raise TaskFormatError(first["msg"], record=name, field=field) from None
    missing = [field for field, why in NEEDED.items() if not getattr(task, field)]
    if missing:
        why = "; ".join(f"{field}: {NEEDED[field]}" for field in missing)
        raise TaskFormatError(
            f"missing {' and '.join(missing)} ({why})",
            record=name,
            field=missing[0] if len(missing) == 1 else None,
        )
    return task


# What a record must carry beyond its identity for an episode to mean anything (a test patch may be empty: a
# synthesized task's tests are already in its repository).
NEEDED = {
    "problem_statement": "the issue the agent is shown",
    "FAIL_TO_PASS": "the tests the fix must make pass; with none, any patch keeping PASS_TO_PASS grades resolved",
}
