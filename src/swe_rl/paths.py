"""swe-rl's settings from the environment, and where it keeps its caches. Nothing is read or created at
import time.

:class:`Settings` is the one source of the ``SWE_RL_*`` variables (pydantic-settings, prefix ``SWE_RL_``):
each field is one variable, typed, with its default and a docstring; docs/ARCHITECTURE.md lists them. It
is read on each call of :meth:`Settings.read`, so a variable set later (a test's ``SWE_RL_CACHE``) counts,
and an unusable value is a ConfigError that names the variable. It sits on the lowest layer so that the
cache root can be found anywhere; the other fields are read at the edges only: the commands (``cli/``) and
the trainer adapters (``integrations/settings.py``, which also checks the executor and builds the judge).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import BeforeValidator, Field, ValidationError
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from swe_rl.errors import ConfigError

PREFIX = "SWE_RL_"


def _one_or_zero(value: object) -> object:
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text not in ("0", "1"):
        raise PydanticCustomError("flag", "must be 1 or 0")
    return text == "1"


def _zero_is_unset(value: object) -> object:
    # launch scripts pass ${VAR:-0} for "not set"
    return None if isinstance(value, str) and value.strip() in ("0", "0.0") else value


Flag = Annotated[bool, BeforeValidator(_one_or_zero)]
ZERO_IS_UNSET = BeforeValidator(_zero_is_unset)


class Settings(BaseSettings):
    """Every ``SWE_RL_*`` variable swe-rl reads (the field's name upper-cased after the prefix, or its
    alias); an empty variable is an unset one."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX,
        env_ignore_empty=True,
        str_strip_whitespace=True,
        use_attribute_docstrings=True,
        validate_by_name=True,
        frozen=True,
    )

    cache: Path = Path("~/.cache/swe-rl")
    """Root of all caches: envs, repository mirrors, models, the sandboxes' runtime files."""
    conda: str | None = None
    """A conda, mamba or micromamba that makes interpreters no other provider has."""
    token: str | None = None
    """Bearer token sent to the pool and rollout servers this process calls."""

    executor: str = "local"
    """Adapters: where rollouts run: local[:backend] | pool:<URL> | service:<URL>[,URL...] | ray[:address]."""
    backend: str | None = None
    """Adapters: sandboxes of a local executor: ns | docker | a pool URL."""
    reuse: Flag = False
    """Adapters, 1 or 0: a local or pool executor resets sandboxes in place, with warm test runners."""
    capacity: Annotated[int | None, ZERO_IS_UNSET] = Field(default=None, ge=1)
    """Adapters: rollouts at once on this machine (unset or 0: from its CPUs and memory)."""
    pool_slots: Annotated[int | None, ZERO_IS_UNSET] = Field(
        default=None, ge=1, validation_alias="SWE_MAX_CONCURRENT"
    )
    """Adapters: rollouts at once against a pool (unset: the executor's 128); the seed's name."""
    rollout_timeout_s: Annotated[float | None, ZERO_IS_UNSET] = Field(
        default=None, gt=0, validation_alias="SWE_RL_ROLLOUT_TIMEOUT"
    )
    """Adapters: seconds a rollout server may take (unset: the executor's 3600)."""

    step_limit: Annotated[int | None, ZERO_IS_UNSET] = Field(default=None, ge=1, le=1000)
    """Adapters: agent steps per episode (unset: the agent config's)."""
    agent_config: str | None = None
    """Adapters: the shipped agent config by name (unset: swebench)."""
    max_context: Annotated[int | None, ZERO_IS_UNSET] = Field(default=None, ge=256)
    """Adapters: tokens of context; turns beyond it are elided (unset: none elided)."""
    dynamic_history: Flag | None = None
    """Adapters, 1 or 0: one training sample per step (0: one per trajectory; unset: a training episode's, 1)."""
    unsubmitted: Literal["graded", "unresolved"] | None = None
    """Adapters: the reward of an episode that never submitted: graded or unresolved (unset: a training episode's)."""

    prm_url: str | None = None
    """Adapters: process rewards from the judge at this OpenAI-compatible base URL (unset: none)."""
    prm_model: str | None = None
    """Adapters: the judge's model name (unset: ProcessReward's, judge)."""
    prm_m: int | None = None
    """Adapters: judgements per step, 1 to 16 (unset: ProcessReward's, 3)."""
    prm_coef: float | None = None
    """Adapters: the weight of the mean step score (unset: ProcessReward's, 1.0)."""

    policy_url: str | None = None
    """Adapters: the policy's SGLang server or router (or OpenAI base URL), where the trainer names none."""
    policy_kind: Literal["sglang", "openai"] | None = None
    """Adapters: what SWE_RL_POLICY_URL serves: sglang (unset) or openai."""
    policy_model: str | None = None
    """Adapters: the policy's model name at that URL (unset: policy)."""
    tokenizer: str | None = None
    """Adapters: the policy's tokenizer: a model directory, or qwen for the bundled Qwen vocabulary."""
    max_tokens: Annotated[int | None, ZERO_IS_UNSET] = Field(default=None, ge=1)
    """verl: new tokens per turn (unset: its response length)."""
    slime_reward: Literal["dict", "float"] = "dict"
    """slime: the reward as the seed's {"score", "acc"} (dict) or a float; checked against --reward-key."""

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Each field's environment variable, by field name."""
        return {
            name: info.validation_alias if isinstance(info.validation_alias, str) else PREFIX + name.upper()
            for name, info in cls.model_fields.items()
        }

    @classmethod
    def read(cls) -> Self:
        """The settings the environment holds now; a ConfigError naming each variable with an unusable value."""
        try:
            return cls()
        except ValidationError as exc:
            variables = cls.variables()
            problems = []
            for error in exc.errors():
                field = str(error["loc"][0]) if error["loc"] else ""
                problems.append(f"{variables.get(field, field)}={error.get('input')!r}: {error['msg']}")
            raise ConfigError("bad swe-rl setting: " + "; ".join(problems)) from None


def cache_dir() -> Path:
    """Root of all caches: ``$SWE_RL_CACHE`` or ``~/.cache/swe-rl``."""
    return Settings.read().cache.expanduser()


def repo_cache_dir() -> Path:
    """Default repo cache: bare mirrors at ``<dir>/<owner>/<name>.git``."""
    return cache_dir() / "repos"


def conda_executable() -> str | None:
    """A conda (or mamba) to make interpreters with where no other provider has the version: ``$SWE_RL_CONDA``."""
    return Settings.read().conda
