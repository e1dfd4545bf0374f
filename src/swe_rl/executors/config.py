"""Where episodes run, as one typed model: :data:`Placement`, a discriminated union parsed once at the edge (the
command line's ``--executor`` and ``--backend``, the adapters' ``SWE_RL_EXECUTOR`` and ``SWE_RL_BACKEND``) by
:func:`parse_executor`, and built by every config through one signature, ``build(capacity=, token=, cache=)``,
so no caller switches on its type.

| spec | config | runs episodes |
|---|---|---|
| ``local`` / ``local:<backend>`` | :class:`LocalConfig` | here, on this machine's sandboxes (ns, docker, local) |
| ``pool:<URL>`` (or ``local`` with a pool's URL as its backend) | :class:`PoolConfig` | here, on sandboxes leased from a pool server |
| ``service:<URL>[,<URL>...]`` | :class:`ServiceConfig` | on rollout servers (shipped agent configs only) |
| ``ray`` / ``ray:<address>`` | :class:`RayConfig` | on the nodes of a Ray cluster |

A pool's sandboxes have one config, whichever way they were named: a local executor whose backend is a
pool server's URL is that pool's :class:`PoolConfig`. ``capacity`` is the episodes at once of a local
executor (a pool's are its ``slots``); ``cache`` is the env cache of one that builds envs here (local and
pool); the servers and Ray's nodes keep their own, and ignore both.

``reuse`` (local and pool): agents and gradings in sandboxes reset in place between uses, the grading ones
with a warm test runner (harness/grade_many.py); the executor then keeps sandboxes that belong to the event
loop it runs in, so it is for a caller that keeps one loop and closes the executor in it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field

from swe_rl.errors import ConfigError

if TYPE_CHECKING:
    from swe_rl.envs.cache import EnvCache
    from swe_rl.executors.base import Executor

EXECUTOR_SPECS = (
    "local | local:<backend> | pool:<pool server URL> | service:<rollout server URL> | ray | ray:<address>"
)


class LocalConfig(BaseModel):
    kind: Literal["local"] = "local"
    backend: Literal["ns", "docker", "local"] = Field(
        default="ns", description="The sandbox backend of this machine (a pool's sandboxes: PoolConfig)."
    )
    reuse: bool = Field(default=False, description="Sandboxes reset in place and warm test runners.")

    def build(
        self, *, capacity: int | None = None, token: str | None = None, cache: EnvCache | None = None
    ) -> Executor:
        """``capacity``: default :func:`default_capacity`; ``cache``: the env cache (default: the one at
        ``$SWE_RL_CACHE`` or ``~/.cache/swe-rl``)."""
        from swe_rl.executors.local import LocalExecutor
        from swe_rl.sandbox import get_factory

        factory = get_factory(self.backend, token=token)
        capacity = capacity or default_capacity()
        return LocalExecutor(factory, cache, capacity=capacity, reuse_grading=self.reuse)


class PoolConfig(BaseModel):
    kind: Literal["pool"] = "pool"
    url: str = Field(pattern=r"^https?://", description="The pool server.")
    slots: int = Field(default=128, ge=1, description="Episodes at once against the pool.")
    reuse: bool = Field(default=False, description="Sandboxes reset in place, where the pool's can be.")

    def build(
        self, *, capacity: int | None = None, token: str | None = None, cache: EnvCache | None = None
    ) -> Executor:
        """``token``: the pool's bearer token; ``slots`` bounds its episodes at once (``capacity`` is ignored)."""
        from swe_rl.executors.local import LocalExecutor
        from swe_rl.sandbox import get_factory

        factory = get_factory(self.url, token=token)
        return LocalExecutor(factory, cache, capacity=self.slots, reuse_grading=self.reuse)


class ServiceConfig(BaseModel):
    kind: Literal["service"] = "service"
    urls: str = Field(min_length=1, description="Rollout servers, comma-separated.")
    timeout_s: float | None = Field(default=None, gt=0, description="Seconds a rollout may take there.")

    def build(
        self, *, capacity: int | None = None, token: str | None = None, cache: EnvCache | None = None
    ) -> Executor:
        """``token``: the servers' bearer token; each server has its own capacity and env cache."""
        from swe_rl.executors.service import ServiceExecutor

        return ServiceExecutor(self.urls, token, timeout_s=self.timeout_s)


class RayConfig(BaseModel):
    kind: Literal["ray"] = "ray"
    address: str | None = Field(default=None, description="The cluster; None: the one running here.")
    backend: str | None = Field(
        default=None, description="The nodes' sandbox backend (default: each node's)."
    )

    def build(
        self, *, capacity: int | None = None, token: str | None = None, cache: EnvCache | None = None
    ) -> Executor:
        """``token``: the nodes' pool token; Ray's scheduler bounds the episodes at once, each node its cache."""
        from swe_rl.executors.ray import RayExecutor

        return RayExecutor(address=self.address, backend=self.backend, token=token)


Placement = Annotated[LocalConfig | PoolConfig | ServiceConfig | RayConfig, Field(discriminator="kind")]


def parse_executor(
    spec: str,
    *,
    backend: str | None = None,
    pool_slots: int | None = None,
    rollout_timeout_s: float | None = None,
    reuse: bool = False,
) -> LocalConfig | PoolConfig | ServiceConfig | RayConfig:
    """The config a spec names (``EXECUTOR_SPECS``); ConfigError for one that names nothing usable.

    ``backend``: a local executor's sandbox backend where the spec names none (default ns), a pool's URL
    where ``pool`` has none, the nodes' backend for ``ray``. ``reuse``: a local or pool executor's.
    """
    kind, _, arg = spec.strip().partition(":")
    if kind == "local":
        from swe_rl.sandbox.config import PoolBackend, parse_backend

        sandboxes = parse_backend(arg or backend or "ns")  # an unknown one fails here
        if isinstance(sandboxes, PoolBackend):  # a pool's sandboxes: that pool's one config
            return PoolConfig(url=sandboxes.url, slots=pool_slots or 128, reuse=reuse)
        return LocalConfig(backend=sandboxes.kind, reuse=reuse)
    if kind == "pool":
        url = arg or backend or ""
        if not url.startswith(("http://", "https://")):
            raise ConfigError("executor pool needs the pool server's URL: pool:<URL>")
        return PoolConfig(url=url, slots=pool_slots or 128, reuse=reuse)
    if kind == "service":
        if not arg:
            raise ConfigError("executor service:<URL> needs the rollout server's URL")
        return ServiceConfig(urls=arg, timeout_s=rollout_timeout_s)
    if kind == "ray":
        return RayConfig(address=arg or None, backend=backend)
    raise ConfigError(f"unknown executor {spec!r}; use {EXECUTOR_SPECS}")


def default_capacity() -> int:
    """Rollouts at once on this machine: 8 per usable CPU and 512 MiB each.

    A rollout mostly waits on the policy; its sandbox is busy only while a command or the tests run.
    """
    from swe_rl.sandbox.capacity import machine_capacity

    return machine_capacity(per_cpu=8, mem_mb_each=512)
