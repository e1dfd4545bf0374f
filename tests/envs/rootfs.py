"""A small evaluation image made here: a rootfs assembled from the host's binaries, a repo in /testbed and
a venv at /opt/venv (pytest copied in), loaded with ``docker import``. Built once per machine (by tag)."""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from tests.envs.helpers import git

from swe_rl.envs.build.venv import seed_from_host

PYTHON = "/usr/bin/python3.11"
BINARIES = [
    "/usr/bin/bash",
    "/usr/bin/git",
    "/usr/bin/patch",
    PYTHON,
    *(
        f"/usr/bin/{n}"
        for n in [
            "base64",
            "timeout",
            "mkdir",
            "mv",
            "dirname",
            "cat",
            "sleep",
            "rm",
            "ls",
            "env",
            "true",
            "cp",
            "sed",
            "grep",
        ]
    ),
]
BASE = "def answer():\n    return 41\n"
FIXED = "def answer():\n    return 42\n"
GOLD = """diff --git a/widget.py b/widget.py
--- a/widget.py
+++ b/widget.py
@@ -1,2 +1,2 @@
 def answer():
-    return 41
+    return 42
"""
TEST_PATCH = """diff --git a/test_widget.py b/test_widget.py
--- a/test_widget.py
+++ b/test_widget.py
@@ -4,2 +4,6 @@ from widget import answer
 def test_answer():
-    assert answer() == 41
+    assert answer() == 42
+
+
+def test_type():
+    assert isinstance(answer(), int)
"""


def _libs(paths: list[str]) -> set[str]:
    found: set[str] = set()
    for path in paths:
        out = subprocess.run(["ldd", path], capture_output=True, text=True, check=False).stdout
        found.update(re.findall(r"(/\S+\.so[^\s]*) \(0x", out))
    return found


def _copy(src: str, root: Path) -> None:
    dst = root / src.lstrip("/")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(src), dst)


def build_rootfs(root: Path) -> str:
    """Fill ``root``; returns the base commit of its /testbed (a later commit, tagged, is also in it)."""
    stdlib = Path("/usr/lib/python3.11")
    dynload = [str(p) for p in (stdlib / "lib-dynload").glob("*.so")]
    for path in BINARIES:
        _copy(path, root)
    for lib in _libs(BINARIES + dynload):
        _copy(lib, root)
    shutil.copytree(
        stdlib,
        root / stdlib.relative_to("/"),
        symlinks=True,
        ignore=shutil.ignore_patterns("test", "idlelib", "tkinter", "__pycache__", "ensurepip"),
    )
    if Path("/usr/lib/locale/C.utf8").is_dir():
        shutil.copytree("/usr/lib/locale/C.utf8", root / "usr/lib/locale/C.utf8")
    (root / "bin").symlink_to("usr/bin")
    (root / "lib64").symlink_to("usr/lib64") if not (root / "lib64").exists() else None
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    for d in ("tmp", "root", "proc", "dev", "sys"):
        (root / d).mkdir(exist_ok=True)
    venv = root / "opt" / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(PYTHON)
    (venv / "pyvenv.cfg").write_text(
        "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11\n"
    )
    (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    seed_from_host(venv, ["pytest"])
    (venv / "bin" / "pytest").write_text(
        "#!/opt/venv/bin/python\nimport sys, pytest\nsys.exit(pytest.main())\n"
    )
    (venv / "bin" / "pytest").chmod(0o755)
    testbed = root / "testbed"
    testbed.mkdir()
    git(testbed, "init", "-q", "-b", "main")
    (testbed / "widget.py").write_text(BASE)
    (testbed / "test_widget.py").write_text(
        "from widget import answer\n\n\ndef test_answer():\n    assert answer() == 41\n"
    )
    commit = ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m"]
    git(testbed, "add", "-A")
    git(testbed, *commit, "base")
    base = git(testbed, "rev-parse", "HEAD")
    (testbed / "widget.py").write_text(FIXED)
    git(testbed, *commit, "the fix (future history)", "-a")
    git(testbed, "tag", "v-future")
    git(testbed, "reset", "-q", "--hard", base)
    (testbed / "build.log").write_text("untracked, as the official images keep build outputs\n")
    return base


def _tar(root: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(root, arcname=".")
    return buf.getvalue()


def test_image(client: Any, workdir: Path) -> tuple[str, str]:
    """(image tag, base commit) of the test image, built when this machine does not have it yet."""
    recipe = hashlib.sha256(Path(__file__).read_bytes() + sys.version.encode()).hexdigest()[:12]
    tag = f"swe-rl-test/sweb.eval.x86_64.acme_1776_widget-7:{recipe}"
    try:
        image = client.images.get(tag)
        return tag, image.labels.get("base") or client.api.inspect_image(tag)["Config"]["Labels"]["base"]
    except Exception:
        pass
    for stale in client.images.list(name=tag.partition(":")[0]):  # images of an older version of this file
        for name in stale.tags:
            client.api.remove_image(name)
    root = workdir / "rootfs"
    root.mkdir()
    base = build_rootfs(root)
    repo, _, version = tag.partition(":")
    client.api.import_image_from_data(
        _tar(root),
        repository=repo,
        tag=version,
        changes=[f"LABEL base={base}", "ENV PATH=/opt/venv/bin:/usr/bin:/bin"],
    )
    shutil.rmtree(root)
    return tag, base
