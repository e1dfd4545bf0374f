"""What the scripted oracle's episodes on the builtin suite come to, as eval records and as training samples.

``python tests/episode/oracle_fixture.py OUT.json`` writes it; tests/fixtures/oracle_episodes.json was written
so by the code before the orchestration redesign (#24), and test_oracle_unchanged.py checks that today's code
gives the same, id for id. Only what an episode determines is kept (no timings, paths or random ids); token
ids are kept as a digest per sample, with their counts.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

# what an eval record says about the episode itself
RECORD_FIELDS = (
    "resolved",
    "exit_status",
    "patch_source",
    "n_steps",
    "tool_calls",
    "format_errors",
    "grade_status",
)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


async def collect(tasks: list[Any], envs: Any, factory: Any, tokenizer: Any) -> dict[str, Any]:
    from swe_rl.agent.config import load_agent_config
    from swe_rl.llm.base import SamplingParams
    from swe_rl.llm.oracle import scripted_for
    from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval

    try:
        from swe_rl.rl.rollout import run_rollout
    except ImportError:  # before the redesign
        from swe_rl.runs.rollout import run_rollout  # type: ignore[import-not-found,no-redef]

    params = SamplingParams(max_tokens=512)
    agent = load_agent_config()
    training: dict[str, Any] = {}
    for task in tasks:
        result = await run_rollout(
            task, scripted_for("oracle", task), factory, envs, agent, params, tokenizer=tokenizer
        )
        training[task.instance_id] = {
            "status": result.status,
            "exit_status": result.exit_status,
            "reward": result.reward,
            "resolved": result.resolved,
            "samples": [
                {
                    "ids": _digest(s.tokens, s.prompt_length, s.loss_mask),
                    "tokens": len(s.tokens),
                    "prompt_length": s.prompt_length,
                    "trained": sum(s.loss_mask),
                    "reward": s.reward,
                    "status": s.status,
                    "step_indices": s.step_indices,
                }
                for s in result.samples
            ],
        }
    with tempfile.TemporaryDirectory() as tmp:
        await run_eval(
            tasks,
            Attempts.here(lambda t: scripted_for("oracle", t), envs, factory, agent),
            params,
            EvalSettings(output_dir=Path(tmp) / "run"),
            quiet=True,
        )
        lines = (Path(tmp) / "run" / "results.jsonl").read_text().splitlines()
    evaluation = {row["instance_id"]: {k: row[k] for k in RECORD_FIELDS} for row in map(json.loads, lines)}
    return {"training": training, "eval": dict(sorted(evaluation.items()))}


def main(out: Path) -> None:
    from swe_rl.envs.cache import EnvCache
    from swe_rl.rl.tokenizer import qwen_tokenizer
    from swe_rl.sandbox import get_factory
    from swe_rl.tasks.loaders import load_tasks

    found = asyncio.run(collect(load_tasks("builtin"), EnvCache(), get_factory("ns"), qwen_tokenizer()))
    out.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
