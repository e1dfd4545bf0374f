"""Public trajectory sets in the SWE-smith trajectories schema, converted to swe-rl's one-bash-block protocol.

A row: ``{"messages": <JSON string or list>, "instance_id", "resolved", "model", "traj_id", "patch"}``. Its
split says how the assistant wrote actions: ``tool`` (OpenAI ``tool_calls``), ``xml``
(``<function=NAME><parameter=K>V</parameter></function>`` in the text) or ``ticks`` (a fenced command line,
SWE-agent's thought-action format). Their tools are ``bash``, ``str_replace_editor`` and ``submit``.

Every action is converted and marked:

* ``exact``: the same command (``bash``), or our submit command for ``submit``;
* ``rewritten``: an edit (``create``, ``str_replace``, ``insert``) as a python heredoc with the same effect
  on the file; only its output differs from the editor's;
* ``approximate``: ``view`` as ``cat -n`` / ``sed -n`` / ``find``: the recorded observation is the editor's;
* ``unconvertible``: anything else (``undo_edit``, several calls in one turn, no action).

A trajectory is kept when its worst mark is within ``keep`` (default ``approximate``: every action is a
valid command of our protocol; ``exact`` or ``rewritten`` are stricter); the rest are skipped with the
reason in the data card, and each kept one carries its marks in ``metadata.actions``. The system prompt and the first user message become swe-rl's own (the
problem statement is taken from ``<pr_description>``) unless ``own_prompts=False``.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from swe_rl.agent.config import AgentConfig
from swe_rl.errors import ConfigError
from swe_rl.llm.base import Message
from swe_rl.llm.scripted import SUBMIT
from swe_rl.sftdata.from_runs import Candidate

Mark = Literal["exact", "rewritten", "approximate", "unconvertible"]
MARKS: tuple[Mark, ...] = ("exact", "rewritten", "approximate", "unconvertible")
_XML_CALL = re.compile(r"<function=([\w.-]+)>(.*?)</function>", re.DOTALL)
_XML_PARAM = re.compile(r"<parameter=([\w.-]+)>(.*?)</parameter>", re.DOTALL)
_FENCE = re.compile(r"```[\w-]*[ \t]*\n(.*?)```", re.DOTALL)
_PR = re.compile(r"<pr_description>\s*(.*?)\s*</pr_description>", re.DOTALL)


def _text(content: Any) -> str:
    """Message content as text (SWE-agent stores some as a list of {"type": "text", "text": ...})."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _heredoc(script: str) -> str:
    tag = "SWE_RL_EDIT"
    while tag in script:
        tag += "_"
    return f"python3 - <<'{tag}'\n{script}\n{tag}"


def _editor(args: dict[str, Any]) -> tuple[str | None, Mark]:
    """``str_replace_editor`` arguments -> (bash command, mark)."""
    command, path = args.get("command"), args.get("path")
    if not isinstance(path, str) or not path:
        return None, "unconvertible"
    p = f"pathlib.Path({path!r})"
    if command == "create" and isinstance(args.get("file_text"), str):
        return _heredoc(f"import pathlib\n{p}.write_text({args['file_text']!r})"), "rewritten"
    if command == "str_replace" and isinstance(args.get("old_str"), str):
        old, new = args["old_str"], args.get("new_str") or ""
        script = (
            f"import pathlib, sys\np = {p}\ns = p.read_text()\nn = s.count({old!r})\n"
            f"if n != 1:\n    sys.exit(f'old_str occurs {{n}} times in {path}, not once')\n"
            f"p.write_text(s.replace({old!r}, {new!r}, 1))"
        )
        return _heredoc(script), "rewritten"
    if command == "insert" and args.get("insert_line") is not None and isinstance(args.get("new_str"), str):
        line = int(args["insert_line"])
        text = args["new_str"] if args["new_str"].endswith("\n") else args["new_str"] + "\n"
        script = (
            f"import pathlib\np = {p}\nlines = p.read_text().splitlines(keepends=True)\n"
            f"lines[{line}:{line}] = [{text!r}]\np.write_text(''.join(lines))"
        )
        return _heredoc(script), "rewritten"
    if command == "view":
        rng = args.get("view_range")
        if isinstance(rng, list) and len(rng) == 2:
            end = "$" if int(rng[1]) == -1 else int(rng[1])
            return f"cat -n {shlex.quote(path)} | sed -n '{int(rng[0])},{end}p'", "approximate"
        return (
            f"if [ -d {shlex.quote(path)} ]; then find {shlex.quote(path)} -maxdepth 2 -not -path '*/.*'; "
            f"else cat -n {shlex.quote(path)}; fi",
            "approximate",
        )
    return None, "unconvertible"


def convert_call(name: str, args: dict[str, Any]) -> tuple[str | None, Mark]:
    """One tool call -> (bash command, mark)."""
    if name == "bash" and isinstance(args.get("command"), str):
        return args["command"], "exact"
    if name == "submit":
        return SUBMIT, "exact"
    if name == "str_replace_editor":
        return _editor(args)
    return None, "unconvertible"


def _ticks_call(line: str) -> tuple[str, dict[str, Any]]:
    """A thought-action command line -> (tool, arguments); anything not an editor or submit is bash."""
    stripped = line.strip()
    if stripped == "submit":
        return "submit", {}
    if not stripped.startswith("str_replace_editor "):
        return "bash", {"command": stripped}
    try:
        words = shlex.split(stripped)
    except ValueError:
        return "unparsable", {}
    args: dict[str, Any] = {"command": words[1] if len(words) > 1 else None}
    args["path"] = words[2] if len(words) > 2 else None
    rest = words[3:]
    for flag, value in zip(rest[::2], rest[1::2], strict=False):
        key = flag.lstrip("-")
        if key == "view_range":
            args[key] = [int(x) for x in value.strip("[]").replace(",", " ").split()]
        elif key == "insert_line":
            args[key] = int(value)
        else:
            args[key] = value
    return "str_replace_editor", args


def _calls(message: dict[str, Any]) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """(thought, tool calls) of an assistant message in any of the three formats."""
    content = _text(message.get("content"))
    if message.get("tool_calls"):
        calls = []
        for call in message["tool_calls"]:
            fn = call.get("function") or {}
            raw = fn.get("arguments") or "{}"
            try:
                args = json.loads(raw) if isinstance(raw, str) else dict(raw)
            except ValueError:
                args = {}
            calls.append((str(fn.get("name")), args if isinstance(args, dict) else {}))
        return _text(message.get("thought")) or content, calls
    xml = list(_XML_CALL.finditer(content))
    if xml:
        calls = [(m.group(1), {k: _xml_value(k, v) for k, v in _XML_PARAM.findall(m.group(2))}) for m in xml]
        return content[: xml[0].start()], calls
    fences = list(_FENCE.finditer(content))
    if fences:
        return content[: fences[-1].start()], [_ticks_call(fences[-1].group(1))]
    return content, []


def _xml_value(key: str, value: str) -> Any:
    if key in ("old_str", "new_str", "file_text") and value.startswith("\n") and value.endswith("\n"):
        value = value[1:-1]  # the xml format wraps these in newlines
    if key == "view_range":
        try:
            return json.loads(value)
        except ValueError:
            return value
    if key == "insert_line" and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def convert_assistant(message: dict[str, Any]) -> tuple[str, Mark]:
    """An assistant message as THOUGHT + one ```bash block, with its mark."""
    thought, calls = _calls(message)
    thought = thought.strip() or "Next step."
    if len(calls) != 1:
        return thought, "unconvertible"
    command, mark = convert_call(*calls[0])
    if command is None:
        return thought, "unconvertible"
    if not thought.upper().startswith("THOUGHT"):
        thought = f"THOUGHT: {thought}"
    return f"{thought}\n\n```bash\n{command}\n```", mark


def convert_row(
    row: dict[str, Any], config: AgentConfig, *, own_prompts: bool = True
) -> tuple[list[Message], Counter[Mark]]:
    """A dataset row's conversation in swe-rl's protocol, and how many actions got each mark."""
    raw = row.get("messages")
    messages = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ValueError("messages is not a list of objects")
    marks: Counter[Mark] = Counter()
    out: list[Message] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "assistant":
            text, mark = convert_assistant(m)
            marks[mark] += 1
            out.append(Message(role="assistant", content=text))
        elif role == "system":
            out.append(
                Message(role="system", content=config.system_template if own_prompts else _text(m["content"]))
            )
        elif role in ("user", "tool"):
            text = _text(m.get("content"))
            if own_prompts and i <= 1 and (pr := _PR.search(text)):
                text = config.render(
                    config.instance_template, task={"problem_statement": pr.group(1)}, workdir="/testbed"
                )
            if out and out[-1].role == "user":  # several tool results in a row: one observation
                out[-1] = Message(role="user", content=out[-1].content + "\n" + text)
            else:
                out.append(Message(role="user", content=text))
        else:
            raise ValueError(f"unknown role {role!r}")
    if own_prompts and (not out or out[0].role != "system"):
        out.insert(0, Message(role="system", content=config.system_template))
    return out, marks


def read_rows(source: str, split: str | None = None) -> Iterator[dict[str, Any]]:
    """Rows of a local .jsonl/.json/.parquet file, or of an HF dataset (``owner/name`` or a local copy of its
    repository, ``data/<split>-*.parquet``) read by ``datasets.load_dataset`` (``split`` required)."""
    path = Path(source)
    if path.is_file():
        if path.suffix == ".parquet":
            try:
                import pyarrow.parquet as pq
            except ImportError as exc:
                from swe_rl.errors import MissingExtraError

                raise MissingExtraError(exc.name or "pyarrow", "data", "parquet trajectory files") from None
            yield from pq.read_table(path).to_pylist()
            return
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            data = json.loads(text)
            yield from data if isinstance(data, list) else [data]
            return
        for line in text.splitlines():
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError:
                    yield {"__corrupt__": True}
        return
    if not path.is_dir() and ("/" not in source or source.startswith((".", "/"))):
        raise ConfigError(f"no such trajectory file: {source}")
    try:
        from datasets import load_dataset
    except ImportError as exc:
        from swe_rl.errors import MissingExtraError

        raise MissingExtraError(exc.name or "datasets", "data", "HF trajectory datasets") from None
    if split is None:
        raise ConfigError(f"{source}: name the split (--split xml, tool or ticks)")
    yield from load_dataset(source, split=split)


def public_candidates(
    source: str,
    config: AgentConfig,
    unreadable: Counter[str],
    *,
    split: str | None = None,
    keep: Mark = "approximate",
    own_prompts: bool = True,
) -> Iterable[Candidate]:
    """Candidates from a SWE-smith-schema source; bad rows and unkept conversions counted, not raised."""
    allowed = set(MARKS[: MARKS.index(keep) + 1]) - {"unconvertible"}
    for n, row in enumerate(read_rows(source, split)):
        instance = row.get("instance_id")
        if row.get("__corrupt__"):
            unreadable["corrupt trajectory row"] += 1
            continue
        if not isinstance(instance, str) or not instance:
            unreadable["trajectory row without instance_id"] += 1
            continue
        if not isinstance(row.get("resolved"), bool):
            unreadable["trajectory row without a verdict"] += 1
            continue
        try:
            messages, marks = convert_row(row, config, own_prompts=own_prompts)
        except (ValueError, KeyError, TypeError):
            unreadable["corrupt trajectory row"] += 1
            continue
        worst = max((MARKS.index(m) for m in marks), default=3)
        yield Candidate(
            instance_id=instance,
            source=f"{Path(source).name if Path(source).is_file() else source}:{split or ''}:{n}",
            messages=messages,
            resolved=row["resolved"],
            n_steps=sum(marks.values()),
            format_errors=0,
            skip_reason=None if MARKS[worst] in allowed else f"{MARKS[worst]} actions (import keeps {keep})",
            metadata={
                "model": row.get("model"),
                "traj_id": row.get("traj_id"),
                "split": split,
                "actions": {m: marks[m] for m in MARKS},
            },
        )
