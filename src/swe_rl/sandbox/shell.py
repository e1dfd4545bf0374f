"""Pieces of shell shared by the backends."""

from __future__ import annotations

import shlex

from swe_rl.errors import OutputLimitError, SandboxError
from swe_rl.sandbox.base import EnvSpec, ExecResult, Limits

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def base_environment(env: EnvSpec, *, home: str, tmpdir: str = "/tmp") -> dict[str, str]:
    """The clean variable set a sandboxed command starts with: nothing inherited from the caller."""
    path = ":".join([*env.path_entries(), SYSTEM_PATH])
    environ = {
        "PATH": path,
        "HOME": home,
        "TMPDIR": tmpdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "PIP_NO_INPUT": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    if env.venv:
        environ["VIRTUAL_ENV"] = str(env.venv)
    return environ


def diff_command(base_commit: str) -> str:
    """Everything changed since ``base_commit``, new files included, as one patch.

    Bounded in what it hashes: before ``git add -A`` reads anything, each new or changed file's apparent
    size is checked (``git ls-files`` compares stat data, it reads no content), and one larger than
    FILE_CAP (a sparse ``truncate -s 100G`` included) ends the command at once with DIFF_TOO_LARGE and a
    line naming it: no patch with it could be under the cap. The agent's doing, so its outcome (the
    backends raise OutputLimitError or SandboxError, never an infrastructure error).
    """
    return (
        f"{_BIG_FILE_CHECK} && git add -A >/dev/null && "
        f"git -c core.quotepath=false diff --cached --no-color --binary {shlex.quote(base_commit)}"
    )


FILE_CAP = 64 * 1024 * 1024  # read_file, write_file and diff; over it: OutputLimitError
DIFF_TOO_LARGE = 91  # diff_command's exit status for a file over FILE_CAP
# The sizes of new and modified files (NUL-separated names, so any name works); a missing stat or xargs
# or awk (a minimal image) skips the check, and the command's own timeout bounds the diff as before.
_BIG_FILE_CHECK = (
    "{ ! command -v stat >/dev/null || ! command -v xargs >/dev/null || ! command -v awk >/dev/null || "
    "git ls-files -z --others --modified --exclude-standard "
    "| { xargs -0 -r stat -c '%s %n' -- 2>/dev/null || true; } "
    f'| awk -v cap={FILE_CAP} \'$1 > cap {{ sub(/^[0-9]+ /, ""); '
    f'printf "swe-rl: %s is larger than %d bytes: no patch with it fits the cap\\n", $0, cap; '
    f"bad = 1; exit }} END {{ exit bad ? {DIFF_TOO_LARGE} : 0 }}'; }}"
)


class ShellFileOps:
    """``exec``, ``read_file`` and ``diff`` for a backend that runs commands through ``_run`` (docker).

    Files travel as one base64 line, so binary content survives a text channel; the output cap is
    raised for them (a file is not an agent's command output). Sizes are checked inside the sandbox
    before anything is sent: an over-cap file or patch costs the caller no memory and is refused with
    :class:`OutputLimitError`, never truncated.
    """

    id: str
    env: EnvSpec
    limits: Limits

    async def exec(
        self, command: str, *, timeout: float, cwd: str | None = None, env: dict[str, str] | None = None
    ) -> ExecResult:
        return await self._run(command, timeout=timeout, cwd=cwd, env=env, cap=self.limits.output_bytes)

    async def _run(
        self, command: str, *, timeout: float, cwd: str | None, env: dict[str, str] | None, cap: int
    ) -> ExecResult:
        raise NotImplementedError

    async def read_file(self, path: str) -> bytes:
        import base64

        q = shlex.quote(path)
        command = (
            f"set -o pipefail\n[ -e {q} ] || {{ echo 'No such file or directory' >&2; exit 1; }}\n"
            f"[ -f {q} ] || {{ echo 'not a regular file' >&2; exit 1; }}\n"
            f"{_HAS_COREUTILS} || exec base64 -w0 -- {q}\n"  # an image without them: capped by the buffer
            f'[ "$(wc -c < {q})" -le {FILE_CAP} ] || exit {_TOO_LARGE}\n'
            f"head -c {FILE_CAP + 1} -- {q} | base64 -w0"
        )
        result = await self._run(command, timeout=120, cwd=None, env=None, cap=_B64_CAP)
        if result.returncode == _TOO_LARGE:
            raise OutputLimitError(f"{self.id}: {path} is larger than {FILE_CAP} bytes")
        if result.returncode != 0:
            message = result.output.strip()[-2000:]
            kind = FileNotFoundError if "No such file" in message else OSError
            raise kind(f"{self.id}: cannot read {path}: {message}")
        data = base64.b64decode(result.output) if not result.truncated else b""
        if result.truncated or len(data) > FILE_CAP:  # it grew after the size check
            raise OutputLimitError(f"{self.id}: {path} is larger than {FILE_CAP} bytes")
        return data

    async def diff(self) -> str:
        # measured first, so an over-cap patch is refused inside the sandbox, then sent capped
        diff = diff_command(self.env.base_commit)
        command = (
            f"set -o pipefail\n{_HAS_COREUTILS} || {{ {diff}; exit; }}\n"  # without them: capped by the buffer
            f'n=$({diff} | wc -c) || exit\n[ "$n" -le {FILE_CAP} ] || exit {_TOO_LARGE}\n'
            f"{diff} | head -c {FILE_CAP + 1}"
        )
        result = await self._run(command, timeout=300, cwd=None, env=None, cap=FILE_CAP + 1)
        if result.returncode == _TOO_LARGE or result.output_bytes > FILE_CAP:
            raise OutputLimitError(f"{self.id}: the patch is larger than {FILE_CAP} bytes")
        if result.returncode == DIFF_TOO_LARGE:
            raise OutputLimitError(f"{self.id}: {result.output.strip()[-2000:]}")
        if result.returncode != 0:
            raise SandboxError(f"git diff failed in {self.id}: {result.output[-2000:]}")
        return result.output


_TOO_LARGE = 90  # the exit status by which the checks above say "over the cap"
# Official images have coreutils; a minimal image may not (then the output buffer's cap bounds memory)
_HAS_COREUTILS = "command -v wc >/dev/null && command -v head >/dev/null"
_B64_CAP = FILE_CAP * 4 // 3 + 16
