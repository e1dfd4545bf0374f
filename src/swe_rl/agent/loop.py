"""The agent loop: ask the model, run its one bash command in the sandbox, show it the result, repeat.

The protocol is mini-swe-agent's: a THOUGHT and exactly one ```bash block per reply (or what the config's
``action_regex`` finds); the agent submits with ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` followed by
the diff. A mini-swe-agent config's templates get mini-swe-agent's variables (``_values``). Every way a
run can end is an exception carrying the exit status, caught once in :func:`run_agent`.

A failure is charged by where it happened (docs/TRAINING.md, "Outcome attribution"): the agent's own
sandbox failing under its commands (a dead shell or container, a broken channel, an over-cap patch) ends
the run as ``agent_error``, scored; the model or the backend failing (LLMError, BackendLostError) ends it
as ``infra_error``, never scored.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from swe_rl.agent import mini_swe_agent
from swe_rl.agent.actions import bash_blocks, head_tail, submission
from swe_rl.agent.config import AgentConfig
from swe_rl.agent.context import ContextManager
from swe_rl.agent.trajectory import ExitStatus, Step, Trajectory
from swe_rl.errors import BackendLostError, InfraError, OutputLimitError, SandboxError
from swe_rl.llm.base import LLM, Message, SamplingParams
from swe_rl.sandbox.base import ExecResult, Sandbox
from swe_rl.tasks.model import Task


class _Finished(Exception):
    def __init__(self, status: ExitStatus, message: str = "") -> None:
        super().__init__(message)
        self.status = status


async def run_agent(
    task: Task,
    box: Sandbox,
    llm: LLM,
    config: AgentConfig,
    params: SamplingParams,
    context: ContextManager | None = None,
    workdir: str = "/testbed",
) -> Trajectory:
    """Run the agent on ``task`` in ``box`` until it submits or hits a limit. Never raises InfraError."""
    started = time.monotonic()
    traj = Trajectory(instance_id=task.instance_id, model=llm.name)
    values = _values(config, task, traj, started, workdir=workdir)
    traj.messages += [
        Message(role="system", content=config.render(config.system_template, **values)),
        Message(role="user", content=config.render(config.instance_template, **values)),
    ]
    state = _State()
    try:
        while True:
            _check_limits(traj, config, started)
            await _step(traj, task, box, llm, config, params, context, started, state)
    except _Finished as done:
        traj.exit_status, traj.exit_message = done.status, str(done)
    except InfraError as exc:
        traj.exit_status, traj.exit_message = "infra_error", f"{type(exc).__name__}: {exc}"
    traj.total_time_s = time.monotonic() - started
    return traj


async def left_patch(traj: Trajectory, box: Sandbox) -> str | None:
    """What the run leaves to grade: the submission, else the sandbox's diff; None when nothing can be.

    A diff the agent's sandbox cannot give (it deleted ``.git``, killed its container, filled its disk,
    left a patch over the cap) makes the run ``agent_error``: None, scored as a failure. A lost backend
    raises BackendLostError (infrastructure).
    """
    if traj.submission is not None:
        return traj.submission
    if traj.exit_status in ("agent_error", "infra_error"):
        return None
    try:
        return await box.diff()
    except BackendLostError:
        raise
    except (SandboxError, OutputLimitError) as exc:
        traj.exit_message = f"{traj.exit_message}; then no diff: {_failure(exc)}".lstrip("; ")
        traj.exit_status = "agent_error"
        return None


class _State:
    def __init__(self) -> None:
        self.format_errors = 0
        self.last_action: str | None = None
        self.repeats = 0
        self.repeat_warnings = 0


def _check_limits(traj: Trajectory, config: AgentConfig, started: float) -> None:
    if config.step_limit is not None and len(traj.steps) >= config.step_limit:
        raise _Finished("limits_exceeded", f"step limit {config.step_limit} reached")
    if traj.prompt_tokens + traj.completion_tokens >= config.max_tokens_total:
        raise _Finished("limits_exceeded", f"token limit {config.max_tokens_total} reached")
    if config.cost_limit is not None and traj.cost_usd >= config.cost_limit:
        raise _Finished(
            "limits_exceeded", f"cost limit ${config.cost_limit:g} reached (${traj.cost_usd:.4f})"
        )
    if time.monotonic() - started >= config.wall_time_s:
        raise _Finished("timeout", f"wall time {config.wall_time_s}s reached")


async def _step(
    traj: Trajectory,
    task: Task,
    box: Sandbox,
    llm: LLM,
    config: AgentConfig,
    params: SamplingParams,
    context: ContextManager | None,
    started: float,
    state: _State,
) -> None:
    history = traj.messages
    sent = context.select(history) if context else list(history)
    positions = {id(m): i for i, m in enumerate(history)}
    left = config.wall_time_s - (time.monotonic() - started)
    t0 = time.monotonic()
    try:
        completion = await asyncio.wait_for(llm.complete(sent, params), timeout=max(left, 0.001))
    except TimeoutError:
        raise _Finished(
            "timeout", f"wall time {config.wall_time_s}s reached while waiting for the model"
        ) from None
    step = Step(
        index=len(traj.steps),
        context=[positions.get(id(m), -1) for m in sent],
        omitted=context.omitted_last if context else 0,
        completion=completion,
        model_time_s=time.monotonic() - t0,
    )
    traj.steps.append(step)
    traj.model_time_s += step.model_time_s
    traj.prompt_tokens += completion.prompt_tokens or 0
    traj.completion_tokens += completion.completion_tokens or len(completion.text) // 4
    traj.cost_usd += completion.cost_usd or 0.0
    history.append(Message(role="assistant", content=completion.text))
    blocks = bash_blocks(completion.text, config.action_regex)
    if len(blocks) != 1:
        state.format_errors += 1
        step.error = "format_error"
        finish = {"finish_reason": completion.finish_reason} if completion.finish_reason else {}
        error = config.render(
            config.format_error_template,
            n_blocks=len(blocks),
            actions=blocks,
            error=f"Expected exactly one action, found {len(blocks)}.",
            **finish,
        )
        _observe(traj, step, error)
        if config.max_format_errors is not None and state.format_errors >= config.max_format_errors:
            raise _Finished("format_error_limit", f"{state.format_errors} format errors in a row")
        return
    state.format_errors = 0
    step.action = blocks[0]
    _guard_repeats(traj, step, config, state)
    await _execute(traj, task, step, box, config, started)


def _guard_repeats(traj: Trajectory, step: Step, config: AgentConfig, state: _State) -> None:
    state.repeats = state.repeats + 1 if step.action == state.last_action else 1
    state.last_action = step.action
    if state.repeats >= config.max_repeated_commands:
        state.repeat_warnings += 1
        state.repeats = 0
        step.error = "repeated_command"
        if state.repeat_warnings > config.max_repeat_warnings:
            raise _Finished(
                "limits_exceeded",
                f"the same command was repeated {config.max_repeated_commands} times, "
                f"{state.repeat_warnings} times over",
            )


async def _execute(
    traj: Trajectory, task: Task, step: Step, box: Sandbox, config: AgentConfig, started: float
) -> None:
    assert step.action is not None
    left = config.wall_time_s - (time.monotonic() - started)
    t0 = time.monotonic()
    try:
        result = await box.exec(
            step.action, timeout=max(0.01, min(config.command_timeout, left)), env=config.env or None
        )
    except BackendLostError:
        raise  # the node or engine, not the agent: infra_error
    except (SandboxError, OutputLimitError) as exc:  # its own sandbox broke under its commands
        raise _Finished("agent_error", f"the sandbox failed: {_failure(exc)}") from None
    finally:
        step.env_time_s = time.monotonic() - t0
        traj.env_time_s += step.env_time_s
    step.returncode, step.timed_out = result.returncode, result.timed_out
    patch = submission(result.output) if result.returncode == 0 else None
    if patch is not None and result.truncated:  # never graded cut
        raise _Finished(
            "agent_error", f"the submitted patch is over the output cap ({result.output_bytes} bytes)"
        )
    if patch is not None:
        traj.submission = patch
        _observe(traj, step, "Submitted.")
        raise _Finished("submitted")
    if config.dialect == "mini-swe-agent":
        output = mini_swe_agent.output_vars(result, config.command_timeout)
        values = _values(config, task, traj, started)
        observation = config.render(config.observation_template, output=output, **values)
    else:
        remaining = None if config.step_limit is None else config.step_limit - len(traj.steps)
        observation = _render_observation(result, config, remaining)
    if step.error == "repeated_command":
        observation += "\n" + config.render(
            config.repeated_command_template, times=config.max_repeated_commands
        )
    _observe(traj, step, observation)


def _values(
    config: AgentConfig, task: Task, traj: Trajectory, started: float, workdir: str | None = None
) -> dict[str, Any]:
    """The variables of the config's prompt templates besides their own: swe-rl's (the task object, the
    working directory) or, for a mini-swe-agent config, mini-swe-agent's (the task as text, counters)."""
    if config.dialect == "swe-rl":
        return {**config.template_vars, "task": task, "workdir": workdir}
    return mini_swe_agent.template_vars(
        config.template_vars,
        task.problem_statement,
        n_model_calls=len(traj.steps),
        model_cost=traj.cost_usd,
        elapsed_seconds=int(time.monotonic() - started),
    )


def _render_observation(result: ExecResult, config: AgentConfig, remaining: int | None) -> str:
    text = result.output
    truncated = len(text) > config.output_limit
    head, tail, elided = head_tail(text, config.output_limit) if truncated else ("", "", 0)
    return config.render(
        config.observation_template,
        **config.template_vars,
        result=result,
        truncated=truncated,
        head=head,
        tail=tail,
        elided=elided,
        output_length=len(text),
        remaining=remaining,
        command_timeout=config.command_timeout,
    )


def _failure(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def _observe(traj: Trajectory, step: Step, text: str) -> None:
    step.observation = text
    traj.messages.append(Message(role="user", content=text))
