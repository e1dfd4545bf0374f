"""NitroBox, measured in its own Python 3.12 venv (bench only; never a dependency of swe-rl).

Set NITROBOX_PYTHON (default /tmp/nbx/bin/python, made with `python3.12 -m venv /tmp/nbx &&
/tmp/nbx/bin/pip install nitrobox`) and NITROBOX_ROOTFS (default /tmp/minbase, made with
`debootstrap --variant=minbase bookworm /tmp/minbase`). Missing either, the row says why.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

_CHILD = r"""
import json, statistics, sys, time
from pathlib import Path
import nitrobox
from nitrobox.image.store import _image_store_populate

rootfs, rounds = sys.argv[1], int(sys.argv[2])
# Without a seeded config store NitroBox looks the rootfs up as an image on every create (~37 s here).
_image_store_populate(rootfs, {"diff_ids": ["sha256:" + "0" * 64], "env": {}, "cmd": ["/bin/bash"]})

def config(i):
    return nitrobox.SandboxConfig(image=rootfs, working_dir="/", net_isolate=True, seccomp=True,
                                  env_base_dir=f"/tmp/nbx-envs")

def pss(pids):
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total

full, execs, resets = [], [], []
for i in range(rounds):
    t0 = time.perf_counter()
    box = nitrobox.Sandbox(config(i), name=f"bench-{i}")
    box.run("true")
    box.delete()
    full.append(time.perf_counter() - t0)
box = nitrobox.Sandbox(config(0), name="bench-live")
for _ in range(3):
    box.run("true")
for _ in range(rounds * 10):
    t0 = time.perf_counter(); box.run("true"); execs.append(time.perf_counter() - t0)
for _ in range(rounds):
    box.run("echo dirty > /x")
    t0 = time.perf_counter(); box.reset(); resets.append(time.perf_counter() - t0)
shell = getattr(box, "_persistent_shell", None)
pid = getattr(shell, "pid", None) or getattr(getattr(shell, "_proc", None), "pid", None)
kids = []
if pid:
    kids = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()] if Path(f"/proc/{pid}").exists() else []
mem = pss([pid, *kids]) if pid else None
box.delete()
ms = lambda xs: round(statistics.median(xs) * 1000, 3)
print(json.dumps({"lifecycle_ms": ms(full), "exec_true_ms": ms(execs), "reset_ms": ms(resets),
                  "pss_mib": round(mem / 1024, 2) if mem else None, "version": nitrobox.__version__}))
"""


def nitrobox_results(rounds: int) -> dict[str, object]:
    python = os.environ.get("NITROBOX_PYTHON", "/tmp/nbx/bin/python")
    rootfs = os.environ.get("NITROBOX_ROOTFS", "/tmp/minbase")
    if not Path(python).exists():
        return {"skipped": f"no NitroBox venv at {python}"}
    if not (Path(rootfs) / "bin").exists():
        return {"skipped": f"no rootfs at {rootfs}"}
    proc = subprocess.run(
        [python, "-c", _CHILD, rootfs, str(rounds)], capture_output=True, text=True, timeout=1800
    )
    if proc.returncode != 0:
        return {"skipped": f"NitroBox failed: {proc.stderr.strip()[-500:]}"}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


_RESETTER = r"""
import sys, time
import nitrobox
from nitrobox.image.store import _image_store_populate

rootfs = sys.argv[1]
_image_store_populate(rootfs, {"diff_ids": ["sha256:" + "0" * 64], "env": {}, "cmd": ["/bin/bash"]})
box = nitrobox.Sandbox(nitrobox.SandboxConfig(image=rootfs, working_dir="/", net_isolate=True, seccomp=True,
                                              env_base_dir="/tmp/nbx-envs"), name="bench-reset")
for _ in range(3):
    box.run("true")
print("ready", nitrobox.__version__, flush=True)
for line in sys.stdin:
    if line.strip() != "reset":
        break
    box.run("echo dirty > /x")
    t0 = time.perf_counter(); box.reset(); elapsed = time.perf_counter() - t0
    print(elapsed, flush=True)
box.delete()
"""


class NitroboxResetter:
    """A live NitroBox sandbox in its own process that resets on request, for timings interleaved with ours."""

    def __init__(self) -> None:
        python = os.environ.get("NITROBOX_PYTHON", "/tmp/nbx/bin/python")
        rootfs = os.environ.get("NITROBOX_ROOTFS", "/tmp/minbase")
        self.skipped: str | None = None
        self.version: str | None = None
        self._proc: subprocess.Popen[str] | None = None
        if not Path(python).exists():
            self.skipped = f"no NitroBox venv at {python}"
        elif not (Path(rootfs) / "bin").exists():
            self.skipped = f"no rootfs at {rootfs}"
        else:
            self._proc = subprocess.Popen(
                [python, "-c", _RESETTER, rootfs], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            assert self._proc.stdout is not None
            greeting = self._proc.stdout.readline().split()
            if greeting[:1] != ["ready"]:
                self.skipped = "NitroBox failed to start"
                self.close()
            else:
                self.version = greeting[1]

    def reset(self) -> float:
        """Dirty the sandbox, reset it; seconds the reset took."""
        assert self._proc is not None and self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write("reset\n")
        self._proc.stdin.flush()
        return float(self._proc.stdout.readline())

    def close(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(OSError):
                assert self._proc.stdin is not None
                self._proc.stdin.close()
            self._proc.wait(timeout=60)
            self._proc = None
