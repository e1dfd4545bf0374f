"""``swe-rl data``: trainer JSONL and cluster assets from task sources."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from swe_rl.cli.options import InstancesOpt, SourceOpt, note, writable_dir

app = typer.Typer(help="Prepare training data and export assets for a cluster.", no_args_is_help=True)
OutOpt = Annotated[Path, typer.Option("--output-dir", "-o", help="Directory to write into.")]


@app.command("prepare")
def prepare(
    source: SourceOpt = "builtin",
    output_dir: OutOpt = Path("data"),
    instance: InstancesOpt = None,
    split: Annotated[str, typer.Option(help="Name of the output file (<split>.jsonl).")] = "train",
    data_source: Annotated[
        str | None, typer.Option(help="metadata.data_source [default: the source].")
    ] = None,
    valid_only: Annotated[
        Path | None,
        typer.Option(
            "--valid-only",
            help="An `env build` report: keep only the instances it marks usable (valid when it was "
            "built with --validate, else built).",
        ),
    ] = None,
) -> None:
    """Tasks -> trainer JSONL: {"text": problem, "metadata": {"instance": record, "data_source": ...}}."""
    from swe_rl.tasks.export import keep_usable, write_prepared
    from swe_rl.tasks.loaders import load_tasks

    writable_dir(output_dir)
    tasks = load_tasks(source, instance_ids=instance)
    if valid_only is not None:
        before = len(tasks)
        tasks = keep_usable(tasks, valid_only)
        note(f"--valid-only {valid_only}: kept {len(tasks)} of {before} instances")
    path = write_prepared(tasks, data_source or source, output_dir, split)
    note(f"{len(tasks)} rows -> {path}")


@app.command("export")
def export(
    source: SourceOpt = "builtin",
    output_dir: OutOpt = Path("data"),
    instance: InstancesOpt = None,
    flavor: Annotated[
        str | None, typer.Option(help="Image naming: swebench or swegym [default: guessed from the source].")
    ] = None,
) -> None:
    """instance_ids.txt, docker_images.txt (SWE-bench or SWE-Gym naming) and eval.jsonl for `swe-rl eval`."""
    from swe_rl.errors import ConfigError
    from swe_rl.tasks.export import guess_flavor, write_exports
    from swe_rl.tasks.loaders import load_tasks

    if flavor not in (None, "swebench", "swegym"):
        raise ConfigError(f"unknown image flavor {flavor!r}: use swebench or swegym")
    writable_dir(output_dir)
    tasks = load_tasks(source, instance_ids=instance)
    files = write_exports(tasks, output_dir, flavor or guess_flavor(source))  # type: ignore[arg-type]
    for name, path in files.items():
        note(f"{name}: {path}")


@app.command("sft")
def sft(
    run_dirs: Annotated[
        list[Path] | None,
        typer.Argument(help="Run directories of `swe-rl eval` (results.jsonl + traj.json)."),
    ] = None,
    out: Annotated[Path, typer.Option("--output-dir", "-o", help="Directory to write into.")] = Path(
        "sft-data"
    ),
    trajectories: Annotated[
        list[str] | None,
        typer.Option(
            "--trajectories",
            "-t",
            help="A public set in the SWE-smith trajectories schema: .jsonl/.json/.parquet file or HF dataset name.",
        ),
    ] = None,
    split: Annotated[
        str | None, typer.Option(help="Split of an HF trajectory set: xml, tool or ticks.")
    ] = None,
    keep: Annotated[
        str,
        typer.Option(
            help="Imported trajectories kept when every action is at least: exact, rewritten (edits as "
            "python) or approximate (views as cat/sed)."
        ),
    ] = "approximate",
    original_prompts: Annotated[
        bool, typer.Option(help="Keep an imported set's own system prompt and task message.")
    ] = False,
    include_unresolved: Annotated[
        bool, typer.Option(help="Keep trajectories whose patch did not resolve.")
    ] = False,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Drop trajectories with more turns.")] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="Drop trajectories whose longest example is longer.")
    ] = None,
    keep_format_errors: Annotated[bool, typer.Option(help="Keep trajectories with format errors.")] = False,
    keep_truncated: Annotated[
        bool, typer.Option(help="Keep trajectories that ended without submitting.")
    ] = False,
    per_instance: Annotated[
        int | None, typer.Option(min=1, help="At most k per instance (the shortest).")
    ] = None,
    dedupe: Annotated[bool, typer.Option(help="Drop repeated conversations.")] = True,
    tokenizer: Annotated[
        str,
        typer.Option(
            help="Tokenizer of the tokenized variant: qwen, a model directory, or none (chat only)."
        ),
    ] = "qwen",
    thinking: Annotated[
        str, typer.Option(help="Chat template's enable_thinking: default (unset), on or off.")
    ] = "default",
    per_turn: Annotated[
        bool, typer.Option(help="One tokenized example per assistant turn instead of merged turns.")
    ] = False,
    agent_config: Annotated[
        str | None, typer.Option(help="Agent config whose prompts imported sets get.")
    ] = None,
) -> None:
    """Golden trajectories -> chat.jsonl (messages), tokenized.jsonl (input_ids + assistant_masks), data_card.json."""
    from collections import Counter

    from swe_rl.agent.config import load_agent_config
    from swe_rl.errors import ConfigError
    from swe_rl.sftdata.from_runs import SFTFilters, sft_from_runs
    from swe_rl.sftdata.trajsets import MARKS, public_candidates

    if not run_dirs and not trajectories:
        raise ConfigError("give run directories and/or --trajectories")
    writable_dir(out)
    if keep not in MARKS[:3]:
        raise ConfigError(f"--keep must be one of {', '.join(MARKS[:3])}, not {keep!r}")
    modes = {"default": {}, "on": {"enable_thinking": True}, "off": {"enable_thinking": False}}
    if thinking not in modes:
        raise ConfigError(f"--thinking must be default, on or off, not {thinking!r}")
    config = load_agent_config(agent_config)
    unreadable: Counter[str] = Counter()
    extra = (
        c
        for source in trajectories or []
        for c in public_candidates(
            source,
            config,
            unreadable,
            split=split,
            keep=keep,
            own_prompts=not original_prompts,
        )
    )
    card = sft_from_runs(
        list(run_dirs or []),
        out,
        extra=extra,
        extra_sources=[f"{s}:{split}" if split else s for s in trajectories or []],
        unreadable=unreadable,
        filters=SFTFilters(
            resolved_only=not include_unresolved,
            max_steps=max_steps,
            max_tokens=max_tokens,
            drop_format_errors=not keep_format_errors,
            drop_truncated=not keep_truncated,
            per_instance=per_instance,
            dedupe=dedupe,
        ),
        tokenizer=None if tokenizer == "none" else tokenizer,
        template_kwargs=modes[thinking],
        merge_turns=not per_turn,
    )
    c = card.counts
    note(
        f"kept {c['trajectories_kept']} of {c['trajectories_read']} trajectories ({c['instances']} instances, "
        f"{c['examples']} examples, {c['trained_tokens']}/{c['tokens']} tokens trained); unreadable {c['unreadable']}"
    )
    for reason, n in card.skipped.items():
        note(f"  skipped {n}: {reason}")
    for name, path in card.files.items():
        note(f"{name}: {path}")
    note(f"data card: {out / 'data_card.json'}")
