"""``swe-rl cluster``: the Ray cluster behind ``--executor ray`` (rollouts and sandboxes on many machines)."""

from __future__ import annotations

import json
import shlex
import socket
from pathlib import Path
from typing import Annotated, Any

import typer

from swe_rl.cli.options import console, note, print_json

app = typer.Typer(
    help="Ray cluster helpers: the `ray start` commands with each node's swe-rl resources, and its status.",
    no_args_is_help=True,
)


def _this_ip() -> str:
    """This machine's address on its default route (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"


def _start_line(resources: dict[str, int], cache: Path | None, *args: str) -> str:
    env = f"SWE_RL_CACHE={shlex.quote(str(cache))} " if cache else ""
    res = f" --resources {shlex.quote(json.dumps(resources))}" if resources else ""
    return f"{env}ray start {' '.join(args)}{res}"


@app.command("up")
def up(
    address: Annotated[
        str | None,
        typer.Option(
            "--address", help="host:port of the head that workers join (default: this machine:6379)."
        ),
    ] = None,
    cpus: Annotated[
        int | None, typer.Option("--cpus", min=1, help="Size the workers for this many CPUs (default: here).")
    ] = None,
    memory_gb: Annotated[
        float | None, typer.Option("--memory-gb", min=1, help="... and this much memory (default: here).")
    ] = None,
    slots: Annotated[
        int | None, typer.Option("--slots", min=1, help="Override: rollouts at once per node ('sandbox').")
    ] = None,
    start_up: Annotated[
        int | None, typer.Option("--start-up", min=1, help="Override: sandbox creations at once per node.")
    ] = None,
    env_io: Annotated[
        int | None, typer.Option("--env-io", min=1, help="Override: env builds at once per node.")
    ] = None,
    head_sandboxes: Annotated[
        bool,
        typer.Option(
            "--head-sandboxes/--no-head-sandboxes",
            help="Whether the head runs rollouts too (no: it only drives them, e.g. next to a trainer's GPUs).",
        ),
    ] = True,
    cache: Annotated[
        Path | None,
        typer.Option("--cache", help="Each node's swe-rl cache dir (SWE_RL_CACHE; default ~/.cache/swe-rl)."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the commands and resources as JSON.")
    ] = False,
) -> None:
    """Print the `ray start` commands for the head and the workers, with swe-rl's resources for each node.

    Resources: 'sandbox' = rollouts at once (from CPUs and memory), 'sandbox_start_up' = sandbox creations
    at once, 'env_io' = environment builds at once. Run `swe-rl cluster up` on each kind of machine to size
    it from its own capacity. Every node needs swe-rl with the ray extra (`pip install 'swe-rl[ray]'`).
    """
    from swe_rl.executors.ray import node_resources

    resources = node_resources(cpus, int(memory_gb * 1024) if memory_gb else None)
    for name, given in (("sandbox", slots), ("sandbox_start_up", start_up), ("env_io", env_io)):
        if given is not None:
            resources[name] = given
    resources["sandbox_start_up"] = min(resources["sandbox_start_up"], resources["sandbox"])
    head = address or f"{_this_ip()}:6379"
    port = head.rpartition(":")[2] or "6379"
    plan: dict[str, Any] = {
        "address": head,
        "resources": resources,
        "head": _start_line(resources if head_sandboxes else {}, cache, "--head", f"--port={port}"),
        "worker": _start_line(resources, cache, f"--address={head}"),
        "use": f"swe-rl eval --executor ray:{head} ...   |   SWE_RL_EXECUTOR=ray:{head} (trainer adapters)",
    }
    if json_out:
        print_json(plan)
        return
    print("# on the head (drives the rollouts: the trainer or `swe-rl eval` runs here)")
    print(plan["head"])
    print("# on every worker node (sized like this machine; run `swe-rl cluster up` there to size it)")
    print(plan["worker"])
    print("# then")
    print(plan["use"])
    print(f"swe-rl cluster status --address {head}")
    note(
        f"per node: {resources['sandbox']} rollouts at once, {resources['sandbox_start_up']} sandbox "
        f"start-ups, {resources['env_io']} env builds (swe-rl[ray] must be installed on every node)"
    )


@app.command("status")
def status(
    address: Annotated[
        str | None,
        typer.Option("--address", envvar="RAY_ADDRESS", help="The cluster (default: the one here)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the node list as JSON.")] = False,
) -> None:
    """Nodes of the cluster: swe-rl resources (total and free), envs held, rollouts running and done."""
    from swe_rl.executors.ray import cluster_status

    nodes = cluster_status(address)
    if json_out:
        for n in nodes:
            if n["host"]:
                n["host"].pop("spans", None)
        print_json(nodes)
        return
    from rich.table import Table

    table = Table("node", "address", "sandbox", "start-up", "env io", "envs", "running", "done")
    for n in nodes:
        host = n["host"] or {}
        free = n["free"] or {}
        table.add_row(
            n["node_id"][:12],
            str(n["address"]),
            f"{free.get('sandbox', '?')}/{n['total']['sandbox']} free",
            str(n["total"]["sandbox_start_up"]),
            str(n["total"]["env_io"]),
            str(len(host.get("envs", []))) if host else "-",
            str(len(host.get("running", []))) if host else "-",
            str(host.get("completed", "-")) if host else "-",
        )
    console().print(table)
    rollout_nodes = [n for n in nodes if n["total"]["sandbox"] > 0]
    note(
        f"{len(nodes)} nodes, {len(rollout_nodes)} with sandbox slots "
        f"({sum(n['total']['sandbox'] for n in nodes)} in all); '-': no rollout has run there yet"
    )
