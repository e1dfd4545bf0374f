"""The seal of django's runner on django's own test suite: false positives and cost, measured outside the tree.

For a Django source release (its sdist holds ``tests/`` and ``tests/runtests.py``), a seeded random draw of
its test modules is run twice by the real runner, as swebench runs it (``--verbosity 2 --settings=test_sqlite
--parallel 1``): as it is, and under the seal's launcher (``insandbox/seal_unittest.py``) with a key of its own.
Each run's log is read by swebench's django parser; every test the sealed run's log passes must be confirmed
by its sealed results (``Seal.check``: what strict grading requires), and the two runs' verdicts must agree.
Nothing is patched: a test the seal does not confirm here is a false positive of strict grading.

    pip download --no-binary :all: --no-deps Django==5.0.14 && tar xzf Django-5.0.14.tar.gz
    python bench/seal_runners.py Django-5.0.14 --python /root/.pyenv/versions/3.11.7/bin/python3 \\
        --modules 40 --seed 0 --json bench/results/seal_django-5.0.json

Requires network access to PyPI once (the release's requirements: asgiref, sqlparse, pytz, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from swe_rl.harness.official import log_reader
from swe_rl.harness.seal import LAUNCHER, STAGED, Seal

RUNNER = ["tests/runtests.py", "--verbosity", "2", "--settings=test_sqlite", "--parallel", "1"]
PARSER = "parse_log_django"


def prepare(django: Path, python: str) -> Path:
    """A venv for the release (its requirements from PyPI; django itself the tree, installed editable)."""
    venv = django / ".venv-seal"
    if not (venv / "bin" / "python").exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        # PyPI as it is (a machine's pip.conf may pin releases for its own Python); an old Python's own pip
        # (3.6's is 18) cannot tell which releases still support it
        quiet = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
        subprocess.run([*pip, "-U", "pip"], check=True, env=quiet)
        subprocess.run(
            [*pip, "-e", str(django)], check=True, env=quiet
        )  # its own requirements (pytz, backports...)
    scratch = django / ".git" / "swe-rl"
    scratch.mkdir(parents=True, exist_ok=True)
    for name, text in STAGED.items():
        (scratch / name).write_text(text)
    return venv / "bin" / "python"


def modules(django: Path) -> list[str]:
    tests = django / "tests"
    return sorted(
        p.name
        for p in tests.iterdir()
        if p.is_dir() and ((p / "tests.py").exists() or any(p.glob("test_*.py")))
    )


def run(django: Path, python: Path, module: str, seal: Seal | None) -> tuple[str, float, bytes | None]:
    env = {**os.environ, "PYTHONPATH": str(django), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [str(python), *RUNNER, module]
    if seal is not None:
        key = django / f"{seal.prefix}.key"
        key.write_text(json.dumps({"key": seal.key.decode(), "changed": []}))
        env["SWE_RL_SEAL"] = str(django / seal.prefix)
        command = [str(python), f"{seal.scratch}/{LAUNCHER}", *RUNNER, module]
        (django / f"{seal.prefix}.out").unlink(missing_ok=True)
    start = time.monotonic()
    done = subprocess.run(command, cwd=django, env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.monotonic() - start
    out = django / f"{seal.prefix}.out" if seal is not None else None
    return done.stdout + done.stderr, seconds, out.read_bytes() if out is not None and out.exists() else None


def measure(django: Path, python: Path, module: str) -> dict[str, object]:
    read = log_reader(PARSER)
    plain_log, plain_s, _ = run(django, python, module, None)
    seal = Seal.new(".git/swe-rl", runner="unittest")
    sealed_log, sealed_s, data = run(django, python, module, seal)
    plain, sealed = read(plain_log), read(sealed_log)
    passing = sorted(name for name, status in sealed.items() if status == "PASSED")
    check = seal.check(data, {"tests_status": {"PASS_TO_PASS": {"success": passing}}}, PARSER)
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
    parser.add_argument("django", type=Path, help="an unpacked Django source release")
    parser.add_argument("--python", default=sys.executable, help="the interpreter the venv is made from")
    parser.add_argument("--modules", type=int, default=40, help="how many test modules to draw (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    django = args.django.resolve()
    python = prepare(django, args.python)
    found = modules(django)
    drawn = sorted(random.Random(args.seed).sample(found, args.modules)) if args.modules else found
    rows = []
    for index, module in enumerate(drawn, 1):
        row = measure(django, python, module)
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
        "django": django.name,
        "python": subprocess.run([str(python), "-V"], capture_output=True, text=True).stdout.strip(),
        "draw": f"random.Random({args.seed}).sample of {len(drawn)} of {len(found)} test modules",
        "tests": sum(int(r["tests"]) for r in rows),  # type: ignore[call-overload]
        "passing": sum(int(r["passing"]) for r in rows),  # type: ignore[call-overload]
        "unconfirmed": sum(len(r["unconfirmed"]) for r in rows),  # type: ignore[arg-type]
        "modules_with_trips": sum(1 for r in rows if r["trips"]),
        "verdicts_differ": sum(len(r["verdicts_differ"]) for r in rows),  # type: ignore[arg-type]
        "sealed_over_plain_time": round(sealed_s / plain_s, 3) if plain_s else None,
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "modules": rows}, indent=1) + "\n")
    return 0 if summary["unconfirmed"] == 0 and summary["verdicts_differ"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
