"""Sandbox benchmarks, side by side in one run: ns (bubblewrap) vs docker (Engine API) [vs NitroBox].

    python bench/sandboxes.py                 # full size (numbers in BENCHMARKS.md)
    python bench/sandboxes.py --quick         # a smoke-sized run
    python bench/sandboxes.py --reset-only 30 # only the paired reset comparison -> results/sandbox_reset.json

Measures, per backend: create + first exec + destroy; `exec true` in a live sandbox; reset; memory per
live sandbox (PSS of its processes, plus docker's shim); N sandboxes alive at once (start time, memory,
all answer). Also env materialisation (overlay vs cp -a vs tar -x of the same tree) and the env build of
the builtin suite, cold and warm. Prints a table and writes JSON next to this file.

The reset comparison is paired: each round runs, in a shuffled order, an ns create (and within it bwrap's
start-up, timed from the spawn to the shell's greeting), an ns reset in place, an ns reset that restarts
bwrap, and a NitroBox reset (bench/_nitrobox.py; its own process and venv), each after dirtying the sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _nitrobox import NitroboxResetter, nitrobox_results

from swe_rl.envs.cache import EnvCache
from swe_rl.sandbox import get_factory
from swe_rl.sandbox.base import EnvSpec, Limits
from swe_rl.tasks.builtin import builtin_tasks


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def pss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def sandbox_pids(box) -> list[int]:  # type: ignore[no-untyped-def]
    if box.id.startswith("ns-"):
        return [*box._cgroup.pids(), box._proc.pid]
    container = box._container
    container.reload()
    pids = [int(row[1]) for row in container.top(ps_args="-eo user,pid")["Processes"]]
    shim = subprocess.run(["pgrep", "-f", f"containerd-shim.*{container.id}"], capture_output=True, text=True)
    return pids + [int(p) for p in shim.stdout.split()]


async def lifecycle(factory, env: EnvSpec, rounds: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    create, execs, resets, destroy, full = [], [], [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        box = await factory.create(env)
        t1 = time.perf_counter()
        await box.exec("true", timeout=30)
        t2 = time.perf_counter()
        await box.close()
        t3 = time.perf_counter()
        create.append(t1 - t0)
        destroy.append(t3 - t2)
        full.append(t3 - t0)
    async with await factory.create(env) as box:
        for _ in range(3):
            await box.exec("true", timeout=30)
        for _ in range(rounds * 10):
            t0 = time.perf_counter()
            await box.exec("true", timeout=30)
            execs.append(time.perf_counter() - t0)
        for _ in range(rounds):
            await box.exec("echo dirty > /testbed/x", timeout=30)
            t0 = time.perf_counter()
            await box.reset()
            resets.append(time.perf_counter() - t0)
        pss = pss_kib(sandbox_pids(box))
    return {
        "lifecycle_ms": median_ms(full),
        "create_ms": median_ms(create),
        "destroy_ms": median_ms(destroy),
        "exec_true_ms": median_ms(execs),
        "reset_ms": median_ms(resets),
        "pss_mib": round(pss / 1024, 2),
    }


async def many_alive(factory, env: EnvSpec, n: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    limits = Limits(memory_mb=512, pids=128)
    t0 = time.perf_counter()
    boxes = []
    try:
        for _ in range(n):
            boxes.append(await factory.create(env, limits))
        started = time.perf_counter() - t0
        results = await asyncio.gather(*(b.exec("echo ok", timeout=120) for b in boxes))
        answered = sum(r.output == "ok\n" for r in results)
        pss = pss_kib([p for b in boxes for p in sandbox_pids(b)])
    finally:
        t1 = time.perf_counter()
        await asyncio.gather(*(b.close() for b in boxes))
        closed = time.perf_counter() - t1
    return {
        "n": n,
        "start_all_s": round(started, 2),
        "answered": answered,
        "pss_per_sandbox_mib": round(pss / 1024 / n, 2),
        "close_all_s": round(closed, 2),
    }


class _SpawnClock:
    """Wraps the spawner: when the last bwrap spawn began (bwrap's start-up = from then until create
    returns, right after the shell's greeting)."""

    def __init__(self) -> None:
        from swe_rl.sandbox.spawner import Spawner

        self.started = 0.0
        real = Spawner.spawn

        def spawn(spawner, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.started = time.perf_counter()
            return real(spawner, *args, **kwargs)

        Spawner.spawn = spawn  # type: ignore[method-assign]


async def reset_comparison(env: EnvSpec, rounds: int) -> dict[str, object]:
    """Paired and interleaved, in a shuffled order each round: ns create (and, inside it, bwrap's start-up:
    from the spawn to the shell's greeting), ns reset in place, ns reset by restarting bwrap, NitroBox reset."""
    factory = get_factory("ns")
    clock = _SpawnClock()
    nitro = NitroboxResetter()
    keys = ("create", "bwrap_startup", "create_minus_bwrap_startup", "in_place", "restart", "nitrobox")
    samples: dict[str, list[float]] = {k: [] for k in keys}
    in_place, restart = await factory.create(env), await factory.create(env)

    async def create() -> None:
        t0 = time.perf_counter()
        box = await factory.create(env)
        t1 = time.perf_counter()
        samples["create"].append(t1 - t0)
        samples["bwrap_startup"].append(t1 - clock.started)
        samples["create_minus_bwrap_startup"].append(clock.started - t0)
        await box.exec("true", timeout=30)
        await box.close()

    async def reset(box, key: str, **kwargs: bool) -> None:  # type: ignore[no-untyped-def]
        await box.exec("echo dirty > /testbed/x; echo t > /tmp/t; sleep 100 &", timeout=30)
        t0 = time.perf_counter()
        await box.reset(**kwargs)
        samples[key].append(time.perf_counter() - t0)

    async def nitrobox() -> None:
        if nitro.skipped is None:
            samples["nitrobox"].append(nitro.reset())

    steps = [
        create,
        lambda: reset(in_place, "in_place"),
        lambda: reset(restart, "restart", in_place=False),
        nitrobox,
    ]
    rng = random.Random(25)
    try:
        for box in (in_place, restart):
            for _ in range(3):
                await box.exec("true", timeout=30)
        for _ in range(rounds):
            for step in rng.sample(steps, len(steps)):
                await step()
            assert in_place.restart_reason is None and restart.restart_reason is not None
    finally:
        await in_place.close()
        await restart.close()
        nitro.close()
    ms = {f"{k}_ms": median_ms(v) for k, v in samples.items() if v}
    result: dict[str, object] = {
        "rounds": rounds,
        **ms,
        "in_place_p90_ms": round(statistics.quantiles(samples["in_place"], n=10)[-1] * 1000, 3),
        "in_place_within_create_minus_startup": ms["in_place_ms"] <= ms["create_minus_bwrap_startup_ms"],
        "restart_over_in_place": round(ms["restart_ms"] / ms["in_place_ms"], 1),
        "nitrobox": nitro.skipped or f"NitroBox {nitro.version}",
    }
    if "nitrobox_ms" in ms:
        result["nitrobox_over_in_place"] = round(ms["nitrobox_ms"] / ms["in_place_ms"], 1)
    return result


def materialise(tree: Path, rounds: int) -> dict[str, float]:
    """Time to get a private writable copy of ``tree``: cp -a, tar -x, and an ns sandbox's overlay."""
    files = sum(len(f) for _, _, f in os.walk(tree))
    size = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
    work = Path(tempfile.mkdtemp(prefix="swe-rl-bench-"))
    archive = work / "tree.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(tree, arcname="t")
    cp, untar, overlay = [], [], []
    try:
        for i in range(rounds):
            t0 = time.perf_counter()
            subprocess.run(["cp", "-a", str(tree), str(work / f"cp{i}")], check=True)
            cp.append(time.perf_counter() - t0)
            (work / f"x{i}").mkdir()
            t0 = time.perf_counter()
            subprocess.run(["tar", "-xf", str(archive), "-C", str(work / f"x{i}")], check=True)
            untar.append(time.perf_counter() - t0)
            shutil.rmtree(work / f"cp{i}")
            shutil.rmtree(work / f"x{i}")
        env = EnvSpec(key="bench", repo="bench", base_commit="HEAD", testbed=tree)
        factory = get_factory("ns")

        async def ns_rounds() -> None:
            for _ in range(rounds):
                t0 = time.perf_counter()
                box = await factory.create(env)
                await box.exec("test -d /testbed", timeout=30)
                overlay.append(time.perf_counter() - t0)
                await box.close()

        asyncio.run(ns_rounds())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "files": files,
        "mib": round(size / 2**20, 1),
        "cp_a_ms": median_ms(cp),
        "tar_x_ms": median_ms(untar),
        "ns_overlay_create_ms": median_ms(overlay),
    }


def repo_like_tree(dest: Path) -> Path:
    """A repo+venv-sized tree (thousands of small files, tens of MB): this interpreter's stdlib, no site-packages."""
    stdlib = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    tree = dest / "tree"
    shutil.copytree(
        stdlib, tree, symlinks=True, ignore=shutil.ignore_patterns("site-packages", "__pycache__")
    )
    return tree


def env_build() -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="swe-rl-bench-envs-"))
    try:
        tasks = builtin_tasks()
        cache = EnvCache(root)
        t0 = time.perf_counter()
        for task in tasks:
            cache.ensure(task)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        warm_cache = EnvCache(root)  # a new process would see the same: records on disk
        for task in tasks:
            warm_cache.ensure(task)
        warm = time.perf_counter() - t0
        return {
            "tasks": len(tasks),
            "envs": len(cache.records()),
            "cold_s": round(cold, 3),
            "warm_ms": round(warm * 1000, 2),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _machine() -> dict[str, object]:
    load = os.getloadavg()[0]
    return {
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_average": round(load, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--alive", type=int, default=128, help="sandboxes alive at once")
    parser.add_argument(
        "--docker-alive", type=int, default=32, help="containers alive at once (dockerd is slow)"
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results") / "sandboxes.json")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="also measure the ns backend of another checkout's src/ (e.g. a git worktree of an older "
        "commit) in the same run, as 'ns_baseline'",
    )
    parser.add_argument("--ns-only", action="store_true", help=argparse.SUPPRESS)  # the baseline's child
    parser.add_argument(
        "--reset-only",
        type=int,
        metavar="ROUNDS",
        help="only the paired reset comparison (ns create / reset in place / reset by restart / NitroBox reset), "
        "ROUNDS interleaved rounds, written to results/sandbox_reset.json",
    )
    args = parser.parse_args()
    rounds = 5 if args.quick else 20
    alive = 8 if args.quick else args.alive
    docker_alive = 4 if args.quick else args.docker_alive

    env = EnvCache().ensure(builtin_tasks("textkit")[0])
    if args.reset_only:
        reset = asyncio.run(reset_comparison(env, args.reset_only))
        out = args.out.with_name("sandbox_reset.json")
        out.write_text(json.dumps({"machine": _machine(), **reset}, indent=2) + "\n")
        print(json.dumps(reset, indent=2))
        return
    results: dict[str, object] = {
        "machine": _machine(),
        "rounds": rounds,
    }
    if args.ns_only:
        factory = get_factory("ns")
        print(
            json.dumps(
                {
                    "ns": asyncio.run(lifecycle(factory, env, rounds)),
                    "ns_alive": asyncio.run(many_alive(factory, env, alive)),
                }
            )
        )
        return
    if args.baseline_src:
        print(f"[ns baseline from {args.baseline_src}] ...", file=sys.stderr, flush=True)
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--ns-only",
                "--alive",
                str(alive),
                *(["--quick"] if args.quick else []),
            ],
            env={**os.environ, "PYTHONPATH": str(args.baseline_src)},
            capture_output=True,
            text=True,
            check=True,
        )
        baseline = json.loads(child.stdout.strip().splitlines()[-1])
        results["ns_baseline"], results["ns_baseline_alive"] = baseline["ns"], baseline["ns_alive"]
    for backend, n in (("ns", alive), ("docker", docker_alive)):
        factory = get_factory(backend)
        print(f"[{backend}] lifecycle ...", file=sys.stderr, flush=True)
        results[backend] = asyncio.run(lifecycle(factory, env, rounds))
        print(f"[{backend}] {n} alive ...", file=sys.stderr, flush=True)
        results[f"{backend}_alive"] = asyncio.run(many_alive(factory, env, n))
    print("[reset: paired] ...", file=sys.stderr, flush=True)
    results["reset"] = asyncio.run(reset_comparison(env, rounds))
    print("[nitrobox] ...", file=sys.stderr, flush=True)
    results["nitrobox"] = nitrobox_results(rounds)
    print("[materialise] ...", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="swe-rl-bench-tree-") as tmp:
        results["materialise"] = materialise(repo_like_tree(Path(tmp)), max(3, rounds // 4))
    print("[env build] ...", file=sys.stderr, flush=True)
    results["env_build"] = env_build()
    ns, dk = results["ns"], results["docker"]
    assert isinstance(ns, dict) and isinstance(dk, dict)
    results["ratios_docker_over_ns"] = {
        k: round(dk[k] / ns[k], 1) for k in ("lifecycle_ms", "exec_true_ms", "reset_ms") if ns[k]
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
