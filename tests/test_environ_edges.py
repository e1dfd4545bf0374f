"""Settings come from the environment only at the edges: the CLI and the trainer adapters.

Below them a module takes its settings as arguments. swe-rl's own variables are read through one model,
``swe_rl.paths.Settings``; the few other reads are listed here with their reason: path defaults (where an
interpreter lives) and the environment handed on to a child process.
"""

from __future__ import annotations

import ast
from pathlib import Path

import swe_rl

PACKAGE = Path(swe_rl.__file__).parent
EDGES = ("cli/", "integrations/")
ALLOWED = {
    "envs/build/interpreters.py": "path defaults: PYENV_ROOT, UV_PYTHON_INSTALL_DIR (where interpreters live)",
    "gitutil.py": "a child's environment: git runs without the caller's GIT_* variables",
    "envs/build/install_tools.py": "a child's environment: the installer's uv and pip get the host's proxy and UV_* variables",
    "envs/build/system_deps.py": "a child's environment: apt-get (--install-system-deps) gets the host's, non-interactive",
    "llm/openai.py": "the provider's credential, OPENAI_API_KEY, read where the client is made so keys never "
    "travel in a request to a remote node",
}


def environ_reads(source: str) -> list[int]:
    """Line numbers where ``source`` reads the process environment (``os.environ``, ``os.getenv``, ``environ``)."""
    tree = ast.parse(source)
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "os"
        for alias in node.names
        if alias.name in ("environ", "getenv")
    }
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            if isinstance(node.value, ast.Name) and node.value.id == "os":
                lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id in imported:
            lines.append(node.lineno)
    return sorted(lines)


def test_the_scanner_finds_each_way_of_reading_the_environment() -> None:
    # the control: every spelling is seen, and a local named like it is not
    assert environ_reads("import os\nx = os.environ.get('A')\ny = os.getenv('B')\n") == [2, 3]
    assert environ_reads("from os import environ as e\nx = e['A']\n") == [2]
    assert environ_reads("from os import getenv\nx = getenv('A')\n") == [2]
    assert environ_reads("environ = {}\nx = environ.get('A')\n") == []


def test_only_the_edges_and_the_listed_defaults_read_the_environment() -> None:
    readers = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("tasks/builtin/repos/"):  # the builtin tasks' own libraries, not swe-rl
            continue
        if rel.startswith("harness/insandbox/"):  # runs inside sandboxes, on the test run's environment
            continue
        lines = environ_reads(path.read_text())
        if lines and not rel.startswith(EDGES):
            readers[rel] = lines
    unexplained = {rel: lines for rel, lines in readers.items() if rel not in ALLOWED}
    assert not unexplained, f"reads of os.environ below the CLI and the adapters: {unexplained}"
    stale = set(ALLOWED) - set(readers)
    assert not stale, f"listed as reading the environment but no longer do: {stale}"


def imports_of(source: str) -> set[tuple[str, str]]:
    """(module, name) for each ``from module import name``, and (module, "") for each ``import module``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {(node.module, alias.name) for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {(alias.name, "") for alias in node.names}
    return found


def test_one_settings_model_read_below_the_edges_only_for_the_cache() -> None:
    assert imports_of("from swe_rl.paths import Settings\nimport pydantic_settings.main\n") == {
        ("swe_rl.paths", "Settings"),
        ("pydantic_settings.main", ""),
    }
    makers, readers = set(), set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        imports = imports_of(path.read_text())
        if any(module.split(".")[0] == "pydantic_settings" for module, _ in imports):
            makers.add(rel)
        if ("swe_rl.paths", "Settings") in imports and not rel.startswith(EDGES):
            readers.add(rel)
    assert makers == {"paths.py"}, "one settings source: only paths.py builds a pydantic-settings model"
    assert not readers, f"modules below the CLI and the adapters that read swe-rl's settings: {readers}"
