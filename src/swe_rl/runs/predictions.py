"""SWE-bench predictions files (``preds.json``): a list, a dict keyed by instance id, or JSONL."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from swe_rl.errors import ConfigError


class Prediction(BaseModel):
    model_config = ConfigDict(extra="allow", protected_namespaces=())

    instance_id: str = Field(min_length=1)
    model_name_or_path: str = "unknown"
    model_patch: str | None = None


def load_predictions(path: Path) -> list[Prediction]:
    """Read and validate a predictions file; any malformed entry fails the whole load, naming the entry."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read predictions {path}: {exc.strerror}") from None
    raw = _jsonl(path, text) if path.suffix == ".jsonl" else _json(path, text)
    if isinstance(raw, dict):
        raw = [
            {"instance_id": key, **value} if isinstance(value, dict) else value for key, value in raw.items()
        ]
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: expected a list of predictions or a dict keyed by instance_id")
    preds: list[Prediction] = []
    for i, entry in enumerate(raw):
        try:
            preds.append(Prediction.model_validate(entry))
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"{path}: prediction #{i}: field {field!r}: {err['msg']}") from None
    seen: set[str] = set()
    for pred in preds:
        if pred.instance_id in seen:
            raise ConfigError(f"{path}: duplicate prediction for {pred.instance_id}")
        seen.add(pred.instance_id)
    return preds


def _json(path: Path, text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None


def _jsonl(path: Path, text: str) -> list[object]:
    """One JSON value per non-blank line; an error names the file's line (each line parses as line 1)."""
    raw = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: invalid JSON at line {number}: {exc.msg}") from None
    return raw
