"""The requirements no installed distribution meets by name (pip_fallback.py): of every distribution of the venv,
and of the repo's own with the extras the install command asked for; printed as one JSON list of requirement
strings without markers.

Fed with ``-c`` to the venv's interpreter with a pip on its path (the pip tool, else the venv's own), with the
testbed and the extras (a JSON list) as its arguments. It may be any Python from 3.5: no f-strings, no variable
annotations (types are comments for mypy). packaging is pip's; importlib.metadata from Python 3.8, pip's
pkg_resources before it.
"""

import json
import os
import sys

from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name

MYPY = False
if MYPY:
    from collections.abc import Iterator  # noqa: F401 (in a type comment)

testbed, extras = os.path.realpath(sys.argv[1]), set(json.loads(sys.argv[2]))


def inside(where):  # type: (str | None) -> bool
    # setup.py develop: the project's metadata is in the repo
    if not where:  # (realpath("") is the working directory)
        return False
    where = os.path.realpath(where)
    return where == testbed or where.startswith(testbed + os.sep)


def installed():  # type: () -> Iterator[tuple[str, list[str], bool]]
    # (name, requirement lines, the repo's own?) of each distribution
    try:
        from importlib import metadata
    except ImportError:
        from pip._vendor import pkg_resources  # its requires() evaluates the markers itself

        for legacy in pkg_resources.working_set:
            asked = tuple(e for e in legacy.extras if e in extras) if inside(legacy.location) else ()
            lines = [r.project_name + str(r.specifier) for r in legacy.requires(asked)]
            yield legacy.project_name, lines, False
        return
    for dist in metadata.distributions():
        url = json.loads(dist.read_text("direct_url.json") or "{}")
        editable = url.get("dir_info", {}).get("editable", False) and url.get("url") == "file://" + testbed
        yield dist.metadata["Name"], dist.requires or [], editable or inside(str(getattr(dist, "_path", "")))


dists = {}  # type: dict[str, tuple[list[str], bool]]
for name, lines, own in installed():
    if name:
        dists.setdefault(canonicalize_name(name), (lines, own))
missing = {}  # type: dict[str, str]
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
