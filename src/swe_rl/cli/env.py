"""``swe-rl env``: build, validate, list and clean environments."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from swe_rl.cli.env_tables import print_build, print_validation
from swe_rl.cli.options import (
    BackendOpt,
    CacheOpt,
    ConcurrencyOpt,
    InstancesOpt,
    JsonOpt,
    RepoCacheOpt,
    SourceOpt,
    TimeoutOpt,
    env_cache,
    note,
    print_json,
    resolve_backend,
    run,
    writable_file,
)

if TYPE_CHECKING:
    from swe_rl.envs.build.recipe import InstallOptions
    from swe_rl.tasks.model import Task

app = typer.Typer(
    help="Environments: the repo at base_commit plus its venv, cached and shared.", no_args_is_help=True
)


InstallerOpt = Annotated[
    str, typer.Option("--installer", help="uv (falls back to pip when uv is not installed) or pip.")
]
AsOfDateOpt = Annotated[
    bool,
    typer.Option(
        "--as-of-date/--latest",
        help="Resolve packages as of each task's created_at (uv --exclude-newer), or from today's index.",
    ),
]
ConstraintsOpt = Annotated[
    Path | None, typer.Option("--constraints", help="A pip constraints file applied to every install.")
]
InstallPythonOpt = Annotated[
    bool,
    typer.Option(
        "--install-python", help="Install a missing Python with `uv python install` (or $SWE_RL_CONDA)."
    ),
]

InstallSystemDepsOpt = Annotated[
    bool,
    typer.Option(
        "--install-system-deps",
        help="Install the Debian packages the builds need and the host lacks (compilers, C libraries) with "
        "apt-get first; needs root. Without it a build that lacks one stops and names the package.",
    ),
]


def _options(installer: str, as_of_date: bool, constraints: Path | None, install_python: bool) -> object:
    from swe_rl.envs.build.recipe import InstallOptions
    from swe_rl.errors import ConfigError

    if installer not in ("uv", "pip"):
        raise ConfigError(f"unknown installer {installer!r}: use uv or pip")
    return InstallOptions.with_constraints_file(
        constraints, installer=installer, as_of_date=as_of_date, fetch_python=install_python
    )


@app.command("build")
def build(
    source: SourceOpt = "builtin",
    instance: InstancesOpt = None,
    cache_dir: CacheOpt = None,
    repo_cache: RepoCacheOpt = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Environments built at once.")] = 2,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="JSON report: every instance and a per-repository summary; rewritten as builds finish, "
            "read to resume a rerun.",
        ),
    ] = None,
    validate: Annotated[
        bool, typer.Option("--validate", help="Also grade gold and empty patches in each built env.")
    ] = False,
    revalidate: Annotated[
        bool,
        typer.Option(
            "--revalidate",
            help="With --validate and --report: grade again the instances the report found invalid (their "
            "envs are kept), e.g. after upgrading swe-rl.",
        ),
    ] = False,
    pack: Annotated[
        bool,
        typer.Option(
            "--pack",
            help="At the end, pack the cache's envs into one compressed read-only image (`swe-rl env pack "
            "--merge`; root, squashfs-tools); the report's disk is measured after it.",
        ),
    ] = False,
    backend: BackendOpt = "auto",
    timeout: TimeoutOpt = 1800.0,
    installer: InstallerOpt = "uv",
    as_of_date: AsOfDateOpt = True,
    constraints: ConstraintsOpt = None,
    install_python: InstallPythonOpt = False,
    install_system_deps: InstallSystemDepsOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Build (or find in the cache) the environment of every task; with --validate, prove each one.

    Builds run in parallel (--jobs); one failure does not stop the others. Each finished instance prints a
    line on stderr: done/total, time elapsed, and the time left estimated from the mean time of an instance
    over --jobs.

    The --report file (JSON) lists every instance (status, reason, seconds, env key) and a per-repository
    summary, and is rewritten as each instance finishes. Run the same command with the same --report to resume
    a run that stopped: built (and, with --validate, graded) instances are kept, failed ones are tried again,
    and so are those whose repository had no mirror (status unfetchable: add it to --repo-cache and rerun);
    --revalidate grades again those found invalid. A run over other instances (--instance) with the same
    --report adds to it: the entries of instances it does not build are kept.
    `swe-rl data prepare --valid-only REPORT` keeps the instances it marks usable.

    At the end it prints, per repository, how many instances are valid (or built), invalid, failed (env build),
    error (grading infrastructure) and unfetchable, with the class of each cause (system library missing,
    build failed, gold does not resolve, empty resolves, unparseable log, timeout, ...), and the disk the env
    cache takes. --json prints the report with its summary. Exits 1 when any instance is not usable.
    """
    from swe_rl.envs.build.recipe import InstallOptions
    from swe_rl.envs.cache import EnvCache
    from swe_rl.errors import ConfigError
    from swe_rl.runs.envbuild import build_dataset
    from swe_rl.tasks.loaders import load_tasks

    if report is not None:
        writable_file(report, "--report")
    if revalidate and not (validate and report):
        raise ConfigError(
            "--revalidate grades again what a --report found invalid: give --validate and --report"
        )
    if pack:  # before hours of building, not after
        from swe_rl.envs.store.pack_images import need_tools

        need_tools()
    tasks = load_tasks(source, instance_ids=instance)
    options = _options(installer, as_of_date, constraints, install_python)
    assert isinstance(options, InstallOptions)
    cache = EnvCache(cache_dir, repo_cache=repo_cache, options=options)
    if install_system_deps:  # once for the whole run, before builds start in parallel (apt-get takes a lock)
        _provide_system([t for t in tasks if cache.imported_for(t) is None], options)
    factory = None
    if validate:
        from swe_rl.cli.options import pool_token
        from swe_rl.sandbox import get_factory

        factory = get_factory(resolve_backend(backend), token=pool_token())
    result = run(
        build_dataset(
            tasks,
            cache,
            jobs=jobs,
            report_path=report,
            factory=factory,
            timeout=timeout,
            revalidate=revalidate,
            pack=pack,
        )
    )
    if json_out:
        print_json(result.model_dump(mode="json"))
    else:
        print_build(result)
    counts = result.counts()
    unusable = ("failed", "invalid", "error", "unfetchable")
    raise typer.Exit(1 if any(counts.get(status) for status in unusable) else 0)


def _provide_system(tasks: list[Task], options: InstallOptions) -> None:
    from swe_rl.envs.build.system_deps import install_system_deps, system_needs

    installed = install_system_deps(system_needs(tasks, options))
    if installed:
        note(f"installed with apt-get: {' '.join(installed)}")


@app.command("validate")
def validate(
    source: SourceOpt = "builtin",
    instance: InstancesOpt = None,
    backend: BackendOpt = "auto",
    cache_dir: CacheOpt = None,
    repo_cache: RepoCacheOpt = None,
    concurrency: ConcurrencyOpt = 2,
    timeout: TimeoutOpt = 1800.0,
    report: Annotated[
        Path | None,
        typer.Option("--report", help="Write the full JSON report (verdicts and logs) to this file."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Prove each task's environment: the gold patch resolves and the unchanged base does not.

    Exits 1 when any task is invalid or could not be checked.
    """
    from swe_rl.cli.options import pool_token
    from swe_rl.fileio import atomic_write_json
    from swe_rl.runs.validation import validate_tasks
    from swe_rl.sandbox import get_factory
    from swe_rl.tasks.loaders import load_tasks

    if report is not None:
        writable_file(report, "--report")
    tasks = load_tasks(source, instance_ids=instance)
    factory = get_factory(resolve_backend(backend), token=pool_token())
    result = run(
        validate_tasks(
            tasks, env_cache(cache_dir, repo_cache), factory, concurrency=concurrency, timeout=timeout
        )
    )
    if report:
        atomic_write_json(report, result.model_dump(mode="json"))
    if json_out:
        print_json(
            result.model_dump(
                mode="json", exclude={"results": {"__all__": {"gold": {"log"}, "empty": {"log"}}}}
            )
        )
    else:
        print_validation(result)
    raise typer.Exit(0 if result.ok else 1)


@app.command("ls")
def ls(cache_dir: CacheOpt = None, json_out: JsonOpt = False) -> None:
    """List the environments in the cache."""
    specs = env_cache(cache_dir, None).records()
    if json_out:
        print_json([s.model_dump(mode="json") for s in specs])
        return
    for s in specs:
        print(f"{s.key}  {s.repo}@{s.base_commit[:12]}  testbed={s.testbed}  venv={s.venv}")
    note(f"{len(specs)} environment(s)")


@app.command("gc")
def gc(
    cache_dir: CacheOpt = None,
    all_envs: Annotated[
        bool, typer.Option("--all", help="Also remove every built environment, not only unfinished builds.")
    ] = False,
    keep_reports: Annotated[
        list[Path] | None,
        typer.Option(
            "--keep-report",
            help="Also remove every environment that no entry of these `env build --report` files uses "
            "(repeatable): what a dataset run keeps, without the envs of earlier runs.",
        ),
    ] = None,
) -> None:
    """Remove unfinished builds left by crashes (with --all every environment, with --keep-report the unused)."""
    if all_envs and keep_reports:
        raise typer.BadParameter("--all and --keep-report exclude each other", param_hint="--keep-report")
    keep: set[str] | None = set() if all_envs else None
    if keep_reports:
        from swe_rl.runs.buildreport import BuildReport

        reports = [BuildReport.load(path) for path in keep_reports]  # all read before anything is removed
        keep = {e.env for report in reports for e in report.entries.values() if e.env}
    removed = env_cache(cache_dir, None).gc(keep=keep)
    for path in removed:
        print(path)
    note(f"removed {len(removed)} path(s)")


@app.command("pack")
def pack(
    cache_dir: CacheOpt = None,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            help="Also move the trees of the cache's earlier images into the new one (files they share are then "
            "stored once) and drop those images; sandboxes still on them keep them until they end. The largest "
            "image is copied and the rest appended to it when every tree in it is still used (only the new "
            "trees are compressed, with that image's compression, not --level); else all are compressed anew.",
        ),
    ] = False,
    level: Annotated[int, typer.Option("--level", min=1, max=22, help="zstd compression level.")] = 15,
    processors: Annotated[
        int | None, typer.Option("--processors", min=1, help="mksquashfs threads [default: every core].")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Move every finished testbed and venv of the cache into one compressed read-only image (root).

    The image (squashfs, zstd; identical files once) is checked file by file against the trees, mounted at
    <cache>/packed/<id>/, and each tree's path becomes a link into it: envs, sandboxes and grading see the same
    paths. Builds of the cache wait while it runs. Run it after a dataset build; what is built later stays
    loose until the next pack (or merge them all with --merge). After a reboot the images are mounted again on
    first use (or `env mount`).
    """
    cache = env_cache(cache_dir, None)
    before = cache.disk_usage().total
    result = cache.pack(merge=merge, level=level, processors=processors, progress=note)
    after = cache.disk_usage().total
    if json_out:
        manifest = result.manifest.model_dump(mode="json") if result.manifest else None
        print_json(
            {
                "manifest": manifest,
                "disk_before": before,
                "disk_after": after,
                "trash_left": result.trash_left,
            }
        )
        return
    if result.manifest is None:
        note("nothing to pack: no finished testbed or venv is loose")
    else:
        m = result.manifest
        note(
            f"packed {len(m.entries)} trees into {m.id}.sqfs: {m.bytes / 2**30:.2f} GiB "
            f"(they took {m.loose_bytes / 2**30:.2f} GiB before) in {m.seconds:.0f} s"
        )
    note(f"env cache: {before / 2**30:.2f} GiB before, {after / 2**30:.2f} GiB after")
    if result.trash_left:
        note(
            f"{len(result.trash_left)} replaced tree(s) still bound by running sandboxes: `swe-rl env gc` later"
        )


@app.command("mount")
def mount(cache_dir: CacheOpt = None) -> None:
    """Mount the cache's packed images that are not mounted (after a reboot; root). Each image's sha256 is
    checked against its manifest first."""
    from swe_rl.envs.store.pack_images import mount_all

    cache = env_cache(cache_dir, None)
    done = mount_all(cache.root)
    note(f"mounted {len(done)} image(s)" + (f": {', '.join(done)}" if done else ""))


@app.command("import-image")
def import_image(
    images: Annotated[
        list[str], typer.Argument(help="Evaluation image(s), e.g. swebench/sweb.eval.x86_64.<id>.")
    ],
    cache_dir: CacheOpt = None,
    repo: Annotated[
        str | None,
        typer.Option("--repo", help="owner/name of the repository [default: read from the image name]."),
    ] = None,
    python_env: Annotated[
        str | None,
        typer.Option(
            "--python-env",
            help="Path of the Python environment inside the image [default: the SWE-bench conda env, "
            "/opt/venv, or the image's PATH].",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Turn official evaluation images into env-cache entries, so ns sandboxes run them without Docker.

    The image's /testbed (history after its HEAD removed) and its whole filesystem are copied into
    the cache once; tasks whose image name matches then use the imported env.
    """
    import time

    from swe_rl.envs.images.importing import import_image as do_import

    cache = env_cache(cache_dir, None)
    specs = []
    for i, image in enumerate(images, 1):
        started = time.monotonic()
        spec = do_import(cache, image, repo=repo, python_env=python_env)
        specs.append(spec)
        note(
            f"[import {i}/{len(images)}] {image}: env {spec.key} ({spec.repo}@{spec.base_commit[:12]}, "
            f"python env {spec.venv}) in {time.monotonic() - started:.1f}s"
        )
    if json_out:
        print_json([s.model_dump(mode="json") for s in specs])
