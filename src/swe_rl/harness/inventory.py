"""What a patch did to the tree, as git sees it: a snapshot before and after applying it, and the revert.

Git's own view decides, never a reading of the patch text, so a header that lies, a hunk that only GNU
``patch`` understands, a binary patch or a rename changes nothing: the snapshot is a git tree of every
file under the repository (ignored ones included, ``git add -A -f`` into a private index), and the
change is ``git diff-tree`` between the trees. ``.git`` itself is compared by a digest of its listing
and contents. The patch's own file list (``git apply --numstat``) only serves to catch paths that leave
the repository, which no snapshot of it can see.
"""

from __future__ import annotations

import shlex

from pydantic import BaseModel, Field

from swe_rl.errors import SandboxError
from swe_rl.harness.evalscript import CANDIDATE_PATCH, SCRATCH
from swe_rl.sandbox.base import Sandbox

_FILES = {
    name: f"{SCRATCH}/{name}"
    for name in (
        "numstat.z",
        "tree0",
        "tree1",
        "gitdir0",
        "gitdir1",
        "changes.z",
        "packages.z",
        "modules.txt",
    )
}
_GIT = (
    "git -c core.fsmonitor=false -c core.untrackedCache=false -c core.hooksPath=/dev/null "
    "-c core.quotePath=false -c advice.addEmbeddedRepo=false"
)
_PREAMBLE = f"""set -u
export GIT_OPTIONAL_LOCKS=0 GIT_LITERAL_PATHSPECS=1 GIT_INDEX_FILE="$PWD/{SCRATCH}/snapshot.index"
G="{_GIT}"
gitdir_digest() {{
  find .git \\( -path .git/swe-rl -o -path .git/index \\) -prune -o -printf '%y %m %s %i %T@ %C@ %P\\0' \\
    | sort -z | sha1sum
  find .git \\( -path .git/swe-rl -o -path .git/index -o -path .git/objects \\) -prune -o -type f -print0 \\
    | sort -z | xargs -0 -r sha1sum | sha1sum
}}
snapshot() {{ $G add -A -f -- . >/dev/null 2>&1 && $G write-tree; }}
"""
# Module names importable from the env (stdlib and site-packages), by its own interpreter, isolated
# from the repository (-I -S): a new top-level module must not take one of them. Python 3.5 syntax.
_MODULES = r"""
import os, sys, sysconfig
names = set(sys.builtin_module_names)
paths = sysconfig.get_paths()
dirs = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
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
"""
BEFORE = (
    _PREAMBLE
    + f"""rm -f "$GIT_INDEX_FILE"
$G apply --numstat -z {CANDIDATE_PATCH} > {_FILES["numstat.z"]} 2>/dev/null || echo "numstat-failed"
snapshot > {_FILES["tree0"]} || echo "snapshot-failed"
gitdir_digest > {_FILES["gitdir0"]}
python -I -S -c {shlex.quote(_MODULES)} > {_FILES["modules.txt"]} 2>/dev/null || : > {_FILES["modules.txt"]}
"""
)
AFTER = (
    _PREAMBLE
    + f"""gitdir_digest > {_FILES["gitdir1"]}
cmp -s {_FILES["gitdir0"]} {_FILES["gitdir1"]} || {{ echo "gitdir-changed"; exit 0; }}
snapshot > {_FILES["tree1"]} || {{ echo "snapshot-failed"; exit 0; }}
$G diff-tree -r -z --no-renames --raw "$(cat {_FILES["tree0"]})" "$(cat {_FILES["tree1"]})" > {_FILES["changes.z"]}
GIT_LITERAL_PATHSPECS=0 $G ls-files -z -- ':(glob)**/__init__.py' > {_FILES["packages.z"]}
"""
)
_REMOVE, _RESTORE = f"{SCRATCH}/remove.z", f"{SCRATCH}/restore.z"
REVERT = (
    _PREAMBLE
    + f"""while IFS= read -r -d '' p; do
  rm -f -- "$p"; rmdir -p --ignore-fail-on-non-empty -- "$(dirname -- "$p")" 2>/dev/null
done < {_REMOVE}
if [ -s {_RESTORE} ]; then
  export GIT_INDEX_FILE="$PWD/{SCRATCH}/revert.index"
  $G read-tree "$(cat {_FILES["tree0"]})" && $G checkout-index -f -z --stdin < {_RESTORE}
  export GIT_INDEX_FILE="$PWD/{SCRATCH}/snapshot.index"
fi
snapshot > {_FILES["tree1"]} || {{ echo "snapshot-failed"; exit 0; }}
$G diff-tree -r -z --no-renames --raw "$(cat {_FILES["tree0"]})" "$(cat {_FILES["tree1"]})" > {_FILES["changes.z"]}
"""
)
SYMLINK, GITLINK, ABSENT = "120000", "160000", "000000"


class Change(BaseModel):
    """One path that differs between the tree before the patch and after it."""

    path: str
    old_mode: str
    new_mode: str

    @property
    def new(self) -> bool:
        return self.old_mode == ABSENT


class Inventory(BaseModel):
    """What the patch changed, as git sees it. ``problem``: why it could not be taken (never guessed)."""

    patch_paths: list[str] = Field(default_factory=list, description="git apply --numstat's paths.")
    changes: list[Change] = Field(default_factory=list)
    package_dirs: set[str] = Field(default_factory=set, description="Directories with an __init__.py.")
    installed: set[str] = Field(default_factory=set, description="Module names the env's Python has.")
    gitdir_changed: bool = False
    problem: str | None = None


async def before(box: Sandbox) -> Inventory:
    """Snapshot the tree and read the patch's own file list; the candidate patch is already written."""
    result = await box.exec(BEFORE, timeout=300)
    inventory = Inventory(
        patch_paths=_numstat_paths(await _read(box, "numstat.z")),
        installed=set((await _read(box, "modules.txt")).split()),
    )
    if "snapshot-failed" in result.output or result.returncode != 0:
        inventory.problem = f"cannot snapshot the tree before the patch: {result.output.strip()[-500:]}"
    return inventory


async def after(box: Sandbox, inventory: Inventory) -> Inventory:
    """The changes the applied patch made."""
    result = await box.exec(AFTER, timeout=300)
    found = inventory.model_copy(update={"changes": [], "package_dirs": set()})
    if "gitdir-changed" in result.output:
        found.gitdir_changed = True
    elif "snapshot-failed" in result.output or result.returncode != 0:
        found.problem = found.problem or f"cannot snapshot the patched tree: {result.output.strip()[-500:]}"
    else:
        found.changes = _changes(await _read(box, "changes.z"))
        found.package_dirs = {_parent(p) for p in _split(await _read(box, "packages.z"))}
    return found


async def revert(box: Sandbox, inventory: Inventory, paths: list[str]) -> list[Change] | None:
    """Put ``paths`` back as they were before the patch; return what still differs from that tree
    (None: the reverted tree could not be snapshot)."""
    by_path = {c.path: c for c in inventory.changes}
    remove = [p for p in paths if by_path[p].new]
    restore = [p for p in paths if not by_path[p].new]
    await box.write_file(_REMOVE, b"".join(_encode(p) + b"\0" for p in remove))
    await box.write_file(_RESTORE, b"".join(_encode(p) + b"\0" for p in restore))
    result = await box.exec(REVERT, timeout=300)
    if "snapshot-failed" in result.output or result.returncode != 0:
        return None
    return _changes(await _read(box, "changes.z"))


async def _read(box: Sandbox, name: str) -> str:
    try:
        data = await box.read_file(_FILES[name])
    except SandboxError:
        return ""
    return data.decode("utf-8", "surrogateescape")


def _encode(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def _split(data: str) -> list[str]:
    return [item for item in data.split("\0") if item]


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _numstat_paths(data: str) -> list[str]:
    """Paths of ``git apply --numstat -z``: 'added TAB deleted TAB path NUL', or for a rename or copy
    'added TAB deleted TAB NUL old NUL new NUL'."""
    paths: list[str] = []
    items = data.split("\0")
    i = 0
    while i < len(items):
        head, i = items[i], i + 1
        if not head:
            continue
        path = head.split("\t", 2)[2] if head.count("\t") >= 2 else ""
        if path:
            paths.append(path)
        else:
            paths.extend(p for p in items[i : i + 2] if p)
            i += 2
    return paths


def _changes(data: str) -> list[Change]:
    """``git diff-tree -r -z --raw``: ':old_mode new_mode old_sha new_sha status' NUL path NUL."""
    items = data.split("\0")
    changes = []
    for i in range(0, len(items) - 1, 2):
        meta, path = items[i], items[i + 1]
        if not meta.startswith(":"):
            continue
        old_mode, new_mode = meta[1:].split(" ")[:2]
        changes.append(Change(path=path, old_mode=old_mode, new_mode=new_mode))
    return changes
