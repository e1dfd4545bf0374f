"""Sandbox backends as typed settings: one parser for the ``--backend`` / ``SWE_RL_BACKEND`` strings, and
``.build()`` for the factory each names.

| spec | config | sandboxes |
|---|---|---|
| ``ns`` | :class:`NsBackend` | bubblewrap + overlayfs on this machine |
| ``docker`` | :class:`DockerBackend` | containers of this machine's Docker engine |
| ``local`` | :class:`LocalBackend` | a temporary copy on the host (development only: no isolation) |
| ``http(s)://...`` (or ``remote:http(s)://...``) | :class:`PoolBackend` | leased from a pool server |

``auto`` (the best backend this machine runs) is decided by the command line, which knows the machine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field

from swe_rl.errors import ConfigError

if TYPE_CHECKING:
    from swe_rl.sandbox.base import SandboxFactory

BACKENDS = ("ns", "docker", "local")


class NsBackend(BaseModel):
    kind: Literal["ns"] = "ns"

    @property
    def spec(self) -> str:
        return self.kind

    def build(self, *, token: str | None = None) -> SandboxFactory:
        from swe_rl.sandbox.ns import NsFactory

        return NsFactory()


class DockerBackend(BaseModel):
    kind: Literal["docker"] = "docker"

    @property
    def spec(self) -> str:
        return self.kind

    def build(self, *, token: str | None = None) -> SandboxFactory:
        from swe_rl.sandbox.docker import DockerFactory

        return DockerFactory()


class LocalBackend(BaseModel):
    kind: Literal["local"] = "local"

    @property
    def spec(self) -> str:
        return self.kind

    def build(self, *, token: str | None = None) -> SandboxFactory:
        from swe_rl.sandbox.local import LocalFactory

        return LocalFactory()


class PoolBackend(BaseModel):
    kind: Literal["pool"] = "pool"
    url: str = Field(pattern=r"^https?://", description="The pool server.")

    @property
    def spec(self) -> str:
        return self.url

    def build(self, *, token: str | None = None) -> SandboxFactory:
        """A client of the pool server, sending ``token`` as its bearer token."""
        from swe_rl.sandbox.remote import RemoteFactory

        return RemoteFactory(self.url, token)


BackendConfig = Annotated[NsBackend | DockerBackend | LocalBackend | PoolBackend, Field(discriminator="kind")]


def parse_backend(spec: str) -> NsBackend | DockerBackend | LocalBackend | PoolBackend:
    """The config a backend spec names; ConfigError for one that names none."""
    spec = spec.strip()
    if spec.startswith(("http://", "https://", "remote:")):
        url = spec.removeprefix("remote:")
        if not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"sandbox backend {spec!r}: a pool server's URL starts with http:// or https://"
            )
        return PoolBackend(url=url)
    if spec == "ns":
        return NsBackend()
    if spec == "docker":
        return DockerBackend()
    if spec == "local":
        return LocalBackend()
    raise ConfigError(
        f"unknown sandbox backend {spec!r}; available: {', '.join(BACKENDS)} or a pool server's URL"
    )
