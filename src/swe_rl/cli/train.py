"""``swe-rl train``: supervised warm start (``sft``) on golden trajectories."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from swe_rl.cli.common import ConfigOpt, note, print_json, with_overrides
from swe_rl.cli.train_rl import train_rl

app = typer.Typer(
    help="Train models: supervised warm start on golden trajectories (sft), then RL with GRPO (rl).",
    no_args_is_help=True,
)
app.command("rl")(train_rl)


@app.command("sft")
def sft(
    data: Annotated[
        Path, typer.Argument(help="`swe-rl data sft` output: its directory, chat.jsonl or tokenized.jsonl.")
    ],
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
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    config: ConfigOpt = None,
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
    )
    settings = with_overrides(settings, config)
    output_dir = settings.output_dir
    note(f"train sft: model {model}, data {data}, output {output_dir}/")
    # with --json the trainer's progress and log lines go to stderr: stdout is the JSON alone
    with contextlib.redirect_stdout(sys.stderr) if json_out else contextlib.nullcontext():
        result = train_sft(data, model, settings)
    if json_out:
        print_json(result)
    else:
        losses = result["losses"]
        first, last = (f"{losses[0]:.3f}", f"{losses[-1]:.3f}") if losses else ("-", "-")
        print(f"{result['steps']} steps on {result['examples']} examples; loss {first} -> {last}")
    if "model_dir" in result:
        note(f"model: {result['model_dir']} (swe-rl eval --llm hf:{result['model_dir']} runs it)")
