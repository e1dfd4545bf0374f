"""Check out a repository at ``base_commit`` with no history after it.

The testbed is a fresh repository that fetched only ``base_commit`` and its ancestors: no later
commits, no remote refs, no tags past the base, no reflog. An agent cannot read the fix from history.

A mirror that lacks some old objects (a partial snapshot) cannot serve that history whole. The
testbed then takes every commit and tree of it but only the blobs of ``base_commit`` itself (a
partial clone), so ``git describe`` and the tags that versioning tools read still work; only when
the source cannot filter either is it the base commit alone (``--depth=1``).

Built by the env cache from a local mirror, a testbed's history is not fetched but hard-linked from the
repository's shared packs (gitpacks.py), which hold no object of a later commit either. Packs of a partial
snapshot hold the blobs it has, and the testbed is a partial clone whose promisor leads nowhere.
"""

from __future__ import annotations

from pathlib import Path

from swe_rl.envs.store.gitpacks import PackStore, link_packs
from swe_rl.errors import EnvBuildError, InfraError, SourceIncompleteError
from swe_rl.gitutil import git


def make_testbed(source: str, base_commit: str, dest: Path, packs: PackStore | None = None) -> None:
    """Create ``dest`` as a checkout of ``base_commit`` from ``source`` (path or URL); with ``packs``, its
    history as hard links to the repository's shared packs (gitpacks.py) where the source allows."""
    dest.mkdir(parents=True)
    try:
        git(["init", "-q", "-b", "main"], dest)
        # before anything is fetched or linked: a source that lacks the base's own files cannot make it, and
        # its history's packs (copied out of an image, 111 MiB for astropy) would be made or thawed for nothing
        _refuse_incomplete(source, base_commit, dest)
        shared = packs is not None and _link_shared(packs, base_commit, dest)
        partial = shared and any((dest / ".git" / "objects" / "pack").glob("*.promisor"))
        if partial:
            as_sealed_partial_clone(dest)
        if not shared:
            try:
                _fetch(dest, source, base_commit)
            except InfraError:
                try:
                    _fetch_without_old_blobs(dest, source, base_commit)
                    partial = True
                except InfraError:
                    _fetch(dest, source, base_commit, "--depth=1")
        git(["update-ref", "refs/heads/main", base_commit], dest)
        git(["reset", "-q", "--hard", base_commit], dest)  # a partial clone fetches the base's blobs here
        if partial:
            _seal_promisor(dest)
        _copy_tags_before(dest, source, base_commit)
        git(["config", "user.name", "swe-rl agent"], dest)
        git(["config", "user.email", "agent@swe-rl.invalid"], dest)
        git(["reflog", "expire", "--expire=now", "--all"], dest)
        if not shared:  # a repack would copy the shared packs into one of its own
            git(["gc", "-q", "--prune=now"], dest)
    except InfraError as exc:
        raise EnvBuildError(f"cannot check out {base_commit[:12]} from {source}: {exc}") from exc
    for leftover in ("FETCH_HEAD", "ORIG_HEAD"):
        (dest / ".git" / leftover).unlink(missing_ok=True)


def _refuse_incomplete(source: str, commit: str, dest: Path) -> None:
    if missing := _missing_files(source, commit, dest):
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise SourceIncompleteError(
            f"{source} lacks {len(missing)} file(s) of {commit[:12]}'s own tree: {shown}; a snapshot that "
            "leaves out large files cannot check it out (a complete mirror can)",
            repo=source,
        )


def _missing_files(source: str, commit: str, dest: Path) -> list[str]:
    """``path (blob)`` of each file of ``commit``'s tree whose blob ``source`` does not have ([] when the source
    cannot be asked: a URL)."""
    if not Path(source).is_dir():
        return []
    listing = git(["--git-dir", source, "ls-tree", "-r", commit], dest, check=False)
    blobs: dict[str, str] = {}
    for line in listing.splitlines():
        meta, _, path = line.partition("\t")  # <mode> <type> <object>\t<path>
        _, kind, sha = meta.split()
        if kind == "blob":
            blobs[sha] = path
    if not blobs:
        return []
    found = git(
        ["--git-dir", source, "cat-file", "--batch-check"], dest, check=False, input="\n".join(blobs) + "\n"
    )
    lost = [line.split()[0] for line in found.splitlines() if line.endswith(" missing")]
    return [f"{blobs[sha]} ({sha[:12]})" for sha in lost]


def _link_shared(packs: PackStore, commit: str, dest: Path) -> bool:
    """The history of ``commit`` linked from the shared packs; False when the source cannot make them."""
    if not packs.usable():
        return False
    try:
        files = packs.chain(commit)
    except InfraError:
        return False  # a snapshot that lacks old objects: the fetch below takes what it has
    link_packs(files, dest / ".git")
    return True


def _fetch(dest: Path, source: str, commit: str, *extra: str) -> None:
    git(
        [
            "-c",
            "protocol.version=2",
            "fetch",
            "-q",
            "--no-tags",
            "--no-write-fetch-head",
            *extra,
            source,
            commit,
        ],
        dest,
    )


_PROMISOR = "promisor"
PROMISOR_NOWHERE = "/nonexistent/history-blobs-not-fetched"  # a sealed testbed's promisor URL


def as_sealed_partial_clone(dest: Path) -> None:
    """Make ``dest``, whose linked packs are promisor packs, a partial clone: the blobs its snapshot lacked are
    promised by a promisor that leads nowhere."""
    git(["config", "core.repositoryformatversion", "1"], dest)
    git(["config", "extensions.partialClone", _PROMISOR], dest)
    git(["config", f"remote.{_PROMISOR}.promisor", "true"], dest)
    git(["config", f"remote.{_PROMISOR}.url", PROMISOR_NOWHERE], dest)


def _fetch_without_old_blobs(dest: Path, source: str, commit: str) -> None:
    """Every commit and tree up to ``commit``, blobs only as the checkout asks for them."""
    key = f"remote.{_PROMISOR}"
    git(["config", f"{key}.url", source], dest)
    git(["config", f"{key}.promisor", "true"], dest)
    git(["config", f"{key}.partialclonefilter", "blob:none"], dest)
    # a local mirror's upload-pack refuses filters unless told (a hosting server allows them already)
    git(["config", f"{key}.uploadpack", "git -c uploadpack.allowFilter=true upload-pack"], dest)
    try:
        _fetch(dest, _PROMISOR, commit, "--filter=blob:none")
    except InfraError:
        git(["config", "--remove-section", key], dest, check=False)
        raise


def _seal_promisor(dest: Path) -> None:
    """The checkout has its blobs: the promisor stays (git needs one for the blobs it lacks) but
    points nowhere, so nothing inside a sandbox can fetch through it, later commits included."""
    key = f"remote.{_PROMISOR}"
    git(["config", f"{key}.url", PROMISOR_NOWHERE], dest)
    git(["config", "--unset-all", f"{key}.uploadpack"], dest, check=False)  # set only by a filtered fetch


def _copy_tags_before(dest: Path, source: str, base_commit: str) -> None:
    """Tags on ``base_commit`` or its ancestors (versioning tools such as setuptools_scm read them);
    tags on later commits stay out, like the commits themselves."""
    listing = git(["ls-remote", "--tags", source], dest, check=False)
    peeled: dict[str, str] = {}
    for line in listing.splitlines():
        sha, _, ref = line.partition("\t")
        if ref.startswith("refs/tags/"):
            name = ref.removeprefix("refs/tags/")
            if name.endswith("^{}"):
                peeled[name[:-3]] = sha
            else:
                peeled.setdefault(name, sha)
    # Only the commits already here are asked about: naming any other object in a partial clone
    # would fetch it through the promisor, later commits included.
    ancestors = set(git(["rev-list", base_commit], dest).split())
    for name, sha in peeled.items():
        if sha in ancestors:
            git(["update-ref", f"refs/tags/{name}", sha], dest)
