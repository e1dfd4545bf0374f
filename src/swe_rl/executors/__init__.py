"""Where an episode runs: in this process (``local``), against a pool of sandboxes (``pool``), on rollout
servers (``service``), on a Ray cluster (``ray``).

A request is plain data (the task record, the model's endpoint and tokenizer, sampling and agent settings), so
the same request runs unchanged in this process, on a rollout server across the network, or in a Ray worker on
another node. Callers hold an executor and ``await executor.run(request)``; switching ``--executor`` changes
nothing else in their configuration. Every executor reports an infrastructure failure as an ``infra_error``
result rather than raising, so a trainer never scores a dead node as a wrong answer.

Layout: :mod:`.base` (requests and the protocols), :mod:`.local`, :mod:`.service`, :mod:`.ray` (with
:mod:`.ray_node`, what runs on each node); :func:`get_executor` makes one from its spec string.
"""

from __future__ import annotations

from swe_rl.errors import ConfigError
from swe_rl.executors.base import Executor
from swe_rl.executors.local import LocalExecutor

EXECUTOR_SPECS = (
    "local | local:<backend> | pool:<pool server URL> | service:<rollout server URL> | ray | ray:<address>"
)


def get_executor(
    spec: str = "local",
    *,
    backend: str | None = None,
    capacity: int | None = None,
    token: str | None = None,
    pool_slots: int | None = None,
    rollout_timeout_s: float | None = None,
) -> Executor:
    """An executor from a spec (``EXECUTOR_SPECS``).

    ``backend``: the sandbox backend of a local executor (default ns); ``capacity``: its rollouts at once
    (default :func:`default_capacity`); ``pool_slots``: rollouts at once against a pool (default 128);
    ``token``: the pool's or rollout servers' bearer token; ``rollout_timeout_s``: a rollout server's limit.
    """
    kind, _, arg = spec.partition(":")
    if kind == "local":
        from swe_rl.sandbox import get_factory

        chosen = arg or backend or "ns"
        return LocalExecutor(get_factory(chosen, token=token), capacity=capacity or default_capacity())
    if kind == "pool":  # rollouts here, sandboxes from a pool server (the seed's layout)
        from swe_rl.sandbox import get_factory

        url = arg or backend or ""
        if not url.startswith(("http://", "https://")):
            raise ConfigError("--executor pool needs the pool server's URL: pool:<URL>")
        return LocalExecutor(get_factory(url, token=token), capacity=pool_slots or 128)
    if kind == "service":
        if not arg:
            raise ConfigError("--executor service:<URL> needs the rollout server's URL")
        from swe_rl.executors.service import ServiceExecutor

        return ServiceExecutor(arg, token, timeout_s=rollout_timeout_s)
    if kind == "ray":
        from swe_rl.executors.ray import RayExecutor

        return RayExecutor(address=arg or None, backend=backend, token=token)
    raise ConfigError(f"unknown executor {spec!r}; use {EXECUTOR_SPECS}")


def default_capacity() -> int:
    """Rollouts at once on this machine: 8 per usable CPU and 512 MiB each.

    A rollout mostly waits on the policy; its sandbox is busy only while a command or the tests run.
    """
    from swe_rl.sandbox.capacity import machine_capacity

    return machine_capacity(per_cpu=8, mem_mb_each=512)
