"""pip for an install command uv cannot build, with the dependencies it adds still resolved as of the date.

Where uv cannot build the repo itself (a build backend without PEP 660, a pip-only option, a ``setup.py`` that
needs what only the venv has), pip runs the command, as the official images' pip did (envs/build/pip_tool.py). pip knows
no date: run plainly, it also installs every requirement not yet in the venv from today's index. astropy 3.1's
``.[test]`` brought matplotlib 3.9 and pyparsing 3.3 into a 2019 env, whose deprecation warnings astropy's test
configuration raises as errors (no test of either instance ran). So on a dated build pip builds and installs the
command's own targets with ``--no-deps``, and then the requirements that are still missing (of any installed
distribution; of the repo's own with the extras the command asked for) are installed by the caller's dated
installer. Only missing names are taken: a requirement that an installed release does not meet is left as pip
with ``--no-deps`` leaves it, since the venv's releases are held anyway.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from swe_rl.envs.build.dating import norm
from swe_rl.envs.build.pins import pinned

# `.[test]`, `".[dev,docs]"`, `-e .[test]`: the extras the command asks of the repo itself
_OWN_EXTRAS = re.compile(r"""(?:^|[\s'"=])\.\[([\w.,\s-]+)\]""")

# fed with -c to the venv's interpreter with a pip on its path (the pip tool, else the venv's own)
_MISSING = Path(__file__).with_name("invenv") / "missing_requirements.py"


def requested_extras(command: str) -> list[str]:
    """The extras ``command`` asks of the repo itself (``.[test]``), in order, without repeats."""
    found: list[str] = []
    for group in _OWN_EXTRAS.findall(command):
        found += [e.strip() for e in group.split(",") if e.strip() and e.strip() not in found]
    return found


def pip_command(
    python: Path,
    tool: Path | None,
    held: Path,
    installed: list[str],
    own: str,
    constraints: Path | None,
    *,
    no_deps: bool,
) -> str:
    """pip on ``python``, held to what is ``installed`` (written to ``held``; not the repo's own distribution
    ``own``: a copy of it from the index, matplotlib 3.6.1 that mpl-sphinx-theme pulled in, would hold the
    editable install to that version), run from the pip tool's directory where there is one; with
    ``no_deps``, installing nothing the command does not name (:func:`missing_requirements` then)."""
    held.write_text("".join(f"{p}\n" for p in pinned(installed) if norm(p.split("==")[0]) != norm(own)))
    head = ["-m", "pip", "install", "--disable-pip-version-check", "-c", str(held)]
    if constraints is not None and constraints.is_file():
        head += ["-c", str(constraints)]
    head += ["--no-deps"] if no_deps else []
    prefix = f"PYTHONPATH={shlex.quote(str(tool))} " if tool else ""
    return prefix + " ".join(shlex.quote(str(p)) for p in [python, *head])


def missing_requirements(
    python: Path, tool: Path | None, testbed: Path, extras: list[str], environ: dict[str, str]
) -> list[str] | None:
    """The requirements of the venv's distributions whose names no installed distribution has (the repo's own
    with ``extras``), as requirement strings without markers; None where they cannot be read."""
    env = {**environ, **({"PYTHONPATH": str(tool)} if tool else {})}
    done = subprocess.run(
        [str(python), "-c", _MISSING.read_text(), str(testbed), json.dumps(extras)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=300,
    )
    if done.returncode != 0:
        return None
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return [str(r) for r in found] if isinstance(found, list) else None


__all__ = ["missing_requirements", "pip_command", "requested_extras"]
