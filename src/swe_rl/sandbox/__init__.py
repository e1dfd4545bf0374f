"""Sandboxes: one protocol (:class:`Sandbox`), several backends.

``local`` (a temp copy on the host, development only) is always available; ``ns`` (bubblewrap +
overlayfs) and ``docker`` load lazily when asked for.
"""

from __future__ import annotations

from swe_rl.errors import ConfigError
from swe_rl.sandbox.base import EnvSpec, ExecResult, Limits, Sandbox, SandboxFactory

BACKENDS = ("ns", "docker", "local")


def get_factory(backend: str, *, token: str | None = None) -> SandboxFactory:
    """The factory of a backend by name; ``http://...`` (or ``remote:http://...``) is a pool server, sent
    ``token`` as its bearer token."""
    if backend.startswith(("http://", "https://", "remote:")):
        from swe_rl.sandbox.remote import RemoteFactory

        return RemoteFactory(backend.removeprefix("remote:"), token)
    if backend == "local":
        from swe_rl.sandbox.local import LocalFactory

        return LocalFactory()
    if backend == "ns":
        from swe_rl.sandbox.ns import NsFactory

        return NsFactory()
    if backend == "docker":
        from swe_rl.sandbox.docker import DockerFactory

        return DockerFactory()
    raise ConfigError(f"unknown sandbox backend {backend!r}; available: {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "EnvSpec", "ExecResult", "Limits", "Sandbox", "SandboxFactory", "get_factory"]
