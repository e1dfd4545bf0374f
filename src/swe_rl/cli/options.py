"""Options and helpers shared by the commands."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import types
import typing
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer

if TYPE_CHECKING:
    from pydantic import BaseModel

T = TypeVar("T")
M = TypeVar("M", bound="BaseModel")

SourceOpt = Annotated[
    str,
    typer.Option(
        "--tasks",
        "-s",
        help="Tasks: 'builtin', 'builtin:<library>', a .json/.jsonl/.parquet file, or an HF dataset 'owner/name[:split]'.",
    ),
]
InstancesOpt = Annotated[
    list[str] | None, typer.Option("--instance", "-i", help="Only these instance ids (repeatable).")
]
BackendOpt = Annotated[
    str,
    typer.Option(
        "--backend", "-b", help="Sandbox backend: auto (ns where it can run, else local), ns, docker, local."
    ),
]
CacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        help="Environment cache root (default: $SWE_RL_CACHE/envs, else ~/.cache/swe-rl/envs); "
        "uv's package cache is its uv-cache/ unless UV_CACHE_DIR is set.",
    ),
]
RepoCacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--repo-cache", help="Directory of bare mirrors (<owner>/<name>.git) to build testbeds from."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
ConcurrencyOpt = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Tasks worked on at once.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", min=1, help="Seconds allowed for one test run.")]
GradingOpt = Annotated[
    Literal["official", "strict"],
    typer.Option(
        "--grading",
        help="official: the SWE-bench harness's verdict, files that steer the test run flagged; strict: a pass "
        "the code under test cannot produce (those files reverted, each test's outcome checked by the runner's "
        "seal, a run it cannot check unverifiable; training's rule, docs/SECURITY.md).",
    ),
]
TopPOpt = Annotated[
    float,
    typer.Option(
        "--top-p",
        max=1.0,
        help="Nucleus sampling: draw from the smallest set of tokens holding this much probability (> 0; 1: all).",
    ),
]


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def sigterm_interrupts() -> None:
    """From now on SIGTERM unwinds the command as Ctrl-C does (KeyboardInterrupt): its sandboxes close and
    what it keeps on an interruption (a state file, a staging folder removed) is kept or removed as it says."""
    import signal

    def _terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)


def pool_token() -> str | None:
    """The bearer token of a pool or rollout server this command calls: ``$SWE_RL_TOKEN``."""
    from swe_rl.paths import Settings

    return Settings.read().token


def resolve_backend(name: str) -> str:
    """'auto' -> the best backend this machine can run, saying so when it falls back."""
    if name != "auto":
        return name
    from swe_rl.sandbox import BACKENDS

    if "ns" in BACKENDS:
        from swe_rl.sandbox.ns import ns_unavailable_reason

        reason = ns_unavailable_reason()
        if reason is None:
            return "ns"
        note(f"ns sandbox backend unavailable ({reason}); falling back to the local backend (no isolation)")
    return "local"


def writable_dir(path: Path, option: str = "--output-dir") -> Path:
    """``path``, a directory a command may write into; ConfigError before any work when it, or a folder above
    it, is a file (else the first write, minutes in, was a traceback)."""
    _not_under_a_file(path, option)
    if path.exists() and not path.is_dir():
        raise _not_a(path, option, "is a file, not a directory")
    return path


def writable_file(path: Path, option: str = "--out") -> Path:
    """``path``, a file a command may write; ConfigError before any work when it is a directory, or a
    folder above it is a file."""
    _not_under_a_file(path, option)
    if path.is_dir():
        raise _not_a(path, option, "is a directory: give the file to write")
    return path


def _not_under_a_file(path: Path, option: str) -> None:
    above = next((p for p in path.absolute().parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise _not_a(path, option, f"is under {above}, a file")


def _not_a(path: Path, option: str, says: str) -> Exception:
    from swe_rl.errors import ConfigError

    return ConfigError(f"{option} {path} {says}")


def env_cache(cache_dir: Path | None, repo_cache: Path | None) -> Any:
    from swe_rl.envs.cache import EnvCache

    return EnvCache(cache_dir, repo_cache=repo_cache)


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


def json_alone(json_out: bool) -> contextlib.AbstractContextManager[Any]:
    """With ``--json``, what the body prints (a trainer's progress and log dicts) goes to stderr, so that
    stdout is the JSON alone; without it, nothing changes."""
    return contextlib.redirect_stdout(sys.stderr) if json_out else contextlib.nullcontext()


def console():  # type: ignore[no-untyped-def]
    """A rich console; wide when output is not a terminal (logs, CI), so tables are not squeezed."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200)


def config_option(example: str) -> Any:
    """The ``-c`` option of a command with settings; ``example``: an item those settings accept."""
    return typer.Option(
        "--config",
        "-c",
        help="Any field of the command's settings, applied after the options: a YAML file of them, or KEY=VALUE "
        f"(VALUE read as YAML; KEY.SUB sets one entry of a mapping, at any depth), e.g. -c {example}. Repeatable; later "
        "ones win.",
    )


def with_overrides(settings: M, items: list[str] | None) -> M:
    """``settings`` with ``-c`` files and KEY=VALUE items applied (recorded in its ``args``, if it has them).

    ConfigError for a file that is not a YAML mapping or a key the settings do not have; a value the field
    refuses is pydantic's error, which the entry point prints as one line.
    """
    from swe_rl.errors import ConfigError

    if not items:
        return settings
    model = type(settings)
    data = settings.model_dump()
    for item in items:
        for key, value in _override_items(item).items():
            *path, last = key.split(".")
            _check_known(model, (*path, last), value, item)
            node = data
            for depth, name in enumerate(path):
                if node.get(name) is None:  # a settings model left unset: this entry over its defaults
                    node[name] = {}
                if not isinstance(node[name], dict):
                    raise ConfigError(
                        f"-c {item}: {'.'.join(path[: depth + 1])} is not a mapping; set it whole"
                    )
                node = node[name]
            if isinstance(node.get(last), dict) and isinstance(value, dict):
                node[last] = {**node[last], **value}
            else:
                node[last] = value
    if isinstance(data.get("args"), dict):
        data["args"]["config"] = list(items)
    return model.model_validate(data)


def _check_known(model: Any, names: tuple[str, ...], value: Any, item: str) -> None:
    """ConfigError for a name of ``names`` (then of ``value``'s keys, when it is a mapping) that is no field of
    ``model`` or of the settings model below it (``limits.memroy_mb``); a free mapping (``trl``) takes any key."""
    from pydantic import BaseModel

    from swe_rl.errors import ConfigError

    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return  # a free mapping or a plain value: its keys are not settings
    if not names:
        for key, sub in value.items() if isinstance(value, dict) else ():
            _check_known(model, (str(key),), sub, item)
        return
    field = model.model_fields.get(names[0])
    if field is None:
        known = ", ".join(sorted(model.model_fields))
        raise ConfigError(f"-c {item}: {model.__name__} has no setting {names[0]!r}; it has: {known}")
    kind = field.annotation  # a settings model, or one or None; a container of models is a free mapping
    union = typing.get_origin(kind) in (typing.Union, types.UnionType)
    inner = [t for t in (typing.get_args(kind) if union else (kind,)) if isinstance(t, type)]
    _check_known(next((t for t in inner if issubclass(t, BaseModel)), None), names[1:], value, item)


def assignments(items: list[str], option: str) -> dict[str, Any]:
    """``KEY=VALUE`` items as a mapping, each VALUE read as JSON where it is JSON (``1e-3``, ``true``, ``[1, 2]``),
    else as YAML (``{a: 1}``, a plain word a string): the one reading of an assignment, ``-c``'s and
    ``--trl``'s. ConfigError naming ``option`` for one that is not KEY=VALUE."""
    from swe_rl.errors import ConfigError

    out: dict[str, Any] = {}
    for item in items:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option} takes KEY=VALUE, not {item!r}")
        out.update(_assignment(item, option))
    return out


def _assignment(item: str, option: str) -> dict[str, Any]:
    import yaml

    from swe_rl.errors import ConfigError

    key, _, value = item.partition("=")
    try:
        return {key.strip(): json.loads(value)}  # YAML 1.1 reads 1e-3 as a string
    except json.JSONDecodeError:
        pass
    try:
        return {key.strip(): yaml.safe_load(value)}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{option} {item}: the value is not YAML ({exc.__class__.__name__})") from None


def _override_items(item: str) -> dict[str, Any]:
    import yaml

    from swe_rl.errors import ConfigError

    key, sep, _ = item.partition("=")
    if sep and key.strip() and not Path(item).is_file():
        return _assignment(item, "-c")
    path = Path(item)
    if not path.is_file():
        raise ConfigError(f"-c {item}: no such file, and not KEY=VALUE")
    try:
        loaded = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"-c {item}: not a YAML file ({exc.__class__.__name__})") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"-c {item}: a settings file holds a mapping of settings to values")
    return {str(k): v for k, v in loaded.items()}
