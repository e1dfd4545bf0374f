"""swe_rl.locks: filelock's exclusive lock and the flock helper see each other's holds on the same file (a flock
is per open file, so two holds in one process exclude each other as two processes' would)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from swe_rl.locks import Flock, exclusive


def test_exclusive_waits_for_a_holder_or_says_no_at_once(tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    with exclusive(path) as held:
        assert held
        with exclusive(path, blocking=False) as again:
            assert not again
        assert not Flock(path, shared=True).acquire(blocking=False)
    assert path.is_file()  # kept: every waiter locks the same inode
    with exclusive(path, blocking=False) as free:
        assert free


def test_exclusive_waits_for_another_process(tmp_path: Path) -> None:
    path, released = tmp_path / "a.lock", tmp_path / "released"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, pathlib, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
            "print('held', flush=True); time.sleep(0.5); pathlib.Path(sys.argv[2]).touch(); "
            "fcntl.flock(f, fcntl.LOCK_UN); time.sleep(5)",
            str(path),
            str(released),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with exclusive(path):
            # given only once the holder let go: it marks the release just before it unlocks (its exit is no
            # mark, the interpreter closes the file, so lets the lock go, before the process ends)
            assert released.exists()
    finally:
        holder.kill()
        holder.wait()


def test_shared_holds_go_together_and_keep_an_exclusive_one_out(tmp_path: Path) -> None:
    path = tmp_path / "b.lock"
    with Flock(path, shared=True), Flock(path, shared=True):
        assert not Flock(path).acquire(blocking=False)
        with exclusive(path, blocking=False) as held:
            assert not held
    writer = Flock(path)
    assert writer.acquire(blocking=False)
    assert not Flock(path, shared=True).acquire(blocking=False)
    writer.release()
    writer.release()  # nothing when not held


def test_a_blocking_acquire_waits_for_the_release(tmp_path: Path) -> None:
    path = tmp_path / "c.lock"
    reader = Flock(path, shared=True)
    reader.acquire()
    threading.Timer(0.3, reader.release).start()
    start = time.monotonic()
    with Flock(path):
        assert time.monotonic() - start > 0.2


def test_a_directory_lock_and_a_gone_directory(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with Flock(work, directory=True):
        assert not Flock(work, directory=True).acquire(blocking=False)
    probe = Flock(work, directory=True)
    assert probe.acquire(blocking=False)
    probe.release()
    work.rmdir()
    with pytest.raises(FileNotFoundError):
        Flock(work, directory=True).acquire()
    assert not work.exists()  # not made as a file either
