"""A compiled testbed's build output: object files removed, extension modules stripped of what names the
directory they were built in, so the same module built for two instances is shared once (envs/store/slim.py)."""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from swe_rl.envs.store.gitpacks import share_files
from swe_rl.envs.store.slim import slim_build_output
from swe_rl.gitutil import git

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("strip") is None, reason="needs gcc and binutils"
)

SOURCE = "int answer(int x) { return 6 * x; }\n"
MODULE = "pkg/_fast.cpython-311-x86_64-linux-gnu.so"


def _testbed(root: Path) -> Path:
    """A repository built in place as setup.py develop leaves it: an untracked module with debug sections,
    object files under build/temp.*, and a tracked file of the repository's own under build/."""
    root.mkdir()
    (root / "pkg").mkdir()
    (root / "pkg" / "_fast.c").write_text(SOURCE)
    (root / ".gitignore").write_text("*.so\n*.o\nbuild/temp.*\n")
    (root / "build").mkdir()
    (root / "build" / "tracked.txt").write_text("the repository's own\n")
    (root / "pkg" / "notes.so").write_text("not an ELF file\n")
    git(["init", "-q"], root)
    git(["add", "-A"], root)
    git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"], root)
    temp = root / "build" / "temp.linux-x86_64-3.11" / "pkg"
    temp.mkdir(parents=True)
    cc = ["gcc", "-g", "-O1", "-fPIC"]
    subprocess.run([*cc, "-c", "pkg/_fast.c", "-o", str(temp / "_fast.o")], cwd=root, check=True)
    subprocess.run([*cc, "-shared", str(temp / "_fast.o"), "-o", MODULE], cwd=root, check=True)
    return root


def _sections(path: Path) -> str:
    return subprocess.run(["readelf", "-S", str(path)], capture_output=True, text=True, check=True).stdout


def test_slimmed_modules_are_the_same_bytes_in_two_testbeds_and_shared_once(tmp_path):
    a, b = _testbed(tmp_path / "a"), _testbed(tmp_path / "b")
    # the control: built in two directories, the same source gives two different files (debug paths)
    assert (a / MODULE).read_bytes() != (b / MODULE).read_bytes()
    assert ".debug_info" in _sections(a / MODULE)
    mtime = os.stat(a / MODULE).st_mtime_ns
    size = (a / MODULE).stat().st_size

    freed = slim_build_output(a) + slim_build_output(b)

    assert freed > 0 and (a / MODULE).stat().st_size < size
    assert (a / MODULE).read_bytes() == (b / MODULE).read_bytes()
    assert ".debug_info" not in _sections(a / MODULE) and os.stat(a / MODULE).st_mtime_ns == mtime
    assert ctypes.CDLL(str(a / MODULE)).answer(7) == 42  # still the module it was
    for tb in (a, b):
        assert not (tb / "build" / "temp.linux-x86_64-3.11").exists()  # object files and their folders gone
        assert (tb / "build" / "tracked.txt").read_text() == "the repository's own\n"
        assert (tb / "pkg" / "notes.so").read_text() == "not an ELF file\n"
        assert git(["status", "--porcelain"], tb) == ""
    store = tmp_path / "files"
    share_files(store, a)
    share_files(store, b)
    assert os.stat(a / MODULE).st_ino == os.stat(b / MODULE).st_ino  # one copy on disk


def test_a_tracked_object_file_and_module_stay_as_committed(tmp_path):
    root = _testbed(tmp_path / "r")
    git(["add", "-f", MODULE, "build/temp.linux-x86_64-3.11/pkg/_fast.o"], root)
    git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "binaries"], root)
    module = (root / MODULE).read_bytes()

    assert slim_build_output(root) == 0
    assert (root / MODULE).read_bytes() == module
    assert (root / "build" / "temp.linux-x86_64-3.11" / "pkg" / "_fast.o").is_file()


def _plain_testbed(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    git(["init", "-q"], root)
    git(["add", "-A"], root)
    git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"], root)
    return root


def test_a_content_linked_as_often_as_the_filesystem_allows_gets_a_new_copy(tmp_path):
    """The whole Verified run died on django: the store's copy of one content had 65,000 links (ext4's limit),
    and the next testbed's link to it failed with EMLINK. Now that file becomes the store's copy; empty files
    (most of those links) are not linked at all."""
    files = {"same.txt": "shared content\n", "empty.py": ""}
    store = tmp_path / "files"
    share_files(store, _plain_testbed(tmp_path / "a", files))
    (kept,) = [p for p in store.rglob("*") if p.is_file() and p.stat().st_size]
    filler = tmp_path / "filler"
    filler.mkdir()
    try:  # the control: the filesystem's limit, reached
        for n in range(100_000):
            os.link(kept, filler / str(n))
        pytest.skip("this filesystem allows over 100,000 links to one file: no limit to reach")
    except OSError as exc:
        assert exc.errno == errno.EMLINK
    b = share_files(store, _plain_testbed(tmp_path / "b", files)) and tmp_path / "b"
    c = share_files(store, _plain_testbed(tmp_path / "c", files)) and tmp_path / "c"
    assert (b / "same.txt").read_text() == "shared content\n"
    assert os.stat(b / "same.txt").st_ino == os.stat(c / "same.txt").st_ino == os.stat(kept).st_ino
    assert os.stat(kept).st_ino != os.stat(filler / "0").st_ino  # a new copy; the links made keep the old
    assert all(os.stat(t / "empty.py").st_nlink == 1 for t in (tmp_path / "a", b, c))
    assert git(["status", "--porcelain"], c) == ""
