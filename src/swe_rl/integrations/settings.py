"""The trainer adapters' settings: read from the environment here, once per hook call, and passed in.

A trainer calls swe-rl through hooks whose arguments it owns (slime's ``generate``, verl's agent loop,
SkyRL's generator), so what swe-rl needs beyond them comes from the environment. This is the one place
below the command line that reads it: everything under ``integrations/`` gets an :class:`AdapterSettings`
(or what it built from one); the executors, the episode and the sandboxes never look at the environment.
The variables are :class:`swe_rl.paths.Settings`' fields (docs/ARCHITECTURE.md lists them), and Ray's own
``RAY_ADDRESS`` names the cluster of a plain ``ray`` executor.
"""

from __future__ import annotations

import functools
import os
from typing import Self

from pydantic import ValidationError

from swe_rl.errors import ConfigError
from swe_rl.executors.base import ProcessReward
from swe_rl.executors.config import Placement, parse_executor
from swe_rl.paths import Settings


class AdapterSettings(Settings):
    """The settings as the adapters use them: the executor checked by the parser that builds it, the judge
    of ``SWE_RL_PRM_*`` as a :class:`ProcessReward`."""

    @classmethod
    def read(cls) -> Self:
        """The variables, and a ConfigError naming the variable when one holds something unusable."""
        settings = super().read()
        address = os.environ.get("RAY_ADDRESS")
        if settings.executor == "ray" and address:
            settings = settings.model_copy(update={"executor": f"ray:{address}"})
        try:
            settings.placement  # noqa: B018 -- parsed once here, so that a bad one fails now, by name
        except ConfigError as exc:
            raise ConfigError(f"SWE_RL_EXECUTOR={settings.executor!r}: {exc}") from None
        try:
            settings.prm  # noqa: B018 -- built once here so that a bad judge setting fails now, by name
        except ValidationError as exc:
            problems = [
                f"SWE_RL_PRM_{str(e['loc'][0]).upper()}={e.get('input')!r}: {e['msg']}" for e in exc.errors()
            ]
            raise ConfigError("bad swe-rl setting: " + "; ".join(problems)) from None
        return settings

    @functools.cached_property
    def placement(self) -> Placement:
        """Where rollouts run (``SWE_RL_EXECUTOR``, ``SWE_RL_BACKEND``, ``SWE_MAX_CONCURRENT``,
        ``SWE_RL_ROLLOUT_TIMEOUT``, ``SWE_RL_REUSE``), parsed once: ConfigError for one that names nothing."""
        return parse_executor(
            self.executor,
            backend=self.backend,
            pool_slots=self.pool_slots,
            rollout_timeout_s=self.rollout_timeout_s,
            reuse=self.reuse,
        )

    @property
    def prm(self) -> ProcessReward | None:
        """The judge of ``SWE_RL_PRM_URL`` (None without one); what is unset keeps ProcessReward's default."""
        if not self.prm_url:
            return None
        given = {"url": self.prm_url, "model": self.prm_model, "m": self.prm_m, "coef": self.prm_coef}
        return ProcessReward.model_validate({k: v for k, v in given.items() if v is not None})
