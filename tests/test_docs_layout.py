"""The docs' map of the package follows the tree: ARCHITECTURE.md's and README's layer chains are the
import-linter contract's layers, every top-level package and module of src/swe_rl is on them and in README's
layout, and every folder of programs run outside the caller's process (no ``__init__.py``) is named, with its
files, in ARCHITECTURE.md."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import swe_rl

PACKAGE = Path(swe_rl.__file__).parent
ROOT = PACKAGE.parent.parent
ARCHITECTURE = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
README = (ROOT / "README.md").read_text()


def _chain(text: str) -> list[set[str]]:
    """``a → b | c → d`` (across lines) as [{a}, {b, c}, {d}]."""
    return [{name.strip() for name in floor.split("|")} for floor in " ".join(text.split()).split("→")]


def contract_layers(container: str | None = None) -> list[set[str]]:
    """The layers of the package's layers contract (``container``: of the one inside that package)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (layers,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["type"] == "layers" and c.get("containers", [None]) == [container]
    ]
    return [
        {name.strip(" ()").removeprefix("swe_rl.") for name in floor.split("|")} for floor in layers["layers"]
    ]


def top_level() -> set[str]:
    """The packages and modules directly under src/swe_rl, as the docs name them (``errors``, ``tasks``)."""
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    return packages | modules


def program_folders() -> list[Path]:
    """Folders of a package that hold programs, not modules: Python files and no ``__init__.py``."""
    return sorted(
        d
        for d in PACKAGE.glob("*/**/")
        if (d.parent / "__init__.py").is_file() and not (d / "__init__.py").exists() and any(d.glob("*.py"))
    )


def test_the_chain_reads_as_the_contract_and_the_measure_sees_the_tree() -> None:
    assert _chain("a → b | c\n  → d") == [{"a"}, {"b", "c"}, {"d"}]
    assert {"errors", "tasks", "cli", "rundir"} <= top_level() and "__init__" not in top_level()
    assert {d.relative_to(PACKAGE).as_posix() for d in program_folders()} >= {
        "sandbox/helper",
        "harness/insandbox",
        "envs/build/invenv",  # a level deeper
    }


def test_the_docs_layer_chains_are_the_contracts_layers_and_cover_the_tree() -> None:
    found = re.search(r"layers import downward only: `([^`]+)`", ARCHITECTURE)
    readme = re.search(r"Layers \(imports go downward only[^\n]*\n`([^`]+)`", README)
    assert found is not None and readme is not None
    layers = contract_layers()
    assert _chain(found.group(1)) == layers, "docs/ARCHITECTURE.md's layer chain"
    assert _chain(readme.group(1)) == layers, "README's layer chain"
    assert set().union(*layers) == top_level()


def test_the_docs_chain_inside_envs_is_its_contract_and_covers_the_package() -> None:
    found = re.search(r"inside envs: `([^`]+)`", ARCHITECTURE)
    assert found is not None
    layers = contract_layers("swe_rl.envs")
    assert _chain(found.group(1)) == layers
    inside = {p.name for p in (PACKAGE / "envs").iterdir() if (p / "__init__.py").is_file()}
    inside |= {p.stem for p in (PACKAGE / "envs").glob("*.py") if p.name != "__init__.py"}
    assert set().union(*layers) == inside


def test_readme_layout_names_every_top_level_package_and_module() -> None:
    block = README.split("\nsrc/swe_rl/\n", 1)[1].split("```", 1)[0]
    named = {m.group(1) for m in re.finditer(r"^  (\w+)(?:/|\.py)\s", block, re.MULTILINE)}
    assert named == top_level()
    for folder in program_folders():
        assert f"{folder.name}/:" in block, folder


def test_architecture_names_every_program_folder_and_its_files() -> None:
    for folder in program_folders():
        rel = folder.relative_to(PACKAGE).as_posix()
        assert f"`{rel}/`" in ARCHITECTURE, rel
        for program in sorted(folder.glob("*.py")):
            assert f"`{program.name}`" in ARCHITECTURE, program
