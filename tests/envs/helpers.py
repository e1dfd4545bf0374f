"""Small real inputs for env-build tests: a git repo in a repo cache, and wheels in a local index."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import zipfile
from pathlib import Path

from swe_rl.tasks.model import Task


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.strip()


def make_repo(repo_cache: Path, repo: str = "acme/widget") -> str:
    """A repository ``repo`` in ``repo_cache`` (non-bare) with one commit; returns the commit."""
    path = repo_cache / repo
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "widget.py").write_text("def answer():\n    return 41\n")
    (path / "test_widget.py").write_text(
        "from widget import answer\n\ndef test_answer():\n    assert answer() == 41\n"
    )
    git(path, "add", "-A")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
    return git(path, "rev-parse", "HEAD")


def make_wheel(
    index: Path,
    name: str,
    version: str,
    requires: tuple[str, ...] = (),
    tag: str = "py3-none-any",
    source: str = "",
    *,
    package: bool = False,
) -> Path:
    """A wheel of module ``name`` whose ``VERSION`` is ``version`` (and whose code is ``source`` after that),
    depending on ``requires``: pure Python, or by its ``tag`` (a platform's, e.g. ``cp311-cp311-linux_x86_64``) one
    that only this Python installs. With ``package``, the module is a package's ``__init__.py``."""
    index.mkdir(parents=True, exist_ok=True)
    dist = f"{name}-{version}.dist-info"
    needs = "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        (f"{name}/__init__.py" if package else f"{name}.py"): f"VERSION = {version!r}\n{source}",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{needs}",
        f"{dist}/WHEEL": f"Wheel-Version: 1.0\nGenerator: swe-rl-tests\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    wheel = index / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return wheel


def widget_task(commit: str, **fields: object) -> Task:
    record: dict[str, object] = {
        "instance_id": "acme__widget-1",
        "repo": "acme/widget",
        "base_commit": commit,
        "install": "python -m pip install widgetdep",
        "test_cmd": "pytest -rA",
    }
    record.update(fields)
    return Task.model_validate(record)
