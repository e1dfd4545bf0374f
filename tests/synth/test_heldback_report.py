"""bench/heldback_report.py on small fake run folders: both conventions counted by hand, the goal line with
its positive control (a gain only in unsubmitted episodes is not the goal), intervals clustered by function,
seed variance apart from evaluation noise, and the same files for the same inputs."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "heldback_report.py"
# an episode's outcome: resolved and submitted; resolved at the limit, not submitted; submitted, wrong;
# nothing; an infrastructure error
OUTCOMES = {
    "S": {"resolved": True, "patch_source": "submission", "exit_status": "submitted"},
    "D": {"resolved": True, "patch_source": "diff_fallback", "exit_status": "limits_exceeded"},
    "s": {"resolved": False, "patch_source": "submission", "exit_status": "submitted"},
    "n": {"resolved": False, "patch_source": "none", "exit_status": "limits_exceeded", "format_errors": 1},
    "E": {"resolved": False, "patch_source": "none", "exit_status": "infra_error", "error": "boom"},
}


def task(lib: str, func: str, i: int) -> dict:
    """A held-back task record with ``synth`` metadata shaped as `swe-rl tasks synth` writes it."""
    return {
        "instance_id": f"swe-rl-synth__{lib}-{func}{i:02d}",
        "repo": f"swe-rl-synth/{lib}",
        "synth": {
            "source": f"builtin:{lib}",
            "file": f"{lib}/core.py",
            "function": f"{lib}/core.py::{func}",
            "kinds": ["name_typo"],
            "difficulty": "one-line",
            "mutations": [
                {
                    "kind": "name_typo",
                    "path": f"{lib}/core.py",
                    "function": f"{lib}/core.py::{func}",
                    "line": 10 + i,
                    "end_line": 10 + i,
                    "description": f"name_typo: `data{i}` -> `daa{i}`",
                }
            ],
        },
    }


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def evaluation(tasks: list[dict], outcomes) -> list[dict]:
    """results.jsonl rows: ``outcomes`` is a string of OUTCOMES codes for every task, or a function of the
    task's function name giving one."""
    rows = []
    for t in tasks:
        codes = outcomes(t["synth"]["function"]) if callable(outcomes) else outcomes
        rows += [{"instance_id": t["instance_id"], "attempt": a, **OUTCOMES[c]} for a, c in enumerate(codes)]
    return rows


def write_eval(folder: Path, rows: list[dict], *, finished: bool = True) -> None:
    """An evaluation's folder as `swe-rl eval` leaves it: results.jsonl, and summary.json once it has finished."""
    write_jsonl(folder / "results.jsonl", rows)
    if finished:
        (folder / "summary.json").write_text("{}")


def make_run(w: Path, tasks: list[dict], before, seeds: dict) -> Path:
    write_jsonl(w / "heldback.jsonl", tasks)
    write_eval(w / "before-sampled", evaluation(tasks, before))
    for seed, after in seeds.items():
        write_eval(w / f"after-s{seed}-sampled", evaluation(tasks, after))
    return w


def report(w: Path, *args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(w), "--quiet", "--resamples", "400", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads((w / "results.json").read_text())


def four_functions() -> list[dict]:
    """Eight tasks, two in each of four functions of three libraries."""
    functions = (("inikit", "a"), ("inikit", "b"), ("statkit", "c"), ("textkit", "d"))
    return [task(lib, f, i) for lib, f in functions for i in range(2)]


def test_help_says_what_it_computes() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "cluster bootstrap over functions" in " ".join(proc.stdout.split())


def test_both_conventions_counted_by_hand(tmp_path: Path) -> None:
    tasks = four_functions()  # 8 tasks in 4 functions
    w = make_run(tmp_path, tasks, "Sn", {1: "SD", 2: "SS", 3: "Ss"})
    # an infrastructure error is left out of both conventions
    rows = [*evaluation(tasks, "SD"), {"instance_id": tasks[0]["instance_id"], "attempt": 2, **OUTCOMES["E"]}]
    write_eval(w / "after-s1-sampled", rows)
    write_eval(w / "before-greedy", evaluation(tasks[:4], "S") + evaluation(tasks[4:], "D"))
    write_eval(w / "after-s1-greedy", evaluation(tasks, "S"))
    out = report(w, "--resamples", "2000")  # enough draws that the 2.5 % tails are sure of their values

    assert out["heldback"] == {"tasks": 8, "functions": 4}
    before, after1 = out["evaluations"]["before-sampled"], out["evaluations"]["after-s1-sampled"]
    assert before["episodes"] == 16 and before["submitted"] == {"resolved": 8, "rate": 0.5}
    assert before["graded"] == {"resolved": 8, "rate": 0.5}
    assert before["submit_rate"] == 0.5 and before["format_error_rate"] == 0.5
    assert after1["episodes"] == 16 and after1["infra_errors"] == 1
    assert (
        after1["submitted"]["rate"] == 0.5
        and after1["graded"]["rate"] == 1.0
        and after1["submit_rate"] == 0.5
    )
    diffs = {
        s: (e["sampled"]["submitted"]["points"], e["sampled"]["graded"]["points"])
        for s, e in out["seeds"].items()
    }
    assert diffs == {"1": (0.0, 50.0), "2": (50.0, 50.0), "3": (0.0, 0.0)}
    assert out["seeds"]["2"]["sampled"]["submitted"]["paired"] == {
        "tasks": 8,
        "tasks_up": 8,
        "tasks_down": 0,
        "tasks_same": 0,
    }
    assert out["seeds"]["1"]["greedy"] == {
        "before": {"tasks": 8, "submitted": 4, "graded": 8},
        "after": {"tasks": 8, "submitted": 8, "graded": 8},
    }
    pool = out["pooled"]
    assert pool["seeds"] == 3
    assert pool["submitted"]["points"] == round(50 / 3, 2) and pool["graded"]["points"] == round(100 / 3, 2)
    assert (pool["submitted"]["seed_min"], pool["submitted"]["seed_max"]) == (0.0, 50.0)
    assert pool["submitted"]["seed_sd_points"] == round(statistics.stdev([0, 50, 0]), 2)
    # every function moves alike: no evaluation noise, and the seeds alone make the pooled interval
    assert pool["submitted"]["eval_noise_sd_points"] == 0.0
    assert pool["submitted"]["ci95_points"] == [0.0, 50.0]
    text = (w / "report.md").read_text()
    assert "Goal (>= 10 points submitted-only, pooled lower end > 0): **not met**" in text


def test_an_evaluation_still_going_is_in_no_difference(tmp_path: Path) -> None:
    """A seed's after-evaluation without summary.json (interrupted, or still running) is shown as unfinished and
    left out of the seed's difference, the pooled figures and the goal; once finished it counts (the control)."""
    tasks = four_functions()
    w = make_run(tmp_path, tasks, "Sn", {1: "SS"})
    write_eval(w / "after-s2-sampled", evaluation(tasks[:2], "nn"), finished=False)
    out = report(w)
    assert out["evaluations"]["after-s2-sampled"]["finished"] is False
    assert out["evaluations"]["after-s1-sampled"]["finished"] is True
    assert "2" not in out["seeds"] and out["pooled"]["seeds"] == 1
    assert "after-s2-sampled" not in next(iter(out["functions"].values()))["sampled"]
    assert (
        "| after-s2-sampled (unfinished: in no difference) | 4 (0 infra errors) |"
        in (w / "report.md").read_text()
    )
    (w / "after-s2-sampled" / "summary.json").write_text("{}")
    out = report(w)
    assert out["seeds"]["2"]["sampled"]["submitted"]["points"] == -50.0 and out["pooled"]["seeds"] == 2


def test_per_function_counts_by_hand(tmp_path: Path) -> None:
    """Each held-back function's episodes and resolved, per sampled evaluation, as the bootstrap sees them."""
    tasks = four_functions()  # two tasks in each function
    after = {"inikit/core.py::a": "SS", "inikit/core.py::b": "Ds", "statkit/core.py::c": "nE"}
    w = make_run(tmp_path, tasks, "Sn", {1: lambda f: after.get(f, "sn")})
    functions = report(w)["functions"]
    assert sorted(functions) == [
        "builtin:inikit:inikit/core.py:inikit/core.py::a",
        "builtin:inikit:inikit/core.py:inikit/core.py::b",
        "builtin:statkit:statkit/core.py:statkit/core.py::c",
        "builtin:textkit:textkit/core.py:textkit/core.py::d",
    ]
    got = {k.rsplit("::", 1)[1]: v for k, v in functions.items()}
    assert got["a"] == {
        "label": "inikit/core.py::a",  # synth's own name, not parsed out of the cluster key
        "tasks": 2,
        "sampled": {
            "before-sampled": {"episodes": 4, "submitted": 2, "graded": 2},
            "after-s1-sampled": {"episodes": 4, "submitted": 4, "graded": 4},
        },
    }
    assert got["b"]["sampled"]["after-s1-sampled"] == {"episodes": 4, "submitted": 0, "graded": 2}
    # the infrastructure error is no episode
    assert got["c"]["sampled"]["after-s1-sampled"] == {"episodes": 2, "submitted": 0, "graded": 0}
    assert got["d"]["sampled"]["after-s1-sampled"] == {"episodes": 4, "submitted": 0, "graded": 0}
    text = (w / "report.md").read_text()
    assert "| `inikit/core.py::b` | 2 | 2 / 2 of 4 | 0 / 2 of 4 |" in text


def test_submit_rate_per_grpo_step(tmp_path: Path) -> None:
    """Each GRPO run's training episodes, per step: the submit rate the reward convention acts on."""
    tasks = four_functions()
    w = make_run(tmp_path, tasks, "Sn", {1: "SD"})
    grpo = w / "grpo-s1"  # finished: summary.json written (final/, the model, is not kept in results)
    grpo.mkdir()
    (grpo / "summary.json").write_text(json.dumps({"steps": 2, "settings": {"unsubmitted": "unresolved"}}))
    steps = [{"step": 0, **OUTCOMES[c], "reward": 1.0 if c == "S" else -1.0} for c in "SsnD"]
    steps += [{"step": 1, **OUTCOMES[c], "reward": -1.0} for c in "snnE"]
    write_jsonl(grpo / "rollouts.jsonl", [{"instance_id": tasks[0]["instance_id"], **r} for r in steps])
    out = report(w)
    curve = out["grpo"]["1"]["curve"]
    assert [(p["step"], p["episodes"], p["submit_rate"]) for p in curve] == [(0, 4, 0.5), (1, 3, 0.3333)]
    assert [p["reward_mean"] for p in curve] == [-0.5, -1.0] and out["grpo"]["1"][
        "unsubmitted"
    ] == "unresolved"
    assert out["grpo"]["1"]["finished"] is True
    assert (
        "GRPO seed 1 (finished; unsubmitted episodes rewarded as: unresolved)"
        in (w / "report.md").read_text()
    )


def test_a_run_still_going_reports_its_settings_from_its_config(tmp_path: Path) -> None:
    """An unfinished GRPO run has no summary.json yet: the reward convention comes from its config.json (the
    control: with neither file, the report says it is not recorded)."""
    tasks = four_functions()
    w = make_run(tmp_path, tasks, "Sn", {1: "SD"})
    grpo = w / "grpo-s1"
    grpo.mkdir()
    rows = [{"step": 0, **OUTCOMES[c], "reward": -1.0} for c in "sn"]
    write_jsonl(grpo / "rollouts.jsonl", [{"instance_id": tasks[0]["instance_id"], **r} for r in rows])
    assert report(w)["grpo"]["1"]["unsubmitted"] is None
    assert (
        "GRPO seed 1 (not finished; unsubmitted episodes rewarded as: not recorded)"
        in (w / "report.md").read_text()
    )
    (grpo / "config.json").write_text(
        json.dumps({"kind": "rl", "settings": {"unsubmitted": "unresolved", "seed": 1}})
    )
    out = report(w)
    assert (out["grpo"]["1"]["unsubmitted"], out["grpo"]["1"]["seed"], out["grpo"]["1"]["finished"]) == (
        "unresolved",
        1,
        False,
    )
    assert (
        "GRPO seed 1 (not finished; unsubmitted episodes rewarded as: unresolved)"
        in (w / "report.md").read_text()
    )
    (w / "grpo-s2").mkdir()  # started, no step finished: said so, not an empty table
    (w / "grpo-s2" / "config.json").write_text(json.dumps({"kind": "rl", "settings": {"seed": 2}}))
    assert report(w)["grpo"]["2"]["curve"] == []
    text = (w / "report.md").read_text()
    assert (
        text.split("GRPO seed 2 (not finished", 1)[1].split("\n\n", 2)[1].strip()
        == "(no step has finished yet)"
    )


def test_a_gain_only_in_unsubmitted_episodes_is_not_the_goal(tmp_path: Path) -> None:
    """The positive control: graded at the limit rises by 50 points in every seed with an interval far from
    zero, submitted-only does not move; the goal (submitted-only) is not met. The same folder with the gain
    in submitted episodes meets it."""
    tasks = four_functions()
    out = report(make_run(tmp_path / "limit", tasks, "Sn", {1: "SD", 2: "SD", 3: "SD"}))
    graded, submitted = out["pooled"]["graded"], out["pooled"]["submitted"]
    assert graded["points"] == 50.0 and graded["ci95_points"][0] > 0
    assert submitted["points"] == 0.0
    assert out["goal"]["met"] is False and "not met" in out["goal"]["line"]
    assert any("< +10 points" in why for why in out["goal"]["reasons"])

    out = report(make_run(tmp_path / "submit", tasks, "Sn", {1: "SS", 2: "SS", 3: "SS"}))
    assert out["goal"]["met"] is True and "**met**" in out["goal"]["line"]
    out = report(make_run(tmp_path / "two", tasks, "Sn", {1: "SS", 2: "SS"}))
    assert out["goal"]["met"] is False and out["goal"]["reasons"] == ["2 seed(s), fewer than 3"]


def test_the_interval_is_clustered_by_function(tmp_path: Path) -> None:
    """Five functions, three tasks each: all tasks of a function move together (three functions to always
    resolved, two stay at never). Resampling functions sees 5 units, not 60 episodes: wider than the
    interval that takes episodes as independent."""
    tasks = [task("inikit", f, i) for f in "abcde" for i in range(3)]
    moved = {f"inikit/core.py::{f}" for f in "abc"}
    out = report(
        make_run(
            tmp_path, tasks, "nnnn", {s: lambda fn: "SSSS" if fn in moved else "nnnn" for s in (1, 2, 3)}
        )
    )
    seed = out["seeds"]["1"]["sampled"]["submitted"]
    assert seed["points"] == 60.0 and seed["paired"]["tasks_up"] == 9 and seed["paired"]["tasks_same"] == 6
    clustered, episodes = seed["ci95_points"], seed["ci95_points_episodes"]
    assert clustered[1] - clustered[0] > 2 * (episodes[1] - episodes[0])
    assert seed["bootstrap_sd_points"] > 15 and out["pooled"]["submitted"]["seed_sd_points"] == 0.0
    assert out["bootstrap"] == {"resamples": 400, "rng_seed": 0, "unit": "function"}


def test_same_inputs_same_files(tmp_path: Path) -> None:
    tasks = [task("inikit", f, i) for f in "abcde" for i in range(2)]
    w = make_run(
        tmp_path,
        tasks,
        lambda fn: "Snsn" if fn.endswith("a") else "nnsS",
        {1: lambda fn: "SSSS" if fn.endswith(("a", "b")) else "nnsn", 2: "Sn", 3: "DSsn"},
    )
    first = report(w)
    files = (w / "results.json").read_bytes(), (w / "report.md").read_bytes()
    assert report(w) == first and ((w / "results.json").read_bytes(), (w / "report.md").read_bytes()) == files
    assert report(w, "--rng-seed", "1")["seeds"]["1"]["sampled"] != first["seeds"]["1"]["sampled"]
