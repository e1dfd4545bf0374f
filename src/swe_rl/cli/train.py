"""``swe-rl train``: supervised warm start (``sft``) on golden trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from swe_rl.cli.lazy import lazy_group
from swe_rl.cli.options import config_option, json_alone, note, print_json, with_overrides, writable_dir

app = typer.Typer(
    help="Train models: supervised warm start on golden trajectories (sft), then RL with GRPO (rl).",
    cls=lazy_group({"rl": "swe_rl.cli.train_rl:train_rl"}),
    no_args_is_help=True,
)


@app.command("sft")
def sft(
    ctx: typer.Context,
    data: Annotated[
        Path | None,
        typer.Argument(
            help="`swe-rl data sft` output: its directory, chat.jsonl or tokenized.jsonl (with --resume: "
            "the run's own)."
        ),
    ] = None,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="smollm2, tiny-qwen (tests), tiny-qwen-m (a larger random Qwen3 for CPU learning runs) "
            "or a transformers model directory.",
        ),
    ] = "smollm2",
    output_dir: Annotated[
        Path, typer.Option("--output-dir", "-o", help="Checkpoints and train_sft.json.")
    ] = Path("swe-rl-sft"),
    epochs: Annotated[float, typer.Option(help="Passes over the data (> 0).")] = 3.0,
    max_steps: Annotated[int, typer.Option(help="Optimizer steps; overrides --epochs when > 0.")] = -1,
    learning_rate: Annotated[float, typer.Option("--lr", help="AdamW learning rate (> 0).")] = 5e-5,
    batch_size: Annotated[int, typer.Option(min=1, help="Examples per device step.")] = 1,
    grad_accum: Annotated[int, typer.Option(min=1, help="Gradient accumulation steps.")] = 1,
    max_length: Annotated[int, typer.Option(min=16, help="Tokens per example; longer ones are cut.")] = 4096,
    thinking: Annotated[
        str,
        typer.Option(help="Chat template's enable_thinking when tokenizing chat.jsonl: default, on, off."),
    ] = "default",
    per_turn: Annotated[bool, typer.Option(help="One example per assistant turn.")] = False,
    seed: Annotated[int, typer.Option(help="Seed of the data order and of tiny-qwen's weights.")] = 0,
    save_steps: Annotated[
        int, typer.Option(min=0, help="Checkpoint every N steps: what --resume continues from (0: none).")
    ] = 10,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    config: Annotated[list[str] | None, config_option("keep_checkpoints=3")] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            metavar="RUN_DIR",
            help="Continue this unfinished run from its newest complete checkpoint, with its own data, model "
            "and settings (options given must agree with them).",
        ),
    ] = None,
) -> None:
    """Fine-tune with TRL's SFTTrainer, loss on the assistant's tokens only; saves <output-dir>/final."""
    from swe_rl.errors import ConfigError
    from swe_rl.train.sft import SFTTrainSettings, train_sft

    modes = {"default": None, "on": True, "off": False}
    if thinking not in modes:
        raise ConfigError(f"--thinking must be default, on or off, not {thinking!r}")
    settings = SFTTrainSettings(
        output_dir=output_dir,
        epochs=epochs,
        max_steps=max_steps,
        learning_rate=learning_rate,
        batch_size=batch_size,
        grad_accum=grad_accum,
        max_length=max_length,
        thinking=modes[thinking],
        merge_turns=not per_turn,
        seed=seed,
        save_steps=save_steps,
    )
    settings = with_overrides(settings, config)
    if resume is not None:
        data, model, settings = _resumed(ctx, resume, data, model, settings, config)
    if data is None:
        raise ConfigError("train sft needs the data (a `swe-rl data sft` output), or --resume RUN_DIR")
    output_dir = writable_dir(settings.output_dir)
    note(f"train sft: model {model}, data {data}, output {output_dir}/")
    with json_alone(json_out):
        result = train_sft(data, model, settings, resume=resume is not None)
    if json_out:
        print_json(result)
    else:
        losses = result["losses"]
        first, last = (f"{losses[0]:.3f}", f"{losses[-1]:.3f}") if losses else ("-", "-")
        print(f"{result['steps']} steps on {result['examples']} examples; loss {first} -> {last}")
    if "model_dir" in result:
        note(f"model: {result['model_dir']} (swe-rl eval --llm hf:{result['model_dir']} runs it)")


# options whose value is an SFTTrainSettings field of another name
_FIELDS = {"learning_rate": "learning_rate", "per_turn": "merge_turns", "data": "data", "model": "model"}
_SAME = ("epochs", "max_steps", "batch_size", "grad_accum", "max_length", "thinking", "seed")


def _resumed(
    ctx: typer.Context, run_dir: Path, data: Path | None, model: str, given: Any, config: list[str] | None
) -> tuple[Path, str, Any]:
    """The saved run's data, model and settings for --resume; ConfigError if an option given would change
    them."""
    from swe_rl.cli.train_rl import given_options
    from swe_rl.errors import ConfigError
    from swe_rl.rundir import RunDir
    from swe_rl.train.resume import check_unchanged, open_run
    from swe_rl.train.sft import SFTTrainSettings

    if config:
        raise ConfigError(
            f"--resume {run_dir} takes the run's settings from its config.json; drop -c/--config"
        )
    saved_config = open_run(run_dir, "sft", RunDir(run_dir).sft_result_path)
    if saved_config.get("model") is None:
        raise ConfigError(
            f"--resume {run_dir}: the run was given a model object, not a name; resume it in Python"
        )
    saved = SFTTrainSettings.model_validate(saved_config["settings"])
    explicit = given_options(ctx)
    given_flat = {**given.model_dump(mode="json"), "data": str(data), "model": model}
    saved_flat = {
        **saved.model_dump(mode="json"),
        "data": saved_config["data"],
        "model": saved_config["model"],
    }
    names = [_FIELDS.get(n, n) for n in explicit if n in _FIELDS or n in _SAME]
    check_unchanged(saved_flat, given_flat, names)
    if "output_dir" in explicit and given.output_dir != run_dir:
        raise ConfigError(
            f"--resume {run_dir} writes to the run itself; drop --output-dir {given.output_dir}"
        )
    update = {"output_dir": run_dir, **({"save_steps": given.save_steps} if "save_steps" in explicit else {})}
    return Path(saved_config["data"]), saved_config["model"], saved.model_copy(update=update)
