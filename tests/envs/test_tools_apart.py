"""setuptools_scm 8 beside a setuptools before 61 is brought together after a repo's install.

matplotlib 3.4's build brought setuptools_scm 8.1 (build tools as of 2024) into a Python 3.8 venv whose
setuptools is ensurepip's 56.0; matplotlib imports setuptools_scm for ``__version__`` from a git checkout, which
warns that the pair is broken, and under ``filterwarnings = error`` 68 of 111 tests of matplotlib-20488 failed.
"""

from __future__ import annotations

import subprocess
import sys

from swe_rl.envs.build.remedies import tools_apart


def test_the_broken_pair_is_found_and_others_are_left_alone() -> None:
    assert tools_apart(["numpy==1.20.0", "setuptools==56.0.0", "setuptools-scm==8.1.0"]) == "setuptools>=61"
    assert tools_apart(["setuptools==56.0.0", "setuptools_scm==6.4.2"]) is None  # scm of its own time
    assert tools_apart(["setuptools==70.0.0", "setuptools-scm==8.1.0"]) is None  # both of 2024
    assert tools_apart(["setuptools-scm==8.1.0"]) is None  # no setuptools to speak of
    assert tools_apart(["setuptools==56.0.0"]) is None


def test_the_pair_is_what_setuptools_scm_itself_refuses() -> None:
    """The rule is setuptools_scm's own (its _warn_on_old_setuptools, installed with the test extra); the control
    is the same check on the setuptools it was made for."""
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "from setuptools_scm._integration import setuptools as s\n"
        "import sys\n"
        "for v in sys.argv[1:]:\n"
        "    try:\n"
        "        s._warn_on_old_setuptools(v)\n"
        "        print(v, 'ok')\n"
        "    except RuntimeWarning:\n"
        "        print(v, 'broken')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, "56.0.0", "61.0.0"], capture_output=True, text=True)
    assert proc.stdout.split("\n")[:2] == ["56.0.0 broken", "61.0.0 ok"], proc.stderr
    for version, said in (("56.0.0", "broken"), ("61.0.0", "ok")):
        freeze = [f"setuptools=={version}", "setuptools-scm==8.1.0"]
        assert (tools_apart(freeze) is not None) == (said == "broken")
