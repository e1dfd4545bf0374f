"""Sandboxes: one protocol (:class:`Sandbox`), several backends.

``local`` (a temp copy on the host, development only) is always available; ``ns`` (bubblewrap +
overlayfs) and ``docker`` load lazily when asked for.
"""

from __future__ import annotations

from swe_rl.sandbox.base import EnvSpec, ExecResult, Limits, Sandbox, SandboxFactory
from swe_rl.sandbox.config import BACKENDS, BackendConfig, parse_backend


def get_factory(backend: str | BackendConfig, *, token: str | None = None) -> SandboxFactory:
    """The factory of a backend (a spec string, parsed by :func:`parse_backend`, or its config); a pool
    server is sent ``token`` as its bearer token."""
    config = parse_backend(backend) if isinstance(backend, str) else backend
    return config.build(token=token)


__all__ = [
    "BACKENDS",
    "BackendConfig",
    "EnvSpec",
    "ExecResult",
    "Limits",
    "Sandbox",
    "SandboxFactory",
    "get_factory",
    "parse_backend",
]
