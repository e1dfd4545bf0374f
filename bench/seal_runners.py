"""The seal of django's and sympy's runners on the projects' own test suites: false positives and cost, measured
outside the tree.

For a Django source release (its sdist holds ``tests/`` and ``tests/runtests.py``) or a sympy checkout (at a
SWE-bench instance's base commit: ``bin/test`` and its ``sympy/**/tests/test_*.py``), a seeded random draw of
its test modules is run twice by the real runner, as swebench runs it: as it is, and under the seal's
launcher (``insandbox/seal_unittest.py``, ``insandbox/seal_sympy.py``) with a key of its own. Both sympy runs
get the same ``PYTHONHASHSEED`` (sympy's runner then runs the tests in its own process, as strict grading has
it) and the same ``--seed`` for sympy's randomized tests (without one two plain runs of sympy 1.1's
core/tests/test_arit.py disagree), so only the seal can tell the runs apart. Each run's log is read by swebench's parser; every
test the sealed run's log passes must be confirmed by its sealed results (``Seal.check``: what strict grading
requires), and the two runs' verdicts must agree. Nothing is patched: a test the seal does not confirm here
is a false positive of strict grading.

    pip download --no-binary :all: --no-deps Django==5.0.14 && tar xzf Django-5.0.14.tar.gz
    python bench/seal_runners.py Django-5.0.14 --python /root/.pyenv/versions/3.11.7/bin/python3 \\
        --modules 40 --seed 0 --json bench/results/seal_django-5.0.json
    git -C <sympy mirror> worktree add /tmp/sympy-24562 <base commit>
    python bench/seal_runners.py /tmp/sympy-24562 --python /root/.pyenv/versions/3.9.*/bin/python3 \\
        --modules 40 --seed 0 --json bench/results/seal_sympy-1.12.json

Requires PyPI once (Django's requirements: asgiref, sqlparse, pytz, ...; sympy's spec: mpmath 1.3.0).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from swe_rl.harness.official import log_reader
from swe_rl.harness.seal import LAUNCHER, STAGED, SYMPY_LAUNCHER, Seal


@dataclass(frozen=True)
class Runner:
    name: str  # the seal's runner (harness/seal.py runner_of)
    script: list[str]  # the runner's command, as swebench's spec has it (the module goes last)
    parser: str
    launcher: str
    install: list[str]  # pip arguments for the venv


DJANGO = Runner(
    "unittest",
    ["tests/runtests.py", "--verbosity", "2", "--settings=test_sqlite", "--parallel", "1"],
    "parse_log_django",
    LAUNCHER,
    ["-e", "."],  # django itself, editable: its own requirements (pytz, backports...)
)
SYMPY = Runner("sympy", ["bin/test", "-C", "--verbose"], "parse_log_sympy", SYMPY_LAUNCHER, ["mpmath==1.3.0"])


def runner_of(tree: Path) -> Runner:
    if (tree / "tests" / "runtests.py").exists():
        return DJANGO
    if (tree / "bin" / "test").exists():
        return SYMPY
    raise SystemExit(f"{tree}: neither django's tests/runtests.py nor sympy's bin/test")


def prepare(tree: Path, python: str, runner: Runner) -> Path:
    """A venv for the tree (its requirements from PyPI), and the seal's modules staged in ``.git/swe-rl``."""
    venv = tree / ".venv-seal"
    if not (venv / "bin" / "python").exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        # PyPI as it is (a machine's pip.conf may pin releases for its own Python); an old Python's own pip
        # (3.6's is 18) cannot tell which releases still support it
        quiet = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
        subprocess.run([*pip, "-U", "pip"], check=True, env=quiet)
        subprocess.run([*pip, *runner.install], check=True, env=quiet, cwd=tree)
    scratch = _git_dir(tree) / "swe-rl"
    scratch.mkdir(parents=True, exist_ok=True)
    for name, text in STAGED.items():
        (scratch / name).write_text(text)
    return venv / "bin" / "python"


def _git_dir(tree: Path) -> Path:
    """``.git`` of the tree: a directory, or (a worktree) a file naming one; the seal's prefix is
    ``<tree>/.git/swe-rl/seal`` either way, so a worktree gets a directory of that name beside its file."""
    git = tree / ".git"
    if git.is_file():
        git = tree / ".git-seal"
    return git


def modules(tree: Path, runner: Runner) -> list[str]:
    if runner is SYMPY:
        return sorted(str(p.relative_to(tree)) for p in tree.glob("sympy/**/tests/test_*.py"))
    tests = tree / "tests"
    return sorted(
        p.name
        for p in tests.iterdir()
        if p.is_dir() and ((p / "tests.py").exists() or any(p.glob("test_*.py")))
    )


def run(
    tree: Path, python: Path, runner: Runner, module: str, seal: Seal | None, seed: int, limit: float
) -> tuple[str, float, bytes | None]:
    """One run's log, seconds and sealed results; raises ``subprocess.TimeoutExpired`` past ``limit``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    if runner is SYMPY:
        env.update(PYTHONHASHSEED=str(seed), PYTHONWARNINGS="ignore::UserWarning,ignore::SyntaxWarning")
    # sympy's runner draws a random seed for its randomized tests unless given one: both runs get the same
    script = [*runner.script, "--seed", str(seed)] if runner is SYMPY else runner.script
    command = [str(python), *script, module]
    prefix = _git_dir(tree) / "swe-rl" / "seal"
    if seal is not None:
        Path(f"{prefix}.key").write_text(json.dumps({"key": seal.key.decode(), "changed": []}))
        env["SWE_RL_SEAL"] = str(prefix)
        command = [str(python), str(prefix.parent / runner.launcher), *script, module]
        Path(f"{prefix}.out").unlink(missing_ok=True)
    start = time.monotonic()
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=limit)
    seconds = time.monotonic() - start
    out = Path(f"{prefix}.out") if seal is not None else None
    return done.stdout + done.stderr, seconds, out.read_bytes() if out is not None and out.exists() else None


def measure(
    tree: Path, python: Path, runner: Runner, module: str, seed: int, limit: float
) -> dict[str, object]:
    """A module's two runs compared; a module whose run passes ``limit`` is reported as timed out."""
    read = log_reader(runner.parser)
    seal = Seal.new(".git/swe-rl", runner=runner.name)
    try:
        plain_log, plain_s, _ = run(tree, python, runner, module, None, seed, limit)
        sealed_log, sealed_s, data = run(tree, python, runner, module, seal, seed, limit)
    except subprocess.TimeoutExpired:
        return {
            "module": module,
            "timed_out": limit,
            "tests": 0,
            "passing": 0,
            "seal": "not run",
            "unconfirmed": [],
            "trips": [],
            "verdicts_differ": [],
            "plain_s": 0.0,
            "sealed_s": 0.0,
        }
    plain, sealed = read(plain_log), read(sealed_log)
    passing = sorted(name for name, status in sealed.items() if status == "PASSED")
    check = seal.check(data, {"tests_status": {"PASS_TO_PASS": {"success": passing}}}, runner.parser)
    differ = sorted(n for n in set(plain) | set(sealed) if plain.get(n) != sealed.get(n))
    return {
        "module": module,
        "tests": len(sealed),
        "passing": len(passing),
        "seal": check.state,
        "unconfirmed": check.unconfirmed,
        "trips": check.trips,
        "verdicts_differ": differ,
        "plain_s": round(plain_s, 2),
        "sealed_s": round(sealed_s, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tree", type=Path, help="an unpacked Django source release, or a sympy checkout")
    parser.add_argument("--python", default=sys.executable, help="the interpreter the venv is made from")
    parser.add_argument("--modules", type=int, default=40, help="how many test modules to draw (0: all)")
    parser.add_argument("--seed", type=int, default=0, help="the draw's seed (and sympy's PYTHONHASHSEED)")
    parser.add_argument("--module-timeout", type=float, default=1800, help="seconds per run of a module")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    tree = args.tree.resolve()
    runner = runner_of(tree)
    python = prepare(tree, args.python, runner)
    found = modules(tree, runner)
    drawn = sorted(random.Random(args.seed).sample(found, args.modules)) if args.modules else found
    rows = []
    for index, module in enumerate(drawn, 1):
        row = measure(tree, python, runner, module, args.seed, args.module_timeout)
        rows.append(row)
        print(
            f"[{index}/{len(drawn)}] {module}: {row['passing']}/{row['tests']} passing, seal {row['seal']}, "
            f"{len(row['unconfirmed'])} unconfirmed, {len(row['verdicts_differ'])} differ, "  # type: ignore[arg-type]
            f"{row['plain_s']}s -> {row['sealed_s']}s",
            flush=True,
        )
    plain_s = sum(float(r["plain_s"]) for r in rows)  # type: ignore[arg-type]
    sealed_s = sum(float(r["sealed_s"]) for r in rows)  # type: ignore[arg-type]
    summary = {
        "tree": tree.name,
        "runner": runner.name,
        "python": subprocess.run([str(python), "-V"], capture_output=True, text=True).stdout.strip(),
        "draw": f"random.Random({args.seed}).sample of {len(drawn)} of {len(found)} test modules",
        "tests": sum(int(r["tests"]) for r in rows),  # type: ignore[call-overload]
        "passing": sum(int(r["passing"]) for r in rows),  # type: ignore[call-overload]
        "unconfirmed": sum(len(r["unconfirmed"]) for r in rows),  # type: ignore[arg-type]
        "modules_with_trips": sum(1 for r in rows if r["trips"]),
        "modules_timed_out": [r["module"] for r in rows if r.get("timed_out")],
        "verdicts_differ": sum(len(r["verdicts_differ"]) for r in rows),  # type: ignore[arg-type]
        "sealed_over_plain_time": round(sealed_s / plain_s, 3) if plain_s else None,
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "modules": rows}, indent=1) + "\n")
    return 0 if summary["unconfirmed"] == 0 and summary["verdicts_differ"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
