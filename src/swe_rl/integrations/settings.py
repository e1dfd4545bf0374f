"""The trainer adapters' settings: read from ``SWE_RL_*`` variables here, once per hook call, and passed in.

A trainer calls swe-rl through hooks whose arguments it owns (slime's ``generate``, verl's agent loop,
SkyRL's generator), so what swe-rl needs beyond them comes from the environment. This is the one place
below the command line that reads it: everything under ``integrations/`` gets an :class:`AdapterSettings`
(or what it built from one); the executors, the episode and the sandboxes never look at the environment.

| variable | field | meaning |
|---|---|---|
| ``SWE_RL_EXECUTOR`` | executor | where rollouts run: local[:backend] \\| pool:<URL> \\| service:<URL>[,URL...] \\| ray[:address] |
| ``RAY_ADDRESS`` | executor | the cluster of a plain ``ray`` executor (Ray's own variable) |
| ``SWE_RL_BACKEND`` | backend | sandboxes of a local executor: ns \\| docker \\| a pool URL |
| ``SWE_RL_TOKEN`` | token | bearer token of the pool and rollout servers |
| ``SWE_RL_REUSE`` | reuse | 1: a local or pool executor resets sandboxes in place, with warm test runners (default 0) |
| ``SWE_RL_CAPACITY`` | capacity | rollouts at once on this machine (default: from its CPUs and memory) |
| ``SWE_MAX_CONCURRENT`` | pool_slots | rollouts at once against a pool (default 128) |
| ``SWE_RL_ROLLOUT_TIMEOUT`` | rollout_timeout_s | seconds a rollout server may take (default 3600) |
| ``SWE_RL_STEP_LIMIT`` / ``SWE_RL_AGENT_CONFIG`` / ``SWE_RL_MAX_CONTEXT`` / ``SWE_RL_DYNAMIC_HISTORY`` | | the agent |
| ``SWE_RL_PRM_URL`` / ``_MODEL`` / ``_M`` / ``_COEF`` | prm | process rewards from a judge |
| ``SWE_RL_UNSUBMITTED`` | unsubmitted | the reward of an episode that never submitted: graded (default) \\| unresolved |
| ``SWE_RL_POLICY_URL`` / ``_KIND`` / ``_MODEL``, ``SWE_RL_TOKENIZER`` | | the policy, where the trainer names none |
| ``SWE_RL_MAX_TOKENS`` | max_tokens | verl: new tokens per turn (default: its response length) |
| ``SWE_RL_SLIME_REWARD`` | slime_reward | slime: the reward as the seed's ``{"score", "acc"}`` (dict) or a float |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from swe_rl.episode.request import Unsubmitted
from swe_rl.errors import ConfigError
from swe_rl.executors.base import ProcessReward
from swe_rl.executors.config import parse_executor

# field -> variable, for the fields read as they are
_PLAIN = {
    "executor": "SWE_RL_EXECUTOR",
    "backend": "SWE_RL_BACKEND",
    "token": "SWE_RL_TOKEN",
    "capacity": "SWE_RL_CAPACITY",
    "pool_slots": "SWE_MAX_CONCURRENT",
    "rollout_timeout_s": "SWE_RL_ROLLOUT_TIMEOUT",
    "step_limit": "SWE_RL_STEP_LIMIT",
    "agent_config": "SWE_RL_AGENT_CONFIG",
    "max_context": "SWE_RL_MAX_CONTEXT",
    "policy_url": "SWE_RL_POLICY_URL",
    "policy_kind": "SWE_RL_POLICY_KIND",
    "policy_model": "SWE_RL_POLICY_MODEL",
    "tokenizer": "SWE_RL_TOKENIZER",
    "max_tokens": "SWE_RL_MAX_TOKENS",
    "slime_reward": "SWE_RL_SLIME_REWARD",
    "unsubmitted": "SWE_RL_UNSUBMITTED",
}
_ZERO_IS_UNSET = {"capacity", "pool_slots", "rollout_timeout_s", "step_limit", "max_context", "max_tokens"}


class AdapterSettings(BaseModel):
    """What the trainer adapters read from the environment (the module's table)."""

    executor: str = "local"
    backend: str | None = None
    reuse: bool = False
    token: str | None = None
    capacity: int | None = Field(default=None, ge=1)
    pool_slots: int | None = Field(default=None, ge=1)
    rollout_timeout_s: float | None = Field(default=None, gt=0)
    step_limit: int | None = Field(default=None, ge=1, le=1000)
    agent_config: str | None = None
    max_context: int | None = Field(default=None, ge=256)
    dynamic_history: bool = True
    prm: ProcessReward | None = None
    policy_url: str | None = None
    policy_kind: Literal["sglang", "openai"] | None = None
    policy_model: str | None = None
    tokenizer: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    slime_reward: Literal["dict", "float"] = "dict"
    unsubmitted: Unsubmitted = "graded"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> AdapterSettings:
        """Read the variables; ConfigError naming the variable when one holds something unusable."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field, variable in _PLAIN.items():
            value = (environ.get(variable) or "").strip()
            if value and not (field in _ZERO_IS_UNSET and value in ("0", "0.0")):
                values[field] = value
        if values.get("executor") == "ray" and environ.get("RAY_ADDRESS"):
            values["executor"] = f"ray:{environ['RAY_ADDRESS']}"
        if values.get("executor"):
            try:
                parse_executor(values["executor"], backend=values.get("backend"))
            except ConfigError as exc:
                raise ConfigError(f"SWE_RL_EXECUTOR={values['executor']!r}: {exc}") from None
        values["dynamic_history"] = _flag(environ, "SWE_RL_DYNAMIC_HISTORY", "1")
        values["reuse"] = _flag(environ, "SWE_RL_REUSE", "0")
        if environ.get("SWE_RL_PRM_URL"):
            values["prm"] = {
                "url": environ["SWE_RL_PRM_URL"],
                "model": environ.get("SWE_RL_PRM_MODEL") or "judge",
                "m": environ.get("SWE_RL_PRM_M") or 3,
                "coef": environ.get("SWE_RL_PRM_COEF") or 1.0,
            }
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise ConfigError(_named(exc)) from None


def _flag(environ: Mapping[str, str], variable: str, default: str) -> bool:
    value = (environ.get(variable) or default).strip()
    if value not in ("0", "1"):
        raise ConfigError(f"{variable} must be 1 or 0, not {value!r}")
    return value == "1"


def _named(exc: ValidationError) -> str:
    variables = {**_PLAIN, "prm": "SWE_RL_PRM_*"}
    problems = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        where = variables.get(field, field)
        if field == "prm" and len(error["loc"]) > 1:
            where = f"SWE_RL_PRM_{str(error['loc'][1]).upper()}"
        problems.append(f"{where}={error.get('input')!r}: {error['msg']}")
    return "bad swe-rl adapter setting: " + "; ".join(problems)
