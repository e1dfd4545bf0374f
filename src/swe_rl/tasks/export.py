"""Trainer data and cluster assets from task sources (the seed's preprocess and export scripts)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from swe_rl.fileio import atomic_write_text
from swe_rl.tasks.image_names import ImageFlavor, image_name
from swe_rl.tasks.model import Task


def trainer_rows(tasks: Sequence[Task], data_source: str) -> str:
    """JSONL ``{"text": problem_statement, "metadata": {"instance": record, "data_source": source}}``."""
    return "".join(
        json.dumps(
            {"text": t.problem_statement, "metadata": {"instance": t.to_record(), "data_source": data_source}}
        )
        + "\n"
        for t in tasks
    )


def guess_flavor(source: str) -> ImageFlavor:
    return "swegym" if "gym" in source.lower() else "swebench"


def write_prepared(tasks: Sequence[Task], data_source: str, out: Path, split: str = "train") -> Path:
    path = out / f"{split}.jsonl"
    atomic_write_text(path, trainer_rows(tasks, data_source))
    return path


def keep_usable(tasks: Sequence[Task], report: Path) -> list[Task]:
    """The tasks an ``env build`` report marks usable: ``valid`` when it validated, else ``built``."""
    from swe_rl.errors import ConfigError

    try:
        data = json.loads(report.read_text())
        validated, entries = bool(data["validated"]), dict(data["entries"])
    except FileNotFoundError:
        raise ConfigError(f"build report not found: {report}") from None
    except (ValueError, KeyError, TypeError):
        raise ConfigError(
            f"{report} is not an `swe-rl env build` report (no 'validated' and 'entries')"
        ) from None
    want = "valid" if validated else "built"
    usable = {
        iid for iid, entry in entries.items() if isinstance(entry, dict) and entry.get("status") == want
    }
    return [t for t in tasks if t.instance_id in usable]


def write_exports(tasks: Sequence[Task], out: Path, flavor: ImageFlavor) -> dict[str, Path]:
    """``instance_ids.txt``, ``docker_images.txt`` (named per source) and ``eval.jsonl``."""
    files = {
        "instance_ids": out / "instance_ids.txt",
        "docker_images": out / "docker_images.txt",
        "eval": out / "eval.jsonl",
    }
    atomic_write_text(files["instance_ids"], "".join(t.instance_id + "\n" for t in tasks))
    images = [t.image_name or image_name(t.instance_id, flavor) for t in tasks]
    atomic_write_text(files["docker_images"], "".join(name + "\n" for name in images))
    # every row names its image, as the seed's eval script reads it
    rows = [{**t.to_record(), "image_name": name} for t, name in zip(tasks, images, strict=True)]
    atomic_write_text(files["eval"], "".join(json.dumps(row) + "\n" for row in rows))
    return files
