"""The module names importable from an env (stdlib and site-packages), one a line (inventory.py).

Never imported by swe-rl: run in a sandbox with this file's text as ``python -I -S -c CODE``, by the env's own
interpreter, isolated from the repository, so that a new top-level module of a patch cannot take one of them.
Without ``site``, sys.prefix is the base interpreter's, so a venv's own site-packages is found from its
pyvenv.cfg. Written for Python 3.5.
"""

import os
import sys
import sysconfig

names = set(sys.builtin_module_names)
paths = sysconfig.get_paths()
dirs = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
venv = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
    own = sysconfig.get_paths(vars={"base": venv, "platbase": venv})
    dirs += [own.get("purelib"), own.get("platlib")]
dirs += [os.path.join(d, "lib-dynload") for d in dirs if d]
for d in dirs:
    try:
        entries = os.listdir(d)
    except (OSError, TypeError):
        continue
    for entry in entries:
        name = entry.split(".")[0]
        if name.isidentifier() and name != "__pycache__":
            names.add(name)
sys.stdout.write("\n".join(sorted(names)))
