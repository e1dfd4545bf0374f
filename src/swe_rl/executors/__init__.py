"""Where an episode runs: in this process (``local``), against a pool of sandboxes (``pool``), on rollout
servers (``service``), on a Ray cluster (``ray``).

A request is plain data (the task record, the model's endpoint and tokenizer, sampling and agent settings), so
the same request runs unchanged in this process, on a rollout server across the network, or in a Ray worker on
another node. Callers hold an executor and ``await executor.run(request)``; switching ``--executor`` changes
nothing else in their configuration. A caller that holds the task object and runs in this process passes it
as it is (``run(request, task=task)``, the request naming its id); executors elsewhere refuse it. Every executor reports an infrastructure failure as an ``infra_error``
result rather than raising, so a trainer never scores a dead node as a wrong answer.

Layout: :mod:`.base` (requests and the protocols), :mod:`.local`, :mod:`.service`, :mod:`.ray` (with
:mod:`.ray_node`, what runs on each node); :mod:`.config` parses a spec string once into the typed
:data:`~.config.Placement`, whose ``build()`` (one signature for all) makes the executor; :func:`get_executor`
does both.
"""

from __future__ import annotations

from swe_rl.executors.base import Executor
from swe_rl.executors.config import EXECUTOR_SPECS, Placement, default_capacity, parse_executor

__all__ = ["EXECUTOR_SPECS", "Placement", "default_capacity", "get_executor", "parse_executor"]


def get_executor(
    spec: str = "local",
    *,
    backend: str | None = None,
    capacity: int | None = None,
    token: str | None = None,
    pool_slots: int | None = None,
    rollout_timeout_s: float | None = None,
    reuse: bool = False,
) -> Executor:
    """The executor a spec names (``EXECUTOR_SPECS``; parsed by :func:`parse_executor`).

    ``backend``: the sandbox backend of a local executor (default ns); ``capacity``: its rollouts at once
    (default :func:`default_capacity`); ``pool_slots``: rollouts at once against a pool (default 128);
    ``token``: the pool's or rollout servers' bearer token; ``rollout_timeout_s``: a rollout server's limit;
    ``reuse``: a local or pool executor's sandboxes reset in place, with warm test runners (:mod:`.config`).
    """
    config = parse_executor(
        spec, backend=backend, pool_slots=pool_slots, rollout_timeout_s=rollout_timeout_s, reuse=reuse
    )
    return config.build(capacity=capacity, token=token)
