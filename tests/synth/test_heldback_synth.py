"""The held-back split on real synthesized tasks (builtin textkit, ns sandboxes): the old way, two
independent ``--split`` runs, shares functions and bug strings with the held-back set, which
bench/heldback_disjoint.py reports; one `tasks split` of both files is disjoint and deterministic."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.envs.cache import EnvCache
from swe_rl.synth import SynthOptions, synthesize

ROOT = Path(__file__).resolve().parents[2]
SWE_RL = [sys.executable, "-m", "swe_rl.cli.app"]
KINDS = {"warm": ("return_change", "stmt_delete", "cond_negate"), "rl": ("name_typo",)}
SIZES = {"warm": 8, "rl": 14}


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("heldback")
    for name, kinds in KINDS.items():
        options = SynthOptions(
            n=SIZES[name], seed=3, multi=0, difficulties=("one-line",), kinds=kinds, concurrency=2
        )
        factory = available_factory("ns")
        run = synthesize(
            ["builtin:textkit"],
            folder / f"{name}.jsonl",
            options=options,
            cache=EnvCache(),
            factory=factory,
            split={"train": 0.7, "test": 0.3},
        )
        asyncio.run(run)
    return folder


def check(folder: Path, held: str, *stages: str) -> subprocess.CompletedProcess[str]:
    args = [f"--stage={Path(s).stem}={folder / s}" for s in stages]
    script = str(ROOT / "bench" / "heldback_disjoint.py")
    cmd = [sys.executable, script, "--heldback", str(folder / held), *args, "--allow", "repositories"]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.ns
def test_two_independent_splits_overlap(synthesized):
    done = check(synthesized, "rl.test.jsonl", "warm.train.jsonl", "rl.train.jsonl")
    assert done.returncode == 1, done.stdout
    assert "warm.train shares functions" in done.stderr, "the warm start saw held-back functions"
    assert "rl.train shares bug strings" in done.stderr, "and GRPO the same misspellings"


@pytest.mark.ns
def test_one_split_is_disjoint_and_deterministic(synthesized):
    outs = []
    for n in (1, 2):
        out = synthesized / f"split{n}.jsonl"
        cmd = [
            *SWE_RL,
            "tasks",
            "split",
            "-s",
            str(synthesized / "warm.jsonl"),
            "-s",
            str(synthesized / "rl.jsonl"),
        ]
        cmd += ["-o", str(out), "--heldback", "0.3", "--seed", "3", "--heldback-kind", "name_typo"]
        subprocess.run(cmd, check=True, capture_output=True)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1], "same seed, same split, byte for byte"
    done = check(synthesized, "split1.heldback.jsonl", "split1.train.jsonl")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| split1.train |" in done.stdout and "| 0 | 0 | 0 |" in done.stdout
