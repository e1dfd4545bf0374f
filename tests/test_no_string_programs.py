"""No program that runs as root, in a sandbox or in a subprocess is Python source held in a string (#59): each is
a real file (sandbox/helper/, envs/build/invenv/, harness/insandbox/, synth/insandbox/) that ruff, mypy and test_sizes
see, staged or run by path or fed to its interpreter from that file."""

from __future__ import annotations

import ast
import itertools
import socket
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import swe_rl
from swe_rl.sandbox.spawner import HELPER

PACKAGE = Path(swe_rl.__file__).parent
ROOT = PACKAGE.parent.parent

# the program files, each with the oldest Python that runs it
PROGRAMS = {
    "sandbox/helper/spawn_helper.py": (3, 11),  # the caller's own interpreter, with -S
    "sandbox/helper/reset_worker.py": (3, 11),
    "sandbox/helper/tree_walk.py": (3, 11),
    "envs/build/invenv/import_probe.py": (3, 5),  # the venv's
    "envs/build/invenv/missing_requirements.py": (3, 5),
    "synth/insandbox/swe_rl_synth_trace.py": (3, 5),  # the env's, in a sandbox
    "harness/insandbox/list_modules.py": (3, 5),
}


def _lines(text: str) -> int:
    return len([line for line in text.strip().splitlines() if line.strip()])


def _parses(text: str) -> ast.Module | None:
    try:
        return ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return None


def _is_program(text: str) -> bool:
    """A Python program's shape: two lines or more that parse, with an import, a function or a class."""
    tree = _parses(text) if _lines(text) >= 2 else None
    kinds = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
    return tree is not None and any(isinstance(node, kinds) for node in ast.walk(tree))


def string_programs(source: str) -> list[tuple[int, str]]:
    """(line, why) of each Python program held in a string literal of ``source``:

    - a str constant (not a docstring, not a piece of an f-string) shaped like a program (:func:`_is_program`),
      whatever runs it (``-c``, stdin, exec, a file written into a sandbox);
    - the argument after ``"-c"`` in a call or a list, or the first of ``exec``/``compile``, that is a literal of
      two lines or more that parse as Python, or a name the module binds to an expression holding one
      (concatenated, formatted, ``.replace``-d)."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.JoinedStr):
            skip.update(id(value) for value in node.values)
    found = [
        (node.lineno, "a Python program in a string")
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and _is_program(node.value)
    ]

    def literal_code(expr: ast.expr) -> bool:
        return any(
            isinstance(part, ast.Constant)
            and isinstance(part.value, str)
            and _lines(part.value) >= 2
            and _parses(part.value) is not None
            for part in ast.walk(expr)
        )

    bound = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and literal_code(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def code(expr: ast.expr) -> bool:
        return literal_code(expr) or any(isinstance(n, ast.Name) and n.id in bound for n in ast.walk(expr))

    for node in ast.walk(tree):
        items: list[ast.expr] = []
        if isinstance(node, ast.Call):
            items = list(node.args)
            if (
                isinstance(node.func, ast.Name)
                and node.func.id in ("exec", "compile")
                and items
                and code(items[0])
            ):
                found.append((node.lineno, f"{node.func.id}() of a program in a string"))
        elif isinstance(node, ast.List | ast.Tuple):
            items = list(node.elts)
        for flag, after in itertools.pairwise(items):
            if isinstance(flag, ast.Constant) and flag.value == "-c" and code(after):
                found.append((node.lineno, "-c and a program in a string"))
    return sorted(set(found))


def test_the_scanner_finds_each_way_of_holding_a_program() -> None:
    # the controls: each shape this test forbids is seen, and what it allows is not
    program = 'CODE = """\nimport os\nprint(os.getpid())\n"""\n'
    assert string_programs(program) == [(1, "a Python program in a string")]
    assert string_programs('subprocess.run([python, "-c", "x = 1\\nprint(x)\\n"])\n') == [
        (1, "-c and a program in a string")
    ]
    assert string_programs('P = "x = 1\\ny = 2\\n" + W\nsubprocess.run([python, "-c", P])\n') == [
        (2, "-c and a program in a string")
    ]
    assert string_programs('exec(compile("a = 1\\nb = 2\\n", "f", "exec"))\n') == [
        (1, "compile() of a program in a string"),
        (1, "exec() of a program in a string"),
    ]
    allowed = (
        '"""A docstring.\n\nimport os\ndef f(): pass\n"""\n'
        'subprocess.run([python, "-c", "import sys; print(sys.version)"])\n'  # one line
        'subprocess.run(["bash", "-c", "set -e\\necho $HOME\\n"])\n'  # not Python
        'subprocess.run([python, "-c", PROBE.read_text()])\n'  # a file's text
        'HELP = """Usage:\n  swe-rl eval -c settings.yaml\n"""\n'
    )
    assert string_programs(allowed) == []


def test_no_python_program_is_held_in_a_string() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("tasks/builtin/repos/"):  # the builtin tasks' own libraries, not swe-rl
            continue
        if programs := string_programs(path.read_text()):
            found[rel] = programs
    assert found == {}


def test_the_program_files_parse_on_the_python_that_runs_them() -> None:
    for rel, oldest in PROGRAMS.items():
        text = (PACKAGE / rel).read_text()
        ast.parse(text, feature_version=max(oldest, (3, 7)))  # the lowest ast can check
        tree = ast.parse(text)
        if oldest < (3, 6):  # f-strings and variable annotations are 3.6's
            assert not any(isinstance(n, ast.JoinedStr | ast.AnnAssign) for n in ast.walk(tree)), rel
        if oldest < (3, 7):  # annotations are evaluated on 3.5 and 3.6: types are comments there
            assert not any(
                isinstance(n, ast.FunctionDef) and (n.returns or any(a.annotation for a in n.args.args))
                for n in ast.walk(tree)
            ), rel


def test_the_program_files_import_nothing_of_swe_rl_when_run() -> None:
    for rel in PROGRAMS:
        tree = ast.parse((PACKAGE / rel).read_text())
        for_mypy = {  # `if TYPE_CHECKING:` (or `MYPY`) imports are mypy's only
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id in ("TYPE_CHECKING", "MYPY")
            for stmt in node.body
            for inner in ast.walk(stmt)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in for_mypy:
                names = (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                )
                assert not any(n.split(".")[0] == "swe_rl" for n in names), rel


def test_the_spawner_helper_starts_as_a_file_without_site() -> None:
    # run as spawner.py runs it (no root needed to start): its siblings import by name, and it exits at EOF
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen(
        [sys.executable, "-S", str(HELPER), str(theirs.fileno())],
        pass_fds=(theirs.fileno(),),
        stderr=subprocess.PIPE,
    )
    theirs.close()
    ours.close()
    assert proc.wait(timeout=30) == 0 and proc.stderr is not None and proc.stderr.read() == b""


def test_the_program_files_ship_in_the_wheel_and_the_sdist() -> None:
    # hatchling takes every file under src/swe_rl that git does not ignore (no __init__.py needed): nothing in the
    # build config narrows that, and git ignores none of the programs (`uv build` lists them in both archives)
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]
    assert build["targets"]["wheel"]["packages"] == ["src/swe_rl"]
    narrowing = {"include", "exclude", "only-include", "only-packages", "force-include"}
    for settings in (build, build["targets"]["wheel"], build["targets"].get("sdist", {})):
        assert not narrowing & set(settings)
    paths = [f"src/swe_rl/{rel}" for rel in PROGRAMS]
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True
    )
    assert ignored.returncode == 1 and ignored.stdout == ""  # 1: none of them is ignored
