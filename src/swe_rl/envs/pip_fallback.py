"""pip for an install command uv cannot build, with the dependencies it adds still resolved as of the date.

Where uv cannot build the repo itself (a build backend without PEP 660, a pip-only option, a ``setup.py`` that
needs what only the venv has), pip runs the command, as the official images' pip did (envs/pip_tool.py). pip knows
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

from swe_rl.envs.dating import norm
from swe_rl.envs.lock import pinned

# `.[test]`, `".[dev,docs]"`, `-e .[test]`: the extras the command asks of the repo itself
_OWN_EXTRAS = re.compile(r"""(?:^|[\s'"=])\.\[([\w.,\s-]+)\]""")

# run on the venv's interpreter with a pip on its path (the pip tool, else the venv's own): packaging is pip's;
# importlib.metadata from Python 3.8, pip's pkg_resources before it
_MISSING = r"""
import json, os, sys
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name

testbed, extras = os.path.realpath(sys.argv[1]), set(json.loads(sys.argv[2]))


def inside(where):  # setup.py develop: the project's metadata is in the repo
    if not where:  # (realpath("") is the working directory)
        return False
    where = os.path.realpath(where)
    return where == testbed or where.startswith(testbed + os.sep)


def installed():  # (name, requirement lines, the repo's own?) of each distribution
    try:
        from importlib import metadata
    except ImportError:
        from pip._vendor import pkg_resources  # its requires() evaluates the markers itself
        for dist in pkg_resources.working_set:
            asked = tuple(e for e in dist.extras if e in extras) if inside(dist.location) else ()
            lines = [r.project_name + str(r.specifier) for r in dist.requires(asked)]
            yield dist.project_name, lines, False
        return
    for dist in metadata.distributions():
        url = json.loads(dist.read_text("direct_url.json") or "{}")
        editable = url.get("dir_info", {}).get("editable", False) and url.get("url") == "file://" + testbed
        yield dist.metadata["Name"], dist.requires or [], editable or inside(str(getattr(dist, "_path", "")))


dists = {}
for name, lines, own in installed():
    if name:
        dists.setdefault(canonicalize_name(name), (lines, own))
missing = {}
for lines, own in dists.values():
    asked = sorted(extras) if own else []
    for line in lines:
        req = Requirement(line)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in asked or [""]):
            continue
        if canonicalize_name(req.name) not in dists:
            req.marker = None
            missing.setdefault(canonicalize_name(req.name), str(req))
print(json.dumps(sorted(missing.values())))
"""


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
        [str(python), "-c", _MISSING, str(testbed), json.dumps(extras)],
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
