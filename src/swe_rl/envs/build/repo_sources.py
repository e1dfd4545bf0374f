"""Where a task's repository comes from: the builtin suite, a local repo cache, or a git URL."""

from __future__ import annotations

from pathlib import Path

from swe_rl.errors import RepoNotFoundError
from swe_rl.tasks.builtin import builtin_mirror


def find_repo_source(repo: str, repo_cache: Path | None, *, allow_network: bool = False) -> str:
    """A git source for ``owner/name``: a bare mirror path, or a URL when ``allow_network``.

    A repo cache holds mirrors as ``<dir>/<owner>/<name>.git``, ``<dir>/<owner>__<name>.git`` or
    ``<dir>/<name>.git`` (bare), or the same names without ``.git`` (non-bare clones). None of them, and no
    network: RepoNotFoundError (``env build`` calls such an instance unfetchable).
    """
    builtin = builtin_mirror(repo)
    if builtin is not None:
        return str(builtin)
    owner, _, name = repo.partition("/")
    if repo_cache is not None:
        for rel in (f"{owner}/{name}", f"{owner}__{name}", name):
            for candidate in (repo_cache / f"{rel}.git", repo_cache / rel):
                if (candidate / "HEAD").is_file() or (candidate / ".git").exists():
                    return str(
                        candidate.absolute()
                    )  # git runs elsewhere: a relative path means nothing there
    if allow_network:
        return f"https://github.com/{repo}.git"
    where = f"in the repo cache {repo_cache}" if repo_cache else "(no --repo-cache given)"
    raise RepoNotFoundError(
        f"no local mirror of {repo} {where}; create one with "
        f"`git clone --mirror https://github.com/{repo}.git <repo-cache>/{owner}/{name}.git` "
        "or allow network access",
        repo=repo,
    )
