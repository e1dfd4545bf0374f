"""``swe-rl images``: pull evaluation images (through a mirror) and list them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from swe_rl.cli.options import CacheOpt, JsonOpt, console, env_cache, note, print_json

app = typer.Typer(help="Evaluation images: pull through a mirror, retag, list.", no_args_is_help=True)


@app.command("pull")
def pull(
    list_file: Annotated[
        Path,
        typer.Option(
            "--list", help="File of image names, one a line (e.g. `data export`'s docker_images.txt)."
        ),
    ],
    mirror: Annotated[
        str | None,
        typer.Option(
            "--mirror", help="Registry prefix to pull from (e.g. registry.local:5000); retagged to the names."
        ),
    ] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Pulls at once.")] = 4,
    json_out: JsonOpt = False,
) -> None:
    """Pull the listed images, skipping those present (a rerun resumes). Exits 1 when any pull failed."""
    from swe_rl.envs.images.pull import pull_images, read_image_list
    from swe_rl.runs.progress import Progress
    from swe_rl.sandbox.docker import docker_client

    names = read_image_list(list_file)
    progress = Progress(len(names), "pull")

    def done(result: object) -> None:
        from swe_rl.envs.images.pull import PullResult

        assert isinstance(result, PullResult)
        progress.advance(
            result.name, result.status + (f": {result.error}" if result.error else f" ({result.seconds}s)")
        )

    results = pull_images(docker_client(), names, mirror=mirror, jobs=jobs, on_done=done)
    counts = {s: sum(r.status == s for r in results) for s in ("pulled", "present", "failed")}
    note(
        f"images pull: {counts['pulled']} pulled, {counts['present']} already present, {counts['failed']} failed"
    )
    if json_out:
        print_json([r.model_dump() for r in results])
    raise typer.Exit(1 if counts["failed"] else 0)


@app.command("ls")
def ls(cache_dir: CacheOpt = None, json_out: JsonOpt = False) -> None:
    """Evaluation images on this Docker engine and envs imported from images (what an exec server's /images lists)."""
    from swe_rl.envs.images.pull import image_inventory
    from swe_rl.errors import SandboxUnavailableError

    try:
        from swe_rl.sandbox.docker import docker_client

        client = docker_client()
    except SandboxUnavailableError as exc:
        note(f"no Docker engine ({exc}); listing imported envs only")
        client = None
    entries = image_inventory(env_cache(cache_dir, None), client)
    if json_out:
        print_json([e.model_dump() for e in entries])
        return
    from rich.table import Table

    table = Table(title=f"{len(entries)} evaluation image(s)")
    for col in ("image", "docker", "size (MB)", "imported env"):
        table.add_column(col)
    for e in entries:
        table.add_row(
            e.name, "yes" if e.docker else "-", f"{e.size / 1e6:.1f}" if e.size else "-", e.env or "-"
        )
    console().print(table)
