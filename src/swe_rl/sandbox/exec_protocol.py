"""Wire models of the execution service, shared by the servers (service/) and the client (remote.py).

Field names follow the seed's exec and pool servers so that existing clients keep working.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from swe_rl.sandbox.base import Limits

MAX_COMMAND = 1_000_000
MAX_FILE = 64 * 1024 * 1024

ErrorKind = Literal[
    "bad_request",
    "too_large",
    "not_found",
    "unauthorized",
    "capacity",
    "node_down",
    "sandbox_error",
    "timeout",
    "draining",
    "cancelled",
    "internal",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ErrorBody(_Model):
    kind: ErrorKind
    message: str


class ErrorResponse(_Model):
    ok: Literal[False] = False
    error: ErrorBody


class CreateRequest(_Model):
    image: str = Field(min_length=1, max_length=512, description="Docker image, env key or instance id.")
    cwd: str = "/testbed"
    timeout: float = Field(default=600, gt=0, le=86_400)
    limits: Limits | None = Field(
        default=None, description="Asked-for limits; the node caps them at its own."
    )


class CreateResponse(_Model):
    ok: bool = True
    container_id: str
    name: str


class ExecRequest(_Model):
    container_id: str = ""
    lease_id: str = ""
    command: str = Field(max_length=MAX_COMMAND)
    cwd: str | None = None
    timeout: float = Field(default=180, gt=0, le=86_400)
    env: dict[str, str] | None = None


def timeout_note(seconds: float) -> str:
    """What the seed's exec server answers for a timed-out command (with returncode -1)."""
    return f"\nCommand timed out after {seconds:g}s"


class ExecResponse(_Model):
    ok: bool = True
    returncode: int
    output: str
    timed_out: bool = False
    duration: float = 0.0
    output_bytes: int = 0


class IdRequest(_Model):
    container_id: str = ""
    lease_id: str = ""
    cwd: str | None = None


class DiffResponse(_Model):
    ok: bool = True
    patch: str
    returncode: int = 0


class EvaluateRequest(_Model):
    container_id: str = ""
    lease_id: str = ""
    patch: str | None = Field(default=None, max_length=MAX_FILE)
    instance: str | dict[str, Any] | None = Field(
        default=None, description="Instance id or a full task record."
    )
    eval_script: str | None = Field(default=None, max_length=MAX_COMMAND)
    cwd: str | None = None
    timeout: float = Field(default=1800, gt=0, le=86_400)


class EvaluateResponse(_Model):
    ok: bool = True
    resolved: bool = Field(description="The eval script exited 0, or the official grading resolved the task.")
    returncode: int | None = Field(
        description="The eval script's exit code (official grading: 0 resolved, 1 not); null when no script ran."
    )
    output: str
    report: dict[str, Any] = Field(default_factory=dict)
    error: str | None = Field(
        default=None, description="Why it is not resolved without a verdict (as the seed's 'error')."
    )


class FileReadRequest(_Model):
    container_id: str = ""
    lease_id: str = ""
    path: str = Field(min_length=1, max_length=4096)


class FileWriteRequest(FileReadRequest):
    data_b64: str = Field(max_length=MAX_FILE * 4 // 3 + 8)


class FileResponse(_Model):
    ok: bool = True
    data_b64: str = ""


class OkResponse(_Model):
    ok: bool = True


class AllocateRequest(_Model):
    image: str = Field(min_length=1, max_length=512)
    instance_id: str = ""
    ttl: float | None = Field(default=None, gt=0, le=86_400, description="Lease TTL; renewed by any call.")
    wait: float | None = Field(
        default=None, ge=0, le=3600, description="Seconds to wait in the queue when full."
    )
    limits: Limits | None = None


class AllocateResponse(_Model):
    ok: bool = True
    lease_id: str
    container_id: str
    node_url: str
    expires_in: float = 0.0


class HeartbeatResponse(_Model):
    ok: bool = True
    expires_in: float
