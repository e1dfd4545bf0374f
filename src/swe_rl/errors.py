"""One exception tree for the whole package.

Expected outcomes (a failing test, a patch that does not apply, a command that exits non-zero or
times out) are *data*, returned in results. Exceptions are for what stops the work itself::

    SweRlError
    ├── ConfigError(SweRlError, ValueError)        bad user input: options, files, records
    │   ├── TaskFormatError                        a malformed task record (names record and field)
    │   ├── SynthError                             a repository tasks cannot be synthesized from
    │   ├── MineError                              a repository or range tasks cannot be mined from
    │   ├── RepoNotFoundError                      no mirror (and no network) holds a task's repository
    │   ├── InProcessObjectError                   a model or task object given to an executor whose
    │   │                                          episodes run in another process
    │   └── MissingExtraError(ConfigError, ImportError)
    ├── OutputLimitError(SweRlError, OSError)      a file or patch larger than its cap: refused, never truncated
    └── InfraError(SweRlError, RuntimeError)       the machinery failed; not a wrong answer (but see below)
        ├── SandboxError                           a sandbox could not be created, died, or misbehaved
        │   ├── SandboxUnavailableError            a backend cannot run on this machine
        │   └── BackendLostError                   the node, server or engine behind a sandbox is gone
        ├── EnvBuildError                          an environment could not be built
        └── LLMError                               the model endpoint failed after its retries
    ServiceError (service/server_kit.py)           a server's answer as an exception: its wire kind
                                                   (bad_request, capacity, ...) and Retry-After, which
                                                   the endpoint turns into the structured error body

Who a failure is charged to is decided by where it happened, not by these types alone (docs/TRAINING.md,
"Outcome attribution"): a SandboxError or OutputLimitError from the agent's own sandbox while the agent
runs is the agent's outcome, scored; a BackendLostError, a sandbox that could not be created, a grading
sandbox that failed and an unreachable model are infrastructure, never scored.
"""

from __future__ import annotations


class SweRlError(Exception):
    """Root of every error raised by swe-rl."""


class ConfigError(SweRlError, ValueError):
    """Invalid user input: an option, a file, a record."""


class TaskFormatError(ConfigError):
    """A task record is malformed. The message names the record and the field."""

    def __init__(self, message: str, *, record: str | None = None, field: str | None = None) -> None:
        self.record = record
        self.field = field
        where = ", ".join(
            p for p in (f"record {record}" if record else "", f"field {field!r}" if field else "") if p
        )
        super().__init__(f"{where}: {message}" if where else message)


class SynthError(ConfigError):
    """Tasks cannot be synthesized from a repository: its suite fails or is empty, a file does not parse."""


class MineError(ConfigError):
    """Tasks cannot be mined: the path is not a git repository, the range holds no commit, no test exists."""


class RepoNotFoundError(ConfigError):
    """No source of a task's repository: no mirror in the repo cache, and network access not allowed.

    Not the task's fault: adding the mirror makes it buildable (``env build`` retries it on resume)."""

    def __init__(self, message: str, *, repo: str) -> None:
        self.repo = repo
        super().__init__(message)


class SourceIncompleteError(RepoNotFoundError):
    """The repository's source lacks objects of the commit a task needs (a snapshot that leaves out its largest
    files): that commit cannot be checked out from it. Not the task's fault: a complete mirror builds it."""


class InProcessObjectError(ConfigError):
    """An object of this process (a model, a task) handed to an executor whose episodes run in another process,
    where it cannot go: send what the request can carry instead (a served model's endpoint, the task's record)."""


class MissingExtraError(ConfigError, ImportError):
    """An optional dependency is not installed; the message names the extra that provides it."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(f"{purpose} needs {package!r}: install it with `pip install 'swe-rl[{extra}]'`")


class OutputLimitError(SweRlError, OSError):
    """A file, patch or body is larger than its cap. It is refused whole, never truncated and used."""


class InfraError(SweRlError, RuntimeError):
    """The infrastructure failed (sandbox died, harness timed out). Not a wrong answer, unless the agent's
    own commands broke its own sandbox (the module's docstring)."""


class SandboxError(InfraError):
    """A sandbox could not be created, died, or broke its protocol."""


class SandboxUnavailableError(SandboxError):
    """A backend cannot run on this machine (not root, no overlayfs, no dockerd)."""


class BackendLostError(SandboxError):
    """What runs a sandbox is gone or failing: a node, an exec or pool server, a container engine.

    Raised instead of a plain SandboxError when the backend can tell that the fault is not the sandbox's
    own (the engine does not answer, the node is down): nothing the agent did inside can cause it.
    """


class EnvBuildError(InfraError):
    """An environment could not be built."""


class LLMError(InfraError):
    """The model endpoint failed (down, garbage, timeouts, too long) after retries. Never a wrong answer."""
