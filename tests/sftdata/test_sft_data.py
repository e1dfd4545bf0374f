"""SFT data from real eval runs and from public sets in the SWE-smith trajectories schema."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from tests.conftest import available_factory

from swe_rl.agent.config import load_agent_config
from swe_rl.harness.grade_patch import grade_patch
from swe_rl.llm.base import Message, SamplingParams
from swe_rl.llm.oracle import scripted_for
from swe_rl.runs.evaluation import Attempts, EvalSettings, run_eval
from swe_rl.sftdata.from_runs import SFTFilters, candidates_from_run, sft_from_runs
from swe_rl.sftdata.trajsets import convert_row, public_candidates, read_rows

pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tasks, envs) -> dict[str, Path]:
    """An oracle run (2 samples per task: duplicates) and a run that never submits, on real sandboxes."""
    import asyncio

    root = tmp_path_factory.mktemp("sft-runs")
    out = {}
    for name, kind, n, step_limit in (("oracle", "oracle", 2, None), ("never", "never-submit", 1, 2)):
        settings = EvalSettings(output_dir=root / name, max_concurrent=2, n_samples=n)
        asyncio.run(
            run_eval(
                tasks[:3],
                Attempts.here(
                    lambda t, kind=kind: scripted_for(kind, t),
                    envs,
                    available_factory("ns"),
                    load_agent_config(step_limit=step_limit),
                ),
                SamplingParams(),
                settings,
                quiet=True,
            )
        )
        out[name] = root / name
    return out


def _damage(run: Path, dest: Path) -> dict[str, str]:
    """A copy of the run with every kind of bad input; returns what was done to which instance."""
    shutil.copytree(run, dest)
    results = [json.loads(x) for x in (dest / "results.jsonl").read_text().splitlines()]
    for r in results:  # the copy's artifacts live in the copy
        r["artifacts"] = str(dest / Path(r["artifacts"]).name)
    first, second, third = results[0], results[1], results[2]
    (Path(first["artifacts"]) / "traj.json").write_text('{"instance_id": "x", "steps": [ {')  # corrupt
    (Path(second["artifacts"]) / "traj.json").unlink()  # half-written: artifacts without traj.json
    lines = [json.dumps(r) for r in results if r is not third]  # third: artifacts but no verdict line
    lines.append('{"instance_id": "torn", "resol')  # a torn last line
    (dest / "results.jsonl").write_text("\n".join(lines) + "\n")
    return {"corrupt": first["artifacts"], "missing": second["artifacts"], "no verdict": third["artifacts"]}


@pytest.mark.ns
def test_oracle_run_becomes_sft_data_and_bad_input_is_counted(runs, tmp_path):
    damaged = tmp_path / "damaged"
    _damage(runs["oracle"], damaged)
    found, bad = candidates_from_run(damaged)
    assert bad == Counter(
        {
            "corrupt traj.json": 1,
            "missing traj.json": 1,
            "no verdict (no results.jsonl line)": 1,
            "corrupt results.jsonl line": 1,
        }
    )
    assert len(found) == 3 and all(c.resolved for c in found)

    out = tmp_path / "sft"
    card = sft_from_runs([runs["oracle"], runs["never"], damaged], out, tokenizer="qwen")
    skipped = card.skipped
    assert skipped["duplicate"] == 3 + 3, "two samples per task of a scripted oracle repeat each other"
    assert skipped["not resolved"] == 3
    assert skipped["corrupt traj.json"] == 1 and skipped["no verdict (no results.jsonl line)"] == 1
    assert card.counts["trajectories_kept"] == 3 and card.counts["instances"] == 3
    assert card.counts["unreadable"] == 4
    chat = [json.loads(x) for x in (out / "chat.jsonl").read_text().splitlines()]
    assert len(chat) == 3 and all(row["messages"][-1]["role"] == "assistant" for row in chat)
    assert all("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in row["messages"][-1]["content"] for row in chat)
    rows = [json.loads(x) for x in (out / "tokenized.jsonl").read_text().splitlines()]
    assert len(rows) == card.counts["examples"] == 3, "ChatML: one merged example per trajectory"
    assert all(len(r["input_ids"]) == len(r["assistant_masks"]) for r in rows)
    assert sum(sum(r["assistant_masks"]) for r in rows) == card.counts["trained_tokens"] > 0
    on_disk = json.loads((out / "data_card.json").read_text())
    assert on_disk["skipped"] == card.skipped and on_disk["sources"][0] == str(runs["oracle"])


@pytest.mark.ns
def test_filters(runs, tmp_path):
    keep_all = SFTFilters(resolved_only=False, drop_truncated=False, dedupe=False)
    card = sft_from_runs([runs["oracle"], runs["never"]], tmp_path / "a", filters=keep_all, tokenizer=None)
    assert card.counts["trajectories_kept"] == 9 and "tokenized" not in card.files
    card = sft_from_runs(
        [runs["oracle"], runs["never"]],
        tmp_path / "b",
        filters=SFTFilters(resolved_only=False, dedupe=False, per_instance=1),
        tokenizer=None,
    )
    assert card.skipped == {"did not submit (limits_exceeded)": 3, "more than 1 per instance": 3}
    card = sft_from_runs([runs["oracle"]], tmp_path / "c", filters=SFTFilters(max_steps=2), tokenizer=None)
    assert card.skipped == {"more than 2 steps": 6}
    card = sft_from_runs([runs["oracle"]], tmp_path / "d", filters=SFTFilters(max_tokens=50))
    assert card.skipped == {"more than 50 tokens": 3, "duplicate": 3}


@pytest.mark.ns
def test_cli_writes_the_data_card(runs, tmp_path):
    args = ["data", "sft", str(runs["oracle"]), "-o", str(tmp_path / "o"), "--per-turn", "--thinking", "off"]
    proc = subprocess.run(
        [sys.executable, "-m", "swe_rl.cli.app", *args],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    card = json.loads((tmp_path / "o" / "data_card.json").read_text())
    assert card["template_kwargs"] == {"enable_thinking": False} and card["counts"]["examples"] == 9
    assert "skipped 3: duplicate" in proc.stderr


# ---- public sets in the SWE-smith trajectories schema -------------------------------------------------

SWE_AGENT_SYSTEM = "You are a helpful assistant that can interact with a computer to solve tasks."


def _edit_of(patch: str) -> tuple[str, str, str]:
    """(path, old, new) of a one-hunk unified diff."""
    path = next(line[6:] for line in patch.splitlines() if line.startswith("+++ b/"))
    body = patch.split("\n@@", 1)[1].split("\n", 1)[1]
    old = [line[1:] for line in body.splitlines() if line[:1] in (" ", "-")]
    new = [line[1:] for line in body.splitlines() if line[:1] in (" ", "+")]
    return path, "\n".join(old), "\n".join(new)


def _row(split: str, task, resolved: bool = True) -> dict:
    """One trajectory written as SWE-agent writes each split: look, view, edit, test, submit."""
    path, old, new = _edit_of(task.patch)
    calls = [
        ("Let me look around.", "bash", {"command": "ls"}),
        ("Let me read the file.", "str_replace_editor", {"command": "view", "path": f"/testbed/{path}"}),
        (
            "Fix the comparison.",
            "str_replace_editor",
            {"command": "str_replace", "path": f"/testbed/{path}", "old_str": old, "new_str": new},
        ),
        ("Run the tests.", "bash", {"command": "python -m pytest -q"}),
        ("Done.", "submit", {}),
    ]
    messages: list[dict] = [
        {"role": "system", "content": SWE_AGENT_SYSTEM},
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": f"<uploaded_files>\n/testbed\n</uploaded_files>\n<pr_description>\n{task.problem_statement}\n</pr_description>\nPlease fix it.",
                }
            ],
        },
    ]
    for thought, name, args in calls:
        if split == "tool":
            call = {"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            messages.append(
                {"role": "assistant", "content": thought, "thought": thought, "tool_calls": [call]}
            )
            messages.append(
                {
                    "role": "tool",
                    "content": [{"type": "text", "text": "OBSERVATION:\nok"}],
                    "tool_call_ids": ["c"],
                }
            )
            continue
        if split == "xml":
            params = "".join(
                f"<parameter={k}>\n{v}\n</parameter>"
                if k in ("old_str", "new_str")
                else f"<parameter={k}>{v}</parameter>"
                for k, v in args.items()
            )
            content = f"{thought}\n\n<function={name}>\n{params}\n</function>"
        else:  # ticks
            import shlex

            if name == "bash":
                line = args["command"]
            elif name == "submit":
                line = "submit"
            else:
                line = f"str_replace_editor {args['command']} {args['path']}"
                for k in ("old_str", "new_str"):
                    if k in args:
                        line += f" --{k} {shlex.quote(args[k])}"
            content = f"{thought}\n\n```\n{line}\n```"
        messages.append({"role": "assistant", "content": content})
        messages.append({"role": "user", "content": "OBSERVATION:\nok"})
    return {
        "messages": json.dumps(messages),
        "instance_id": task.instance_id,
        "resolved": resolved,
        "model": "claude-3-7-sonnet-20250219",
        "traj_id": f"{task.instance_id}.{split}",
        "patch": task.patch,
    }


@pytest.mark.ns
@pytest.mark.parametrize("split", ["xml", "tool", "ticks"])
async def test_public_rows_convert_and_the_rewritten_edit_resolves(split, task_by_id, envs):
    task = task_by_id["swe-rl-builtin__textkit-3"]
    messages, marks = convert_row(_row(split, task), load_agent_config())
    assert marks == Counter({"exact": 3, "approximate": 1, "rewritten": 1})
    config = load_agent_config()
    assert messages[0] == Message(role="system", content=config.system_template)
    assert task.problem_statement.strip() in messages[1].content and "<task>" in messages[1].content
    assistant = [m.content for m in messages if m.role == "assistant"]
    from swe_rl.agent.actions import bash_blocks

    commands = [bash_blocks(text) for text in assistant]
    assert all(len(c) == 1 for c in commands) and all(text.startswith("THOUGHT: ") for text in assistant)
    assert commands[0] == ["ls"] and "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in commands[-1][0]
    # the rewritten edit does to the file exactly what the editor did: run it in a real sandbox and grade
    env = envs.ensure(task)
    factory = available_factory("ns")
    async with await factory.create(env) as box:
        result = await box.exec(commands[2][0], timeout=60)
        assert result.returncode == 0, result.output
        patch = await box.diff()
    verdict = await grade_patch(task, patch, factory, env, timeout=300)
    assert verdict.resolved


def _write_sets(tmp_path: Path, tasks) -> dict[str, Path]:
    """The three splits as local files, one as an HF-layout dataset directory of parquet shards."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = {
        s: [_row(s, t, resolved=i != 1) for i, t in enumerate(tasks[8:11])] for s in ("xml", "tool", "ticks")
    }
    rows["xml"].append({"messages": "[not json", "instance_id": "a__b-1", "resolved": True})
    rows["xml"].append({"messages": "[]", "instance_id": "a__b-2"})  # no verdict
    files = {}
    for split, split_rows in rows.items():
        path = tmp_path / f"{split}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in split_rows))
        files[split] = path
    hub = tmp_path / "hub" / "data"
    hub.mkdir(parents=True)
    for split in ("tool", "ticks"):
        pq.write_table(pa.Table.from_pylist(rows[split]), hub / f"{split}-00000-of-00001.parquet")
    files["hub"] = hub.parent
    return files


def test_public_sets_become_sft_data_with_marks_and_reasons(tmp_path, tasks):
    files = _write_sets(tmp_path, tasks)
    config = load_agent_config()
    unreadable: Counter[str] = Counter()
    candidates = list(public_candidates(str(files["xml"]), config, unreadable))
    assert unreadable == Counter({"corrupt trajectory row": 1, "trajectory row without a verdict": 1})
    assert [c.skip_reason for c in candidates] == [None] * 3
    strict = list(public_candidates(str(files["xml"]), config, Counter(), keep="rewritten"))
    assert {c.skip_reason for c in strict} == {"approximate actions (import keeps rewritten)"}
    assert strict[0].metadata["actions"] == {"exact": 3, "rewritten": 1, "approximate": 1, "unconvertible": 0}

    hub_rows = list(read_rows(str(files["hub"]), "ticks"))  # the real HF loader on a local dataset layout
    assert len(hub_rows) == 3 and hub_rows[0]["traj_id"].endswith(".ticks")
    extra = [
        c for split in ("tool",) for c in public_candidates(str(files["hub"]), config, Counter(), split=split)
    ]
    card = sft_from_runs(
        [],
        tmp_path / "sft",
        extra=[*candidates, *extra],
        extra_sources=[str(files["xml"])],
        unreadable=unreadable,
    )
    # xml and tool rows of the same trajectory convert to the same conversation: deduplicated
    assert card.skipped == {
        "corrupt trajectory row": 1,
        "trajectory row without a verdict": 1,
        "not resolved": 2,
        "duplicate": 2,
    }
    assert card.counts["trajectories_kept"] == 2
