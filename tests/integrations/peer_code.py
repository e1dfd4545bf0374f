"""Peers' own functions for the slime/miles reward tests, loaded from the peers' files at test time
(nothing of theirs is copied into this repository).

- miles: the installed ``miles-rl`` package (``pip install --no-deps miles-rl``; 0.0.2 here). Functions
  in modules that import cleanly on CPU are imported; ``RolloutManager._post_process_rewards`` lives in
  ``miles/ray/rollout.py``, whose imports (IPython, sglang) do not install on CPU, so that one method is
  compiled from the installed file and run with the names it uses.
- slime (not on PyPI): a checkout named by ``SWE_RL_SLIME_SRC`` (its repository root, e.g. THUDM/slime
  at 624b824); the tests that need it skip without it.
"""

from __future__ import annotations

import ast
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest


def method_source(path: Path, cls: str | None, name: str) -> tuple[str, int]:
    """The source of ``cls.name`` (or the module-level function ``name``) in the file at ``path``, dedented,
    and the line it starts on."""
    text = path.read_text()
    tree = ast.parse(text)
    scope: list[ast.stmt] = tree.body
    if cls is not None:
        owner = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        scope = owner.body
    node = next(n for n in scope if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    lines = text.splitlines()[first - 1 : node.end_lineno]
    return textwrap.dedent("\n".join(lines)), first


def load_method(path: Path, cls: str | None, name: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    """``cls.name`` from the peer's file, compiled under the file's name and line numbers, with
    ``namespace`` as its globals."""
    source, first = method_source(path, cls, name)
    code = compile("from __future__ import annotations" + "\n" * (first - 1) + source, str(path), "exec")
    scope = {"__name__": f"peer:{path.name}", **namespace}
    exec(code, scope)  # the peer's own function, run as written
    return scope[name]


def miles_default_post_process() -> Callable[[Any, list[Any]], tuple[list[float], list[float]]]:
    """miles' own default reward post-process (``RolloutManager._post_process_rewards``, installed miles-rl)."""
    torch = pytest.importorskip("torch")
    miles_types = pytest.importorskip("miles.utils.types")
    import miles

    path = Path(miles.__file__).parent / "ray" / "rollout.py"
    method = load_method(
        path, "RolloutManager", "_post_process_rewards", {"torch": torch, "Sample": miles_types.Sample}
    )

    def post(args: Any, samples: list[Any]) -> tuple[list[float], list[float]]:
        return method(SimpleNamespace(args=args, custom_reward_post_process_func=None), samples)

    return post


def slime_src(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The slime checkout of ``SWE_RL_SLIME_SRC``, importable for this test (skips when unset)."""
    root = os.environ.get("SWE_RL_SLIME_SRC")
    if not root or not (Path(root) / "slime" / "utils" / "types.py").is_file():
        pytest.skip("SWE_RL_SLIME_SRC does not name a slime checkout (slime is not on PyPI)")
    monkeypatch.syspath_prepend(root)
    for mod in [m for m in sys.modules if m == "slime" or m.startswith("slime.")]:
        monkeypatch.delitem(sys.modules, mod)
    return Path(root)


def slime_argument(root: Path, flag: str) -> dict[str, Any]:
    """The keywords of slime's ``parser.add_argument(flag, ...)`` in slime/utils/arguments.py (literals only)."""
    tree = ast.parse((root / "slime" / "utils" / "arguments.py").read_text())
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == flag
        ):
            out = {}
            for kw in node.keywords:
                try:
                    out[str(kw.arg)] = ast.literal_eval(kw.value)
                except ValueError:
                    continue
            return out
    raise LookupError(f"slime declares no {flag}")


def slime_default_post_process(root: Path) -> Callable[[Any, list[Any]], tuple[list[float], list[float]]]:
    """slime's own default reward post-process (``RolloutManager._post_process_rewards``, slime/ray/rollout.py)."""
    import torch
    from slime.utils.types import Sample

    method = load_method(
        root / "slime" / "ray" / "rollout.py",
        "RolloutManager",
        "_post_process_rewards",
        {"torch": torch, "Sample": Sample},
    )

    def post(args: Any, samples: list[Any]) -> tuple[list[float], list[float]]:
        return method(SimpleNamespace(args=args, custom_reward_post_process_func=None), samples)

    return post
