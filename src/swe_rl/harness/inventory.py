"""What a patch did to the tree, as git sees it: a snapshot before and after applying it, and the revert.

Git's own view decides, never a reading of the patch text, so a header that lies, a hunk that only GNU
``patch`` understands, a binary patch or a rename changes nothing: the snapshot is a git tree of every
file under the repository (ignored ones included, ``git add -A -f`` into a private index), and the
change is ``git diff-tree`` between the trees. ``.git`` itself is compared by a digest of its listing
and contents. The patch's own file list (``git apply --numstat``) only serves to catch paths that leave
the repository, which no snapshot of it can see.
"""

from __future__ import annotations

import base64
import shlex
from pathlib import Path

from pydantic import BaseModel, Field

from swe_rl.errors import SandboxError
from swe_rl.harness.evalscript import CANDIDATE_PATCH, SCRATCH
from swe_rl.harness.staging import stage
from swe_rl.sandbox.base import ExecResult, Sandbox

_GIT = (
    "git -c core.fsmonitor=false -c core.untrackedCache=false -c core.hooksPath=/dev/null "
    "-c core.quotePath=false -c advice.addEmbeddedRepo=false"
)
_MARK = "swe-rl-inventory:"
_PREAMBLE = f"""set -u
S={SCRATCH}
for t in find sort sha1sum base64; do  # a minimal image may lack them: say so, never guess
  command -v $t >/dev/null || {{ echo "snapshot-failed: the environment has no $t"; exit 0; }}
done
export GIT_OPTIONAL_LOCKS=0 GIT_LITERAL_PATHSPECS=1 GIT_INDEX_FILE="$PWD/$S/snapshot.index"
G="{_GIT}"
gitdir_digest() {{  # its entries (a directory's own times change with git's index.lock) and the contents
  # of its files but the objects (named by their contents), each a NUL-ended record, sorted: one pipeline
  find .git \\( -path .git/swe-rl -o -path .git/index \\) -prune -o -type d -printf 'd %m %P\\0' \\
    -o -printf '%y %m %s %i %T@ %C@ %P\\0' \\( -path '.git/objects/*' -o ! -type f -o -exec sha1sum -z {{}} + \\) \\
    | sort -z | sha1sum
}}
snapshot() {{ $G add -A -f -- . >/dev/null 2>&1 && $G write-tree > "$S/$1"; }}
changes() {{ $G diff-tree -r -z --no-renames --raw "$(< $S/tree0)" "$(< $S/$1)" > $S/changes; }}
show() {{  # each file base64 on a line of its own after the mark (one round trip; a line cut short is read again)
  for f in "$@"; do printf '\\n{_MARK}%s ' "$f"; base64 -w0 < "$S/$f"; done
  echo
}}
"""
# Module names importable from the env, by its own interpreter, isolated from the repository (-I -S): a new
# top-level module must not take one of them (insandbox/list_modules.py)
_MODULES = (Path(__file__).with_name("insandbox") / "list_modules.py").read_text()
_LIST_MODULES = f"python -I -S -c {shlex.quote(_MODULES)}"
_BEFORE_TREE = f"""[ ! -e "$GIT_INDEX_FILE" ] || rm -f "$GIT_INDEX_FILE"
$G apply --numstat -z {CANDIDATE_PATCH} > $S/numstat 2>/dev/null || : > $S/numstat
snapshot tree0 || echo "snapshot-failed"
gitdir_digest > $S/gitdir0
"""
BEFORE = (
    _PREAMBLE
    + _BEFORE_TREE
    + f"""{_LIST_MODULES} > $S/modules 2>/dev/null || : > $S/modules
show numstat modules
"""
)
# The same, for a caller that knows the env's module names already (harness/grade_many.py: one listing per env)
BEFORE_KNOWING_MODULES = _PREAMBLE + _BEFORE_TREE + "show numstat\n"
AFTER = (
    _PREAMBLE
    + """gitdir_digest > $S/gitdir1
d0= d1=; read -r d0 < $S/gitdir0; read -r d1 < $S/gitdir1  # bash's own read: no process
[ -n "$d0" ] && [ "$d0" = "$d1" ] || { echo "gitdir-changed"; exit 0; }
snapshot tree1 || { echo "snapshot-failed"; exit 0; }
changes tree1
GIT_LITERAL_PATHSPECS=0 $G ls-files -z -- ':(glob)**/__init__.py' > $S/packages
show changes packages
"""
)
_REVERT_LIST = f"{SCRATCH}/revert"
# Each entry of the list: '-' path (new with the patch: removed) or '+' path (put back from tree0).
REVERT = (
    _PREAMBLE
    + """: > $S/restore
while IFS= read -r -d '' entry; do
  p=${entry#?}
  case $entry in
    -*) rm -f -- "$p"; rmdir -p --ignore-fail-on-non-empty -- "$(dirname -- "$p")" 2>/dev/null ;;
    *) printf '%s\\0' "$p" >> $S/restore ;;
  esac
done < $S/revert
if [ -s $S/restore ]; then
  GIT_INDEX_FILE="$PWD/$S/revert.index" $G read-tree "$(< $S/tree0)" \\
    && GIT_INDEX_FILE="$PWD/$S/revert.index" $G checkout-index -f -z --stdin < $S/restore
fi
snapshot tree2 || { echo "snapshot-failed"; exit 0; }
changes tree2
show changes
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
    base_packages: set[str] = Field(
        default_factory=set, description="Directories with an __init__.py before the patch."
    )
    installed: set[str] = Field(default_factory=set, description="Module names the env's Python has.")
    gitdir_changed: bool = False
    problem: str | None = None


async def installed_modules(box: Sandbox) -> set[str]:
    """Module names importable from the env's Python (the same for every sandbox of the env: its stdlib and
    site-packages are read-only there)."""
    result = await box.exec(_LIST_MODULES, timeout=300)
    return set(result.output.split()) if result.returncode == 0 else set()


async def before(box: Sandbox, setup: str = "", installed: set[str] | None = None) -> Inventory:
    """Snapshot the tree and read the patch's own file list. ``setup`` (run first) or an earlier
    write has put the candidate patch in place. ``installed``: the env's module names, when known
    (:func:`installed_modules`); else they are listed too."""
    result = await box.exec(setup + (BEFORE if installed is None else BEFORE_KNOWING_MODULES), timeout=300)
    if "snapshot-failed: the environment has no" in result.output:
        return Inventory(problem=f"cannot snapshot the tree before the patch: {_tail(result)}")
    found = await _shown(box, result, "numstat", *([] if installed is not None else ["modules"]))
    inventory = Inventory(
        patch_paths=_numstat_paths(found.get("numstat", "")),
        installed=set(found.get("modules", "").split()) if installed is None else set(installed),
    )
    if "snapshot-failed" in result.output or result.returncode != 0:
        inventory.problem = f"cannot snapshot the tree before the patch: {_tail(result)}"
    return inventory


async def after(box: Sandbox, inventory: Inventory) -> Inventory:
    """The changes the applied patch made."""
    result = await box.exec(AFTER, timeout=300)
    found = inventory.model_copy(update={"changes": [], "package_dirs": set(), "base_packages": set()})
    if "gitdir-changed" in result.output:
        found.gitdir_changed = True
    elif "snapshot-failed" in result.output or result.returncode != 0:
        found.problem = found.problem or f"cannot snapshot the patched tree: {_tail(result)}"
    else:
        parts = await _shown(box, result, "changes", "packages")
        found.changes = _changes(parts.get("changes", ""))
        found.package_dirs = {_parent(p) for p in _split(parts.get("packages", ""))}
        found.base_packages = _base_packages(found.package_dirs, found.changes)
    return found


async def revert(box: Sandbox, inventory: Inventory, paths: list[str]) -> list[Change] | None:
    """Put ``paths`` back as they were before the patch; return what still differs from that tree
    (None: the reverted tree could not be snapshot)."""
    new = {c.path for c in inventory.changes if c.new}
    entries = b"".join((b"-" if p in new else b"+") + _encode(p) + b"\0" for p in paths)
    write = await stage(box, {_REVERT_LIST: entries})
    result = await box.exec(write + REVERT, timeout=300)
    if "snapshot-failed" in result.output or result.returncode != 0:
        return None
    return _changes((await _shown(box, result, "changes")).get("changes", ""))


async def _shown(box: Sandbox, result: ExecResult, *names: str) -> dict[str, str]:
    """The files a script showed: name -> content (paths decoded as UTF-8, odd bytes kept as surrogates).
    From the script's output, or read from the sandbox where the output was cut; a file the script did not
    write is left out."""
    lines = {}
    if not result.truncated:
        for line in result.output.split("\n"):
            if line.startswith(_MARK):
                name, _, encoded = line[len(_MARK) :].partition(" ")
                lines[name] = encoded.strip()
    parts: dict[str, str] = {}
    for name in names:
        try:
            data = base64.b64decode(lines[name], validate=True) if name in lines else None
        except ValueError:
            raise SandboxError(
                f"{box.id}: the inventory's {name} is malformed: {lines[name][:200]!r}"
            ) from None
        if data is None:
            try:
                data = await box.read_file(f"{SCRATCH}/{name}")
            except (SandboxError, OSError):
                continue
        parts[name] = data.decode("utf-8", "surrogateescape")
    return parts


def _tail(result: ExecResult) -> str:
    return result.output.partition(f"\n{_MARK}")[0].strip()[-500:]


def _encode(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def _split(data: str) -> list[str]:
    return [item for item in data.split("\0") if item]


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _base_packages(package_dirs: set[str], changes: list[Change]) -> set[str]:
    """The package directories before the patch: those after it, less the ``__init__.py`` files it added,
    plus those it deleted."""
    inits = [c for c in changes if c.path == "__init__.py" or c.path.endswith("/__init__.py")]
    added = {_parent(c.path) for c in inits if c.new}
    deleted = {_parent(c.path) for c in inits if c.new_mode == ABSENT}
    return (package_dirs - added) | deleted


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
