"""The shorthand the spec families write their entries in: a pin list as one string, a spec as shared defaults
plus its own fields."""

from __future__ import annotations

from typing import Any

from swe_rl.tasks.repospec import RepoSpec


def pins(text: str) -> tuple[str, ...]:
    """Requirements written as one space-separated string (a pin list per line would double the table)."""
    return tuple(text.split())


def spec(defaults: dict[str, Any], **fields: Any) -> RepoSpec:
    """A spec from a family's shared fields, ``defaults``, and its own, which win."""
    return RepoSpec.model_validate({**defaults, **fields})
