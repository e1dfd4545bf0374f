"""``swe-rl eval``: run any model on tasks and grade it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from swe_rl.cli.options import (
    BackendOpt,
    CacheOpt,
    GradingOpt,
    InstancesOpt,
    RepoCacheOpt,
    TopPOpt,
    config_option,
    env_cache,
    note,
    print_json,
    resolve_backend,
    run,
    with_overrides,
    writable_dir,
)

if TYPE_CHECKING:
    from swe_rl.agent.config import AgentConfig
    from swe_rl.episode.request import NamedModel
    from swe_rl.executors.config import Placement
    from swe_rl.llm.select import ModelChoice
    from swe_rl.runs.evaluation import Attempts
    from swe_rl.tasks.model import Task


def eval_command(
    tasks: Annotated[
        str, typer.Option("--tasks", "-s", help="'builtin', 'builtin:<lib>', a task file, or an HF dataset.")
    ] = "builtin",
    instance: InstancesOpt = None,
    slice_: Annotated[
        str | None,
        typer.Option(
            "--slice",
            help="start:stop[:step] of the task list, counted from 0 as Python slices it, e.g. '0:5', '5:' "
            "or '::2'.",
        ),
    ] = None,
    max_instances: Annotated[
        int | None, typer.Option("--max-instances", min=1, help="At most this many tasks.")
    ] = None,
    llm: Annotated[
        str | None,
        typer.Option(
            "--llm",
            help="The model: scripted:oracle | scripted:oracle-compact | scripted:oracle-debug | "
            "scripted:never-submit | scripted:format-errors (scripted from each task, offline) | "
            "hf:<model dir or 'smollm2'> | openai (--model at --api-base) [default: openai].",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model name at an OpenAI-compatible endpoint.")
    ] = None,
    api_base: Annotated[str | None, typer.Option("--api-base", help="e.g. http://127.0.0.1:30000/v1")] = None,
    backend: BackendOpt = "auto",
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            help="Where attempts run: local (this process); pool[:<URL>] (this process, sandboxes from a pool "
            "server, or give its URL as --backend); ray[:<address>] (on the nodes of a Ray cluster, each with "
            "its own env cache; see `swe-rl cluster up`); service:<URL> (rollout servers, comma-separated; "
            "shipped agent configs only).",
        ),
    ] = "local",
    max_concurrent: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Instances at once.")] = 2,
    n_samples: Annotated[int, typer.Option("--n-samples", min=1, help="Attempts per instance (pass@k).")] = 1,
    step_limit: Annotated[
        int | None,
        typer.Option(
            "--step-limit",
            min=1,
            help="Model calls per attempt [default: the agent config's step_limit, 40 for swebench].",
        ),
    ] = None,
    wall_time: Annotated[
        float | None,
        typer.Option(
            "--wall-time",
            min=1.0,
            help="Seconds an attempt's agent may run; raise it for local models on CPU [default: the agent "
            "config's wall_time_s, 1800 for swebench].",
        ),
    ] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="New tokens per model call.")] = 2048,
    temperature: Annotated[
        float, typer.Option("--temperature", min=0.0, help="Sampling temperature (0: greedy).")
    ] = 0.0,
    top_p: TopPOpt = 1.0,
    max_context: Annotated[
        int | None,
        typer.Option(
            "--max-context",
            min=256,
            help="Context window: turns beyond it are elided (head 30% + tail 70%).",
        ),
    ] = None,
    agent_config: Annotated[
        str | None,
        typer.Option(
            "--agent-config", help="Shipped agent config name or a YAML file (swe-rl's or mini-swe-agent's)."
        ),
    ] = None,
    output_dir: Annotated[Path, typer.Option("--output-dir", "-o", help="The run directory.")] = Path(
        "swe-rl-eval"
    ),
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue a run: skip finished instances, retry infra errors.")
    ] = False,
    metrics: Annotated[
        str,
        typer.Option(
            "--metrics", help="Also log agent/* metrics to tensorboard and/or wandb (comma-separated)."
        ),
    ] = "",
    cost_limit: Annotated[
        float | None,
        typer.Option("--cost-limit", min=0, help="USD per attempt: the agent stops when its calls reach it."),
    ] = None,
    run_cost_limit: Annotated[
        float | None,
        typer.Option(
            "--run-cost-limit",
            min=0,
            help="USD for the run: no attempt starts past it (exit status 4; --resume continues).",
        ),
    ] = None,
    price_file: Annotated[
        Path | None,
        typer.Option(
            "--price-file",
            help="JSON {model: {input_cost_per_token, output_cost_per_token}} over LiteLLM's map and ours.",
        ),
    ] = None,
    cache_dir: CacheOpt = None,
    repo_cache: RepoCacheOpt = None,
    grading: GradingOpt = "official",
    reuse_grading: Annotated[
        bool,
        typer.Option(
            "--reuse-grading/--fresh-grading",
            help="Run agents and grade in sandboxes reset in place between uses, with pytest imported once "
            "per grading sandbox (ns backend, local executor); --fresh-grading: a new sandbox for every agent "
            "run and every grading, and a new interpreter for every test run.",
        ),
    ] = True,
    json_out: Annotated[bool, typer.Option("--json", help="Print summary.json on stdout.")] = False,
    config: Annotated[list[str] | None, config_option("episode.limits.memory_mb=8192")] = None,
) -> None:
    """Run a model on tasks; write traj.json/patch.diff/meta.json per instance, results.jsonl, summary.json, preds.json."""
    from swe_rl.agent.config import load_agent_config
    from swe_rl.cli.options import pool_token
    from swe_rl.episode.request import NamedModel
    from swe_rl.episode.spec import EpisodeSpec
    from swe_rl.executors.config import LocalConfig, PoolConfig
    from swe_rl.llm.base import SamplingParams
    from swe_rl.llm.cost import load_prices
    from swe_rl.llm.select import choose_model
    from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval
    from swe_rl.tasks.loaders import load_tasks

    # options the settings refuse (--top-p 0) are refused before anything is loaded or printed
    sampling = SamplingParams(max_tokens=max_tokens, temperature=temperature, top_p=top_p)
    writable_dir(output_dir)
    selected = _select(load_tasks(tasks, instance_ids=instance), tasks, slice_, max_instances)
    placement = _placement(executor, backend, reuse_grading)
    here = isinstance(placement, LocalConfig | PoolConfig)
    choice = (
        _loaded_remotely(llm)
        if not here and llm and llm.startswith("hf:")
        else choose_model(llm, model, api_base)
    )
    agent = load_agent_config(
        agent_config, step_limit=step_limit, wall_time_s=wall_time, cost_limit=cost_limit or None
    )
    prices = load_prices(price_file)
    if cost_limit or run_cost_limit:
        prices.require(choice.name)  # a limit on a model without a price would never stop anything
    if isinstance(placement, LocalConfig | PoolConfig):
        chosen_backend = placement.url if isinstance(placement, PoolConfig) else placement.backend
        built = placement.build(
            capacity=max_concurrent, token=pool_token(), cache=env_cache(cache_dir, repo_cache)
        )
        attempts = Attempts(built, NamedModel(llm=choice.name), agent, make_llm=choice.factory)
    else:
        chosen_backend = getattr(placement, "backend", None) or backend
        named = NamedModel(llm=llm, model=model, api_base=api_base)
        attempts = _elsewhere(placement, named, agent, agent_config)
    settings = EvalSettings(
        output_dir=output_dir,
        max_concurrent=max_concurrent,
        n_samples=n_samples,
        resume=resume,
        episode=EpisodeSpec.for_eval(max_context=max_context, prices=prices, grading=grading),
        metrics_backends=[m.strip() for m in metrics.split(",") if m.strip()],
        run_cost_limit=run_cost_limit or None,
        args={
            "tasks": tasks,
            "model": choice.name,
            "api_base": api_base,
            "backend": chosen_backend,
            "executor": executor,
            "step_limit": agent.step_limit,
            "wall_time_s": agent.wall_time_s,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "n_samples": n_samples,
            "instances": len(selected),
            "cost_limit": cost_limit,
            "run_cost_limit": run_cost_limit,
            "grading": grading,
        },
    )
    settings = with_overrides(settings, config)
    output_dir = writable_dir(settings.output_dir)
    note(
        f"eval: {len(selected)} tasks x {n_samples}, model {choice.name}, backend {chosen_backend}, executor {executor}, output {output_dir}/"
    )

    async def go() -> dict:
        try:
            return await run_eval(selected, attempts, sampling, settings)
        finally:
            await attempts.close()
            await choice.close()

    try:
        summary = run(go())
    except KeyboardInterrupt:
        note(f"interrupted; finished attempts are kept in {output_dir}/, to continue: {_resume_command()}")
        raise
    if json_out:
        print_json(summary)
    else:
        rate = summary["resolve_rate"]
        print(
            f"resolved {summary['resolved']}/{summary['attempts']} "
            f"(rate {'n/a: 0/0 graded' if rate is None else f'{rate:.1%}'}); "
            f"errors {summary['errors']}; no patch {summary['no_patch']}; avg steps {summary['avg_steps']:.1f}; "
            f"cost ${summary['cost_usd']:.4f}"
        )
    note(f"run directory: {output_dir}/ (swe-rl report {output_dir} renders it)")
    if summary.get("stopped"):
        note(f"stopped: {summary['stopped']}")
        raise typer.Exit(EXIT_COST_LIMIT)
    raise typer.Exit(1 if summary["errors"] else 0)


EXIT_COST_LIMIT = 4  # the run stopped at --run-cost-limit with attempts left; the run directory is resumable


def _resume_command() -> str:
    """This command line with --resume: it skips the attempts the run directory already holds."""
    import shlex

    args = sys.argv[1:]
    return shlex.join(["swe-rl", *args, *([] if "--resume" in args else ["--resume"])])


def _placement(executor: str, backend: str, reuse: bool) -> Placement:
    """Where attempts run, parsed once (executors/config.py): ``--backend auto`` decided for this machine
    (a Ray cluster's nodes get the same), a pool's URL as the backend the pool's config, a plain ``ray`` the
    cluster of Ray's own ``RAY_ADDRESS``."""
    from swe_rl.errors import ConfigError
    from swe_rl.executors.config import parse_executor

    address = os.environ.get("RAY_ADDRESS")
    spec = f"ray:{address}" if executor.strip() == "ray" and address else executor
    try:
        return parse_executor(spec, backend=resolve_backend(backend), reuse=reuse)
    except ConfigError as exc:
        raise ConfigError(f"--executor {executor}: {exc}") from None


def _elsewhere(
    config: Placement, named: NamedModel, agent: AgentConfig, agent_config: str | None
) -> Attempts:
    """Attempts on an executor's nodes or servers; the model is built there from the same options."""
    from swe_rl.cli.options import pool_token
    from swe_rl.errors import ConfigError
    from swe_rl.executors.config import ServiceConfig
    from swe_rl.runs.evaluation import Attempts

    agent_name = None
    if isinstance(config, ServiceConfig):  # a rollout server runs shipped agent configs only
        agent_name = agent_config or "swebench"
        if agent_name.endswith((".yaml", ".yml")):
            raise ConfigError(
                "--executor service runs shipped agent configs only (a config's templates are code run on the "
                "server): name one (swebench, compact), or run a config file with --executor local, pool or ray"
            )
        if named.llm and named.llm.startswith("hf:"):
            raise ConfigError(
                "--executor service loads no local models (hf:): serve the model behind an OpenAI-compatible "
                "endpoint and give --model and --api-base"
            )
        _answering(config.urls)
    chosen = config.build(token=pool_token())
    note(
        f"eval: attempts run on {chosen.name} ({'each node' if chosen.name == 'ray' else 'the server'} with its own env cache)"
    )
    return Attempts(chosen, named, agent, agent_name=agent_name)


def _answering(urls: str) -> None:
    """ConfigError now when no rollout server answers (else every attempt would end as an infra error)."""
    import urllib.request

    from swe_rl.errors import ConfigError

    errors = []
    for url in (u.strip().rstrip("/") for u in urls.split(",") if u.strip()):
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=10):
                return
        except OSError as exc:  # refused, unreachable, an HTTP error status
            errors.append(f"{url}: {exc}")
    raise ConfigError(f"no rollout server answers ({'; '.join(errors)})")


def _loaded_remotely(llm: str) -> ModelChoice:
    """A local model's name only: the nodes load it, not this process."""
    from swe_rl.llm.select import ModelChoice

    def never(_task: object) -> NoReturn:
        raise AssertionError("remote attempts build their model on the node")

    return ModelChoice(never, None, llm.partition(":")[2] or llm)


def _select(loaded: list[Task], source: str, slice_: str | None, max_instances: int | None) -> list[Task]:
    """The tasks --slice and --max-instances keep; ConfigError when they keep none (an empty run was
    reported as 'resolved 0/1')."""
    from swe_rl.errors import ConfigError

    selected = loaded[_parse_slice(slice_)] if slice_ else loaded
    selected = selected[:max_instances] if max_instances else selected
    if not loaded:
        raise ConfigError(f"no task selected: {source} holds no tasks")
    if not selected:
        raise ConfigError(f"no task selected: --slice {slice_} keeps none of the {len(loaded)} tasks")
    return selected


def _parse_slice(text: str) -> slice:
    """'start:stop[:step]', each part optional ('0:5', '5:', '::2'), as Python slices a list; anything
    else (a step of 0 too) is a clear error."""
    from swe_rl.errors import ConfigError

    parts = text.split(":")
    try:
        if not 2 <= len(parts) <= 3:
            raise ValueError
        start, stop, step = (int(p) if p.strip() else None for p in (*parts, "")[:3])
        if step == 0:
            raise ValueError
        return slice(start, stop, step)
    except ValueError:
        raise ConfigError(
            f"--slice must look like 'start:stop' or 'start:stop:step' (e.g. 0:5, ::2; a step is not 0), "
            f"not {text!r}"
        ) from None
