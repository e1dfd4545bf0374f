"""Golden trajectories -> SFT data: chat JSONL, tokenized JSONL with an assistant-only mask, a data card.

Sources are run directories of ``swe-rl eval`` (results.jsonl for the verdicts, ``<instance>__<ts>/traj.json``
for the conversations) and public trajectory sets (:mod:`swe_rl.sftdata.trajsets`). Every trajectory either
passes the filters or is skipped with a counted reason in the data card; bad input (a torn results line, a
corrupt or missing traj.json, a trajectory without a verdict) is a reason, never a crash.

<out>/chat.jsonl        {"messages": [{"role", "content"}...], "instance_id", "source", ...}  (TRL, torchtune)
<out>/tokenized.jsonl   {"input_ids", "assistant_masks", "instance_id", "source"}            (TRL pre-tokenized)
<out>/data_card.json    sources, filters, tokenizer, counts, skipped reasons
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from swe_rl.agent.trajectory import Trajectory
from swe_rl.episode.record import EpisodeRecord
from swe_rl.errors import ConfigError
from swe_rl.fileio import atomic_write_json, atomic_write_text
from swe_rl.llm.base import Message
from swe_rl.rundir import RunDir

ARTIFACT_FILES = (RunDir.TRAJECTORY, RunDir.PATCH, RunDir.META)


class SFTFilters(BaseModel):
    """Which trajectories become training data."""

    resolved_only: bool = Field(default=True, description="Keep only trajectories whose patch resolved.")
    max_steps: int | None = Field(default=None, ge=1, description="Drop trajectories with more model turns.")
    max_tokens: int | None = Field(
        default=None, ge=1, description="Drop trajectories whose longest example has more tokens."
    )
    drop_format_errors: bool = Field(default=True, description="Drop trajectories with any format error.")
    drop_truncated: bool = Field(
        default=True, description="Drop trajectories that did not end by submitting."
    )
    per_instance: int | None = Field(
        default=None, ge=1, description="At most this many per instance (the shortest)."
    )
    dedupe: bool = Field(default=True, description="Drop trajectories whose conversation repeats another's.")


class Candidate(BaseModel):
    """A trajectory that may become training data, whatever its source."""

    instance_id: str
    source: str = Field(description="Where it came from: a run directory's folder or dataset:row.")
    messages: list[Message]
    resolved: bool
    exit_status: str = "submitted"
    format_errors: int = 0
    n_steps: int = 0
    skip_reason: str | None = Field(default=None, description="Set by the source: why not to keep it.")
    metadata: dict[str, Any] = Field(default_factory=dict)


class DataCard(BaseModel):
    created: str
    sources: list[str]
    filters: SFTFilters
    tokenizer: str | None
    template_kwargs: dict[str, Any]
    merge_turns: bool
    counts: dict[str, int]
    skipped: dict[str, int] = Field(description="Trajectories left out, by reason.")
    files: dict[str, str]


def candidates_from_run(run_dir: Path) -> tuple[list[Candidate], Counter[str]]:
    """The trajectories of one eval run directory, and the count of what could not be read, by reason."""
    skipped: Counter[str] = Counter()
    if not run_dir.is_dir():
        raise ConfigError(f"not a run directory: {run_dir}")
    verdicts: dict[str, EpisodeRecord] = {}
    results_path = RunDir(run_dir).results_path
    folders = sorted(
        p for p in run_dir.iterdir() if p.is_dir() and any((p / f).exists() for f in ARTIFACT_FILES)
    )
    if not results_path.is_file() and not folders:
        kind = "a training run (rollouts.jsonl)" if RunDir(run_dir).is_training else "not a run"
        raise ConfigError(
            f"{run_dir} is {kind}: SFT data comes from `swe-rl eval` run directories (results.jsonl and "
            "an <instance>__<time>/traj.json per attempt)"
        )
    if results_path.is_file():
        for line in results_path.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                result = EpisodeRecord.model_validate_json(line)
            except ValueError:
                skipped["corrupt results.jsonl line"] += 1
                continue
            if result.artifacts:
                verdicts[Path(result.artifacts).name] = result  # a retry's line replaces the earlier one
    out = []
    for folder in folders:
        verdict = verdicts.pop(folder.name, None)
        candidate = _from_folder(folder, verdict, skipped)
        if candidate is not None:
            out.append(candidate)
    skipped["results.jsonl line without its artifacts"] += len(verdicts)
    return out, +skipped


def _from_folder(folder: Path, result: EpisodeRecord | None, skipped: Counter[str]) -> Candidate | None:
    if result is None:
        skipped["no verdict (no results.jsonl line)"] += 1
        return None
    if result.infra_error:
        skipped["infrastructure error (no verdict)"] += 1
        return None
    if result.grade_status is None:
        skipped["not graded (no verdict)"] += 1
        return None
    path = folder / RunDir.TRAJECTORY
    if not path.is_file():
        skipped["missing traj.json"] += 1
        return None
    try:
        traj = Trajectory.model_validate_json(path.read_bytes())
    except ValueError:
        skipped["corrupt traj.json"] += 1
        return None
    if traj.instance_id != result.instance_id:
        skipped["traj.json of another instance"] += 1
        return None
    return Candidate(
        instance_id=result.instance_id,
        source=f"{folder.parent.name}/{folder.name}",
        messages=traj.messages,
        resolved=result.resolved,
        exit_status=traj.exit_status or result.exit_status,
        format_errors=traj.format_errors,
        n_steps=len(traj.steps),
        metadata={"model": traj.model, "attempt": result.attempt, "patch_source": result.patch_source},
    )


def trim(messages: Sequence[Message]) -> list[Message]:
    """The conversation up to its last assistant message (what follows it trains nothing)."""
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    return list(messages[: last + 1])


def _first_failed_filter(c: Candidate, filters: SFTFilters) -> str | None:
    if c.skip_reason:
        return c.skip_reason
    if not any(m.role == "assistant" for m in c.messages):
        return "no assistant message"
    if filters.resolved_only and not c.resolved:
        return "not resolved"
    if filters.drop_truncated and c.exit_status != "submitted":
        return f"did not submit ({c.exit_status})"
    if filters.drop_format_errors and c.format_errors:
        return "format errors"
    if filters.max_steps is not None and c.n_steps > filters.max_steps:
        return f"more than {filters.max_steps} steps"
    return None


def build_sft_data(
    candidates: Iterable[Candidate],
    out_dir: Path,
    *,
    filters: SFTFilters | None = None,
    tokenizer: str | None = "qwen",
    template_kwargs: dict[str, Any] | None = None,
    merge_turns: bool = True,
    sources: Sequence[str] = (),
    unreadable: Counter[str] | None = None,
) -> DataCard:
    """Filter, deduplicate, tokenize and write; returns the data card (also written to data_card.json).

    ``unreadable``: what the sources could not read, by reason; a source may still add to it while
    ``candidates`` is being consumed.
    """
    from swe_rl.rl.chat_examples import SFTExample

    filters = filters or SFTFilters()
    kwargs = dict(template_kwargs or {})
    unreadable = unreadable if unreadable is not None else Counter()
    skipped: Counter[str] = Counter()
    tok = _load_tokenizer(tokenizer)
    if filters.max_tokens is not None and tok is None:
        raise ConfigError("--max-tokens needs a tokenizer")
    kept: list[tuple[Candidate, list[SFTExample]]] = []
    seen: set[str] = set()
    total = 0
    for c in candidates:
        total += 1
        c.messages = trim(c.messages)
        reason = _first_failed_filter(c, filters)
        if reason is None and filters.dedupe:
            key = _conversation_key(c.messages)
            reason = "duplicate" if key in seen else None
            seen.add(key)
        examples: list[SFTExample] = []
        if reason is None and tok is not None:
            examples, reason = _encoded(c, tok, filters.max_tokens, merge_turns, kwargs)
        if reason is not None:
            skipped[reason] += 1
            continue
        kept.append((c, examples))
    kept = _per_instance(kept, filters.per_instance, skipped)
    counts = {"trajectories_read": total, "unreadable": sum(unreadable.values())}
    return _write(
        out_dir,
        kept,
        counts,
        filters,
        tokenizer if tok is not None else None,
        kwargs,
        merge_turns,
        sources,
        unreadable + skipped,
    )


def _encoded(
    c: Candidate, tok: Any, max_tokens: int | None, merge_turns: bool, kwargs: dict[str, Any]
) -> tuple[list[Any], str | None]:
    """The candidate's tokenized examples, or why it is skipped (cannot be templated, too long)."""
    from swe_rl.rl.chat_examples import encode_chat

    try:
        examples = encode_chat(c.messages, tok, merge=merge_turns, name=c.source, **kwargs)
    except (ConfigError, ValueError, TypeError) as exc:
        return [], f"cannot be templated ({type(exc).__name__})"
    if max_tokens is not None and max(len(e.input_ids) for e in examples) > max_tokens:
        return examples, f"more than {max_tokens} tokens"
    return examples, None


def _per_instance(
    kept: list[tuple[Candidate, list[Any]]], k: int | None, skipped: Counter[str]
) -> list[tuple[Candidate, list[Any]]]:
    if k is None:
        return kept
    ranked = sorted(
        enumerate(kept),
        key=lambda p: (p[1][0].n_steps, sum(len(e.input_ids) for e in p[1][1]), p[0]),
    )
    count: Counter[str] = Counter()
    chosen = set()
    for index, (c, _) in ranked:
        count[c.instance_id] += 1
        if count[c.instance_id] <= k:
            chosen.add(index)
        else:
            skipped[f"more than {k} per instance"] += 1
    return [pair for i, pair in enumerate(kept) if i in chosen]


def _write(
    out_dir: Path,
    kept: list[tuple[Candidate, list[Any]]],
    counts: dict[str, int],
    filters: SFTFilters,
    tokenizer: str | None,
    kwargs: dict[str, Any],
    merge_turns: bool,
    sources: Sequence[str],
    skipped: Counter[str],
) -> DataCard:
    out_dir.mkdir(parents=True, exist_ok=True)
    chat_lines, token_lines = [], []
    for c, examples in kept:
        chat_lines.append(
            json.dumps(
                {
                    "messages": [m.model_dump() for m in c.messages],
                    "instance_id": c.instance_id,
                    "source": c.source,
                    "n_steps": c.n_steps,
                    "metadata": c.metadata,
                }
            )
        )
        for e in examples:
            row = {"input_ids": e.input_ids, "assistant_masks": e.assistant_masks}
            token_lines.append(json.dumps({**row, "instance_id": c.instance_id, "source": c.source}))
    files = {"chat": str(out_dir / "chat.jsonl")}
    atomic_write_text(out_dir / "chat.jsonl", "".join(line + "\n" for line in chat_lines))
    if tokenizer is not None:
        files["tokenized"] = str(out_dir / "tokenized.jsonl")
        atomic_write_text(out_dir / "tokenized.jsonl", "".join(line + "\n" for line in token_lines))
    examples_all = [e for _, ex in kept for e in ex]
    card = DataCard(
        created=datetime.now(UTC).isoformat(),
        sources=list(sources),
        filters=filters,
        tokenizer=tokenizer,
        template_kwargs=kwargs,
        merge_turns=merge_turns,
        counts={
            **counts,
            "trajectories_kept": len(kept),
            "instances": len({c.instance_id for c, _ in kept}),
            "assistant_turns": sum(sum(m.role == "assistant" for m in c.messages) for c, _ in kept),
            "examples": len(examples_all),
            "tokens": sum(len(e.input_ids) for e in examples_all),
            "trained_tokens": sum(e.trained_tokens for e in examples_all),
        },
        skipped=dict(sorted(skipped.items())),
        files=files,
    )
    atomic_write_json(out_dir / "data_card.json", card.model_dump(mode="json"))
    return card


def _conversation_key(messages: Sequence[Message]) -> str:
    text = json.dumps([(m.role, m.content) for m in messages], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _load_tokenizer(name: str | None) -> Any:
    if name in (None, "", "none"):
        return None
    from swe_rl.rl.tokenizer import load_tokenizer

    try:
        return load_tokenizer(name)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load tokenizer {name!r}: {exc}") from None


def sft_from_runs(
    run_dirs: Sequence[Path],
    out_dir: Path,
    *,
    extra: Iterable[Candidate] = (),
    extra_sources: Sequence[str] = (),
    **options: Any,
) -> DataCard:
    """``swe-rl data sft``: every run directory's trajectories (plus ``extra``) through :func:`build_sft_data`."""
    candidates: list[Candidate] = []
    unreadable: Counter[str] = options.pop("unreadable", None) or Counter()
    for run_dir in run_dirs:
        found, bad = candidates_from_run(run_dir)
        candidates += found
        unreadable.update(bad)

    def all_candidates() -> Iterable[Candidate]:
        yield from candidates
        yield from extra

    sources = [str(p) for p in run_dirs] + list(extra_sources)
    return build_sft_data(all_candidates(), out_dir, sources=sources, unreadable=unreadable, **options)
