"""``swe-rl serve``: the execution service (exec server per node, pool server in front)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from swe_rl.cli.options import BackendOpt, CacheOpt, RepoCacheOpt, env_cache, note, resolve_backend
from swe_rl.errors import ConfigError

if TYPE_CHECKING:
    from swe_rl.service.server_kit import Access

app = typer.Typer(help="Run the execution service (seed-compatible wire protocol).", no_args_is_help=True)

TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token", envvar="SWE_RL_TOKEN", help="Bearer token clients must send (required off loopback)."
    ),
]


AllowOpt = Annotated[
    str | None,
    typer.Option(
        "--allow",
        envvar="SWE_RL_ALLOW",
        help="Comma-separated networks (CIDR) whose clients need no token: for the seed's clients, which "
        "send none, on a private network. Logged loudly; prefer --token.",
    ),
]


def _auth(host: str, token: str | None, allow: str | None = None) -> Access:
    """The server's access policy. Off loopback a token or an explicit allow-list is required."""
    from swe_rl.service.server_kit import Access

    try:
        nets = tuple(
            ipaddress.ip_network(n.strip(), strict=False) for n in (allow or "").split(",") if n.strip()
        )
    except ValueError as exc:
        raise ConfigError(f"--allow: {exc}") from None
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not token and not nets and not loopback:
        raise ConfigError(
            f"binding {host} needs --token (or SWE_RL_TOKEN), or --allow NETWORKS for clients that send "
            "none; auth is optional on loopback only"
        )
    if nets:
        who = ", ".join(str(n) for n in nets)
        note(
            f"WARNING: clients from {who} are served WITHOUT A TOKEN: any process there can run commands "
            "in this node's sandboxes" + (" (others need the token)" if token else "")
        )
    return Access(token=token, allow=nets)


@app.command("exec")
def serve_exec(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (the seed's default is 5000).")] = 5000,
    backend: BackendOpt = "auto",
    tasks: Annotated[
        str | None,
        typer.Option(
            "--tasks",
            "-s",
            help="Task source whose instance ids / image names this node serves (envs built on demand).",
        ),
    ] = "builtin",
    capacity: Annotated[
        int | None,
        typer.Option(envvar="SWE_RL_CAPACITY", help="Max sandboxes [default: from CPUs and memory].", min=1),
    ] = None,
    token: TokenOpt = None,
    allow: AllowOpt = None,
    cache_dir: CacheOpt = None,
    repo_cache: RepoCacheOpt = None,
) -> None:
    """One exec server per sandbox node: /container/{create,exec,diff,evaluate,reset,destroy,...}."""
    from swe_rl.service.exec_server import create_app

    access = _auth(host, token, allow)
    factory, cache, known = _node(backend, tasks, cache_dir, repo_cache)
    app_ = create_app(factory, cache, known, token=access, capacity=capacity)
    _run(app_, host, port, f"exec server ({factory.backend} backend, capacity {app_.state.node.capacity})")


@app.command("pool")
def serve_pool(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (the seed's default is 18090).")] = 18090,
    nodes: Annotated[
        str | None,
        typer.Option("--nodes", envvar="SWE_EXEC_SERVER_URLS", help="Comma-separated exec server URLs."),
    ] = None,
    ttl: Annotated[
        float, typer.Option(help="Lease TTL in seconds, renewed by heartbeat or any call.")
    ] = 600.0,
    wait: Annotated[
        float, typer.Option(help="How long /allocate waits for a free slot before a 503.")
    ] = 60.0,
    health_period: Annotated[float, typer.Option(help="Seconds between node health checks.")] = 2.0,
    reap_period: Annotated[float, typer.Option(help="Seconds between expired-lease sweeps.")] = 1.0,
    token: TokenOpt = None,
    allow: AllowOpt = None,
    node_token: Annotated[
        str | None, typer.Option(envvar="SWE_RL_NODE_TOKEN", help="Token for the exec servers.")
    ] = None,
    max_concurrent: Annotated[
        int,
        typer.Option(
            "--max-leases", envvar="SWE_MAX_CONCURRENT", min=1, help="Leases at once across all nodes."
        ),
    ] = 128,
    per_node: Annotated[
        int | None,
        typer.Option(
            "--max-leases-per-node",
            envvar="SWE_MAX_CONTAINERS_PER_NODE",
            min=1,
            help="Leases at once per node [default: its capacity].",
        ),
    ] = None,
) -> None:
    """The pool server: leases across exec servers (the seed's SWE_MAX_CONCURRENT, SWE_MAX_CONTAINERS_PER_NODE)."""
    from swe_rl.service.pool_server import create_app

    urls = [u.strip() for u in (nodes or "").split(",") if u.strip()]
    if not urls:
        raise ConfigError("no exec servers: pass --nodes or set SWE_EXEC_SERVER_URLS")
    app_ = create_app(
        urls,
        token=_auth(host, token, allow),
        node_token=node_token or token,
        max_concurrent=max_concurrent,
        per_node=per_node,
        ttl=ttl,
        wait=wait,
        health_period=health_period,
        reap_period=reap_period,
    )
    _run(
        app_,
        host,
        port,
        f"pool server over {len(urls)} node(s) (max concurrent "
        f"{app_.state.pool.max_concurrent}, per node {per_node or 'by capacity'})",
    )


@app.command("rollout")
def serve_rollout(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 18100,
    backend: BackendOpt = "auto",
    tasks: Annotated[
        str | None,
        typer.Option("--tasks", "-s", help="Task source for requests that send only an instance id."),
    ] = "builtin",
    capacity: Annotated[
        int | None,
        typer.Option(
            envvar="SWE_RL_CAPACITY",
            help="Rollouts at once; more requests queue. Default: what the machine allows (8 per usable "
            "CPU, 512 MiB of memory each).",
            min=1,
        ),
    ] = None,
    wait: Annotated[float, typer.Option(help="Seconds a request may queue before a 503.")] = 300.0,
    token: TokenOpt = None,
    allow: AllowOpt = None,
    cache_dir: CacheOpt = None,
    repo_cache: RepoCacheOpt = None,
    gym_tokenizer: Annotated[
        str,
        typer.Option(
            "--gym-tokenizer",
            envvar="SWE_RL_TOKENIZER",
            help="The policy's tokenizer for NeMo-Gym-shaped requests (miles' swe-agent example), which "
            "name none: 'qwen' (bundled) or a tokenizer directory.",
        ),
    ] = "qwen",
    reuse_grading: Annotated[
        bool,
        typer.Option(
            "--reuse-grading/--fresh-grading",
            help="Keep up to 16 grading sandboxes (each with pytest imported once) and 16 agent sandboxes "
            "between rollouts, reset in place (ns backend); by default every agent run and grading gets a "
            "fresh sandbox, and every test run a fresh interpreter.",
        ),
    ] = False,
) -> None:
    """A whole agent rollout per POST /run: the policy's token ids in, graded token-level samples out."""
    from swe_rl.service.rollout_server import create_app

    access = _auth(host, token, allow)
    factory, cache, known = _node(backend, tasks, cache_dir, repo_cache)
    app_ = create_app(
        factory,
        cache,
        known,
        capacity=capacity,
        wait=wait,
        token=access,
        gym_tokenizer=gym_tokenizer,
        reuse_grading=reuse_grading,
    )
    capacity = app_.state.node.capacity
    _run(app_, host, port, f"rollout server ({factory.backend} backend, capacity {capacity})")


def _node(
    backend: str, tasks: str | None, cache_dir: Path | None, repo_cache: Path | None
) -> tuple[Any, Any, list[Any]]:
    """What a sandbox-side server needs: its backend's factory, the env cache and the tasks it knows."""
    from swe_rl.cli.options import pool_token
    from swe_rl.sandbox import get_factory
    from swe_rl.tasks.loaders import load_tasks

    return (
        get_factory(resolve_backend(backend), token=pool_token()),
        env_cache(cache_dir, repo_cache),
        load_tasks(tasks) if tasks else [],
    )


def _run(app_: Any, host: str, port: int, what: str) -> None:
    import uvicorn

    note(f"{what} on http://{host}:{port}")
    uvicorn.run(app_, host=host, port=port, log_level="warning", timeout_graceful_shutdown=60)
