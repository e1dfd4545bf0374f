"""Install specs that rows carry themselves: SWE-rebench's ``install_config``.

A SWE-rebench row holds the same facts the official harness keeps per repo and version, for its own
instance: ``python``, ``packages`` (``requirements.txt``, ``environment.yml`` or conda package names),
``pip_packages``, ``reqs_path``, ``pre_install``, ``install``, ``test_cmd`` (a string, or a list whose
last entry is the test runner), ``log_parser``, ``env_vars`` and ``eval_commands``. Next to it the row
keeps the resolved package set it was validated with (``requirements``, pip-freeze text) and its conda
environment (``environment``, YAML text). Read here into a :class:`RepoSpec`; the row is not changed.

Container-free envs differ from the row's Docker image in two places, both said in the build log:
conda packages install with pip (as for the spec table), and ``apt-get`` steps never run on the host;
they become checks that warn when the host lacks the Debian package.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from swe_rl.errors import TaskFormatError
from swe_rl.tasks.model import Task
from swe_rl.tasks.repospec import RepoSpec
from swe_rl.tasks.specs import conda_env_packages, conda_to_pip

INSTALL_CONFIG = "install_config"
_APT = re.compile(r"^\s*(sudo\s+)?apt(-get)?\s")


def install_config(task: Task) -> dict[str, Any] | None:
    """The row's ``install_config`` (None when it has none); a malformed one is a TaskFormatError."""
    config = (task.model_extra or {}).get(INSTALL_CONFIG)
    if config is None:
        return None
    if not isinstance(config, dict):
        kind = type(config).__name__
        raise TaskFormatError(f"{task.instance_id}: install_config must be an object, not {kind}")
    if not config.get("python"):
        raise TaskFormatError(f"{task.instance_id}: install_config names no 'python'")
    return {k: v for k, v in config.items() if v is not None}


def row_spec(task: Task) -> RepoSpec | None:
    """The spec a row carries in ``install_config``, or None."""
    config = install_config(task)
    if config is None:
        return None
    packages = [*_base_packages(task, config), *_words(config.get("pip_packages"))]
    requirements: list[str] = []
    if config.get("packages") == "requirements.txt" and not _row_text(task, "requirements"):
        requirements = _words(config.get("reqs_path")) or ["requirements.txt"]
    fields: dict[str, Any] = {
        "python": str(config["python"]),
        "packages": tuple(packages),
        "requirements": tuple(requirements),
        "pre_install": tuple(_host_safe(line) for line in _lines(config.get("pre_install"))),
    }
    if config.get("install"):
        fields["install"] = str(config["install"])
    if config.get("test_cmd"):
        fields["test_cmd"] = _test_cmd(config["test_cmd"])
    return RepoSpec(**fields)


def row_log_parser(task: Task) -> str | None:
    """The log parser the row's ``install_config`` names, if any."""
    config = install_config(task)
    return str(config["log_parser"]) if config and config.get("log_parser") else None


def row_eval_setup(task: Task) -> list[str]:
    """Shell lines the row runs before its tests: ``env_vars`` exported, then ``eval_commands``."""
    config = install_config(task)
    if not config:
        return []
    env = config.get("env_vars") or {}
    if not isinstance(env, dict):
        raise TaskFormatError(f"{task.instance_id}: install_config.env_vars must be an object")
    exports = [f"export {name}={shlex.quote(str(value))}" for name, value in env.items()]
    return exports + _lines(config.get("eval_commands"))


def _base_packages(task: Task, config: dict[str, Any]) -> list[str]:
    """What ``packages`` asks for: the row's frozen requirements, its environment.yml, or package names."""
    kind = config.get("packages")
    if not kind:
        return []
    if kind == "requirements.txt":
        text = _row_text(task, "requirements")
        return _requirement_lines(text) if text else []
    if kind == "environment.yml":
        return _environment_packages(task, _row_text(task, "environment"))
    return [conda_to_pip(word) for word in _words(kind)]


def _environment_packages(task: Task, text: str) -> list[str]:
    if not text:
        return []  # the file is read from the repo by the row's own install, as in its image
    try:
        return conda_env_packages(text)
    except ValueError as exc:
        raise TaskFormatError(f"{task.instance_id}: the row's environment: {exc}") from None


def _requirement_lines(text: str) -> list[str]:
    lines = (line.split(" #")[0].strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith(("#", "-"))]


def _host_safe(line: str) -> str:
    """An ``apt-get`` step as a check of the host (never run: it would change the host, not an image)."""
    if not _APT.match(line):
        return line
    words = [w for w in shlex.split(line) if not w.startswith("-")]
    wanted = words[words.index("install") + 1 :] if "install" in words else []
    checks = " ".join(shlex.quote(p) for p in wanted if re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", p))
    note = f"swe-rl: not run on the host (container-free): {line}"
    if not checks:
        return f"echo {shlex.quote(note)}"
    return (
        f'echo {shlex.quote(note)}; for p in {checks}; do dpkg -s "$p" >/dev/null 2>&1 || '
        'echo "swe-rl: WARNING: the host lacks the Debian package $p (apt-get install $p)"; done'
    )


def _test_cmd(value: Any) -> str:
    commands = _lines(value)
    return " && ".join(commands)


def _row_text(task: Task, field: str) -> str:
    value = (task.model_extra or {}).get(field)
    return value if isinstance(value, str) else ""


def _words(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.split()
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def _lines(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    return [str(v) for v in value if str(v).strip()] if isinstance(value, list | tuple) else []
