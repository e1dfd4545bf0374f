"""The import probe (import_check.py): imports the modules of every installed distribution that requires numpy,
numpy's own and the editable installs', each in its own interpreter, so that one failure cannot change the next
(a half-imported numba left in sys.modules), and prints one JSON line per module.

Fed to the venv's own interpreter with ``-c`` (its working directory, the testbed, first on its path, as the
tests see it), which may be any Python from 3.5: no f-strings, no variable annotations (types are comments for
mypy). The standard library only; on a Python before 3.8 it checks nothing.
"""

import json
import subprocess
import sys

try:
    from importlib import metadata
except ImportError:
    sys.exit(0)  # Python < 3.8: nothing checked


def needs_numpy(dist):  # type: (metadata.Distribution) -> bool
    for req in dist.requires or []:
        name = req.split(";")[0].strip()
        for sep in "<>=!~[ (":
            name = name.split(sep)[0]
        if name.strip().lower() == "numpy" and "extra" not in req.partition(";")[2]:
            return True
    return False


def editable(dist):  # type: (metadata.Distribution) -> bool
    text = dist.read_text("direct_url.json") or "{}"
    return bool(json.loads(text).get("dir_info", {}).get("editable"))


def modules(dist):  # type: (metadata.Distribution) -> list[str]
    text = dist.read_text("top_level.txt")
    if text:
        names = text.split()
    else:
        names = []
        for f in dist.files or []:
            top = str(f).split("/")[0]
            if top.endswith(".py"):
                top = top[:-3]
            if "." in top or top.startswith("__editable__") or top in ("..", "bin", "__pycache__"):
                continue
            names.append(top)
    if not names and editable(dist):
        names = [dist.metadata["Name"].replace("-", "_").lower()]
    return sorted(set(n for n in names if n.isidentifier() and not n.startswith("_")))


# the distribution each top-level name of site-packages belongs to: a failure's culprit is the owner of the innermost
# frame of its traceback in site-packages (xarray's import failing in pydap's model.py: pydap)
owners = {}  # type: dict[str, tuple[str, str]]
for dist in metadata.distributions():
    for f in dist.files or []:
        top = str(f).split("/")[0]
        top = top[:-3] if top.endswith(".py") else top
        owners.setdefault(top, (dist.metadata["Name"], dist.version))


def culprit(output):  # type: (str) -> tuple[str, str]
    found = ("", "")
    for line in output.splitlines():
        line = line.strip()
        if line.startswith('File "') and "/site-packages/" in line:
            top = line[6:].split('"')[0].split("/site-packages/", 1)[1].split("/")[0]
            top = top[:-3] if top.endswith(".py") else top
            found = owners.get(top, found)
    return found


seen = set()  # type: set[str]
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if (
        not name
        or name.lower() in seen
        or not (needs_numpy(dist) or editable(dist) or name.lower() == "numpy")
    ):
        continue
    seen.add(name.lower())
    for module in modules(dist):
        try:
            proc = subprocess.run(
                [sys.executable, "-c", "import " + module],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                universal_newlines=True,  # noqa: UP021 (text= is 3.7's)
                timeout=120,
            )
        except subprocess.TimeoutExpired:
            error, cause = "no answer in 120 s", ("", "")
        else:
            lines = proc.stdout.strip().splitlines() or ["exit %d" % proc.returncode]  # noqa: UP031
            error = "" if proc.returncode == 0 else lines[-1]
            cause = culprit(proc.stdout) if error else ("", "")
        print(
            json.dumps(
                {
                    "name": name,
                    "version": dist.version,
                    "module": module,
                    "error": error,
                    "culprit": cause[0],
                    "culprit_version": cause[1],
                }
            ),
            flush=True,
        )
