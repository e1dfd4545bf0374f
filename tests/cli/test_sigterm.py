"""SIGTERM unwinds a long command as Ctrl-C does (cli.options.sigterm_interrupts: tasks synth, tasks mine)."""

from __future__ import annotations

import signal
import subprocess
import sys

CHILD = """
import os, signal, sys, time
from swe_rl.cli.options import sigterm_interrupts
if sys.argv[1] == "on":
    sigterm_interrupts()
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
except KeyboardInterrupt:
    print("unwound")
"""


def test_sigterm_becomes_a_keyboard_interrupt():
    on = subprocess.run([sys.executable, "-c", CHILD, "on"], capture_output=True, text=True, timeout=60)
    assert on.returncode == 0 and on.stdout.strip() == "unwound", on.stderr
    # the control: without it, SIGTERM ends the process where it stands, nothing unwinds
    off = subprocess.run([sys.executable, "-c", CHILD, "off"], capture_output=True, text=True, timeout=60)
    assert off.returncode == -signal.SIGTERM and off.stdout == ""
