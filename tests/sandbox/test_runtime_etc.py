"""The sandbox /etc is built once per cache, by whichever sandboxes start first: several at once must all get it.

Mining validates candidates in parallel, so its first sandboxes build the /etc together. Each checked whether a
mount point existed and then made it; the second to make it failed with FileExistsError ("cannot start sandbox
... File exists: .../etc-v1/ld.so.conf.d"), in 46 of 50 rounds of this test before the fix.
"""

from __future__ import annotations

import threading
from pathlib import Path

from swe_rl.sandbox import runtime


def test_sandboxes_starting_together_all_get_the_runtime_etc(tmp_path, monkeypatch):
    rounds, threads = 20, 8
    failed: list[BaseException] = []
    made: list[Path] = []

    def start() -> None:
        try:
            made.append(runtime.runtime_etc())
        except BaseException as exc:  # the failure is what the test counts
            failed.append(exc)

    for n in range(rounds):
        monkeypatch.setenv("SWE_RL_CACHE", str(tmp_path / str(n)))
        made.clear()
        workers = [threading.Thread(target=start) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert len(set(made)) <= 1
    assert failed == []
    etc = runtime.runtime_etc()
    assert (etc / ".complete").is_file() and (etc / "passwd").is_file()
    assert all((etc / name).exists() for name in runtime.HOST_ETC if (Path("/etc") / name).exists())
