"""``swe-rl demo``: the embedded default job, on the builtin suite, offline and without a GPU."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from swe_rl.cli.options import (
    BackendOpt,
    CacheOpt,
    ConcurrencyOpt,
    env_cache,
    note,
    resolve_backend,
    run,
    writable_dir,
)

if TYPE_CHECKING:
    from swe_rl.rundir import RunDir


def demo(
    out: Annotated[
        Path, typer.Option("--output-dir", "-o", help="Run directory for reports and logs.")
    ] = Path("swe-rl-demo"),
    backend: BackendOpt = "auto",
    cache_dir: CacheOpt = None,
    concurrency: ConcurrencyOpt = 2,
    rl: Annotated[
        bool, typer.Option("--rl/--no-rl", help="End with a tiny GRPO run (needs the train extra).")
    ] = True,
) -> None:
    """Build the builtin suite, validate every task, grade sample predictions, run the agent, train a little.

    Stages: env validation (gold resolves, empty does not), SWE-bench-style grading of sample predictions,
    an agent eval with scripted models (HTML report), and a two-step GRPO run of a tiny random Qwen3
    on CPU that exercises the whole RL path (episodes in sandboxes, rewards from grading, TRL updates).
    """
    import time

    from swe_rl.cli.env_tables import print_validation
    from swe_rl.cli.options import pool_token
    from swe_rl.fileio import atomic_write_json
    from swe_rl.rundir import DemoDir
    from swe_rl.runs.demo import demo_predictions
    from swe_rl.runs.grade_predictions import grade_predictions
    from swe_rl.runs.validation import validate_tasks
    from swe_rl.sandbox import get_factory
    from swe_rl.tasks.builtin import builtin_tasks

    started = time.monotonic()
    writable_dir(out)
    chosen = resolve_backend(backend)
    note(f"swe-rl demo: backend {chosen}, output in {out}/")
    tasks = builtin_tasks()
    note(f"builtin suite: {len(tasks)} tasks in {len({t.repo for t in tasks})} repositories")
    cache = env_cache(cache_dir, None)
    factory = get_factory(chosen, token=pool_token())

    validation = run(validate_tasks(tasks, cache, factory, concurrency=concurrency))
    layout = DemoDir(out)
    atomic_write_json(layout.validation_path, validation.model_dump(mode="json"))
    print_validation(validation)

    preds, expected = demo_predictions(tasks, cache)
    path, report = run(
        grade_predictions(preds, tasks, cache, factory, out=out, run_id="demo", concurrency=concurrency)
    )
    print(f"\ngraded {len(preds)} sample predictions ({path}):")
    mismatches = 0
    for pred in preds:
        got = (
            "resolved"
            if pred.instance_id in report["resolved_ids"]
            else ("empty" if pred.instance_id in report["empty_patch_ids"] else "not resolved")
        )
        ok = got == expected[pred.instance_id][1]
        mismatches += not ok
        print(
            f"  {pred.instance_id:32} {expected[pred.instance_id][0]:28} -> {got}{'' if ok else '  (UNEXPECTED)'}"
        )
    summary, unexpected = run(_demo_eval(tasks, cache, factory, layout.eval, concurrency))
    from swe_rl.report.html import render_report

    page = render_report(layout.eval.path)
    print(
        f"\nagent eval (scripted oracle and a model that never submits, 4 tasks each): resolved "
        f"{summary['resolved']}/{summary['attempts']}; report: {page}"
    )
    for line in unexpected:
        print(f"  {line}  (UNEXPECTED)")
    mismatches += len(unexpected)
    trained = _demo_train(tasks, cache, factory, layout.train) if rl else None
    if trained is not None:
        rates = ", ".join(
            f"{c['resolve_rate']:.0%}" for c in trained["curve"] if c["resolve_rate"] is not None
        )
        print(
            f"\nRL (GRPO with TRL, a random tiny Qwen3 on CPU: the pipeline, not learning): "
            f"{trained['steps']} steps, resolve rate per step {rates}; report: {layout.train.report_path}"
        )
        print(f"  {_update_said(layout.train)}")
    print(
        f"\nvalid tasks {validation.valid}/{validation.total}; resolved {report['resolved_instances']}/"
        f"{report['submitted_instances']} predictions; {time.monotonic() - started:.1f}s; "
        f"{out}/ holds {_size(out)}"
    )
    raise typer.Exit(0 if validation.ok and not mismatches else 1)


async def _demo_eval(
    tasks: list[Any], cache: Any, factory: Any, run_dir: RunDir, concurrency: int
) -> tuple[dict[str, Any], list[str]]:
    """The agent end to end: the oracle replays gold fixes, the other model never submits (diff fallback).
    Its summary, and a line for each attempt whose verdict is not the one its model must get (the oracle's
    resolved, the other's not, neither an infrastructure error)."""
    import shutil

    from swe_rl.agent.config import load_agent_config
    from swe_rl.llm.base import SamplingParams
    from swe_rl.llm.oracle import scripted_for
    from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval

    chosen = tasks[:4] + tasks[-4:]
    kinds = {t.instance_id: "oracle" for t in tasks[:4]} | {t.instance_id: "never-submit" for t in tasks[-4:]}
    shutil.rmtree(run_dir.path, ignore_errors=True)  # the demo starts over each time
    settings = EvalSettings(output_dir=run_dir.path, max_concurrent=concurrency, args={"model": "scripted"})
    attempts = Attempts.here(
        lambda t: scripted_for(kinds[t.instance_id], t),
        cache,
        factory,
        load_agent_config(step_limit=4),
        reuse_grading=True,
    )
    try:
        summary = await run_eval(chosen, attempts, SamplingParams(), settings)
    finally:
        await attempts.close()
    results = {r.instance_id: r for r in run_dir.latest().values()}
    unexpected = []
    for instance_id, kind in sorted(kinds.items()):
        r = results.get(instance_id)
        said = "resolved" if r and r.resolved else "not resolved"
        said = "no result" if r is None else f"error: {r.error}" if r.infra_error else said
        if said != ("resolved" if kind == "oracle" else "not resolved"):
            unexpected.append(f"{instance_id:32} scripted:{kind:19} -> {said}")
    return summary, unexpected


def _demo_train(tasks: list[Any], cache: Any, factory: Any, run_dir: RunDir) -> dict[str, Any] | None:
    """Two GRPO steps of a tiny random Qwen3 on two tasks; None (with a note) without the train extra."""
    import importlib.util
    import os
    import shutil

    if importlib.util.find_spec("trl") is None or importlib.util.find_spec("torch") is None:
        note("skipping the RL stage: it needs torch and the train extra (pip install 'swe-rl[train]')")
        return None
    from swe_rl.agent.config import load_agent_config
    from swe_rl.executors.local import LocalExecutor
    from swe_rl.report.training import render_training_report
    from swe_rl.train.grpo import GRPOSettings, train_grpo

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    shutil.rmtree(run_dir.path, ignore_errors=True)  # the demo starts over each time
    note("RL stage: GRPO with TRL, tiny Qwen3 (random weights), 2 steps x 2 episodes, CPU")
    settings = GRPOSettings(
        output_dir=run_dir.path,
        model="tiny-qwen",
        steps=2,
        tasks_per_step=1,
        num_generations=2,
        max_tokens=16,
        max_concurrent=2,
        save_steps=0,  # the final model only: the demo starts over each time, nothing to resume
    )
    executor = LocalExecutor(factory, cache, capacity=settings.max_concurrent, reuse_grading=True)
    agent = load_agent_config(step_limit=2)
    summary = train_grpo(tasks[:2], settings, cache, agent, executor=executor, quiet=True)
    card = run_dir.model_card_path  # TRL's generated one says "a fine-tuned version of None"
    if card.is_file() and "fine-tuned version of" in card.read_text(errors="replace"):
        card.unlink()
    render_training_report(run_dir.path)
    return summary


def _update_said(run_dir: RunDir) -> str:
    """Whether GRPO had anything to learn from: a group (one task's episodes in one step) whose rewards differ.
    Where every group's rewards are equal, the advantages are zero and no weight changed."""
    groups: dict[tuple[int, str], set[float | None]] = {}
    for record in run_dir.load_rollouts():
        groups.setdefault((record.step or 0, record.instance_id), set()).add(record.reward)
    differing = sum(len(rewards) > 1 for rewards in groups.values())
    if differing:
        return f"{differing} of {len(groups)} groups had rewards that differ: those steps updated the model"
    return (
        f"every group's rewards were equal ({len(groups)} groups): GRPO's advantages were zero, so these steps "
        "changed no weight (a random model resolves nothing; docs/TRAINING.md starts from a warm start)"
    )


def _size(path: Path) -> str:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return f"{total / 2**20:.1f} MiB"
