"""The ``swe-rl`` application: registers the command groups and turns errors into exit codes."""

from __future__ import annotations

import logging
import sys
from typing import Any

import typer

from swe_rl.cli.lazy import SETTINGS, lazy_group

# each command is imported when it runs (cli/lazy.py): "swe-rl eval" does not import training, nor the reverse
COMMANDS = {
    "tasks": "swe_rl.cli.tasks:app",
    "env": "swe_rl.cli.env:app",
    "images": "swe_rl.cli.images:app",
    "serve": "swe_rl.cli.serve:app",
    "cluster": "swe_rl.cli.cluster:app",
    "data": "swe_rl.cli.data:app",
    "train": "swe_rl.cli.train:app",
    "grade": "swe_rl.cli.grade:grade",
    "eval": "swe_rl.cli.eval:eval_command",
    "report": "swe_rl.cli.report:report",
    "demo": "swe_rl.cli.demo:demo",
}
app = typer.Typer(
    name="swe-rl",
    help="Train and evaluate software-engineering agents with reinforcement learning.",
    cls=lazy_group(COMMANDS),
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    **SETTINGS,
)


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log swe-rl's debug output to stderr."),
) -> None:
    # swe-rl's own loggers only: on the root logger, libraries' INFO lines (each HTTP request) would show as
    # swe-rl's, and those with a handler of their own (huggingface_hub) would print every line twice
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("swe-rl: %(message)s"))
    logger = logging.getLogger("swe_rl")
    logger.handlers = [handler]
    logger.propagate = False  # a library that configures the root logger later would print each line again
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)


def main() -> None:
    """Entry point: SweRlError becomes a one-line message and exit code 2 (bad input) or 3 (infrastructure)."""
    from pydantic import ValidationError

    from swe_rl.errors import ConfigError, SweRlError

    try:
        # click returns Exit codes instead of raising in this mode
        code = app(args=sys.argv[1:], standalone_mode=False)
    except SweRlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2 if isinstance(exc, ConfigError) else 3)
    except ValidationError as exc:  # settings built from the options: bad input, named by field
        print(f"error: {_invalid(exc)}", file=sys.stderr)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # usage errors arrive here in non-standalone mode
        # typer vendors its own click: its ClickException is not click's, so recognise one by its shape
        show, exit_code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(exit_code, int):
            show()
            sys.exit(exit_code)
        raise
    sys.exit(code if isinstance(code, int) else 0)


def _invalid(exc: Any) -> str:
    """One line for a pydantic ValidationError: which settings, which fields, and why."""
    problems = [
        f"{'.'.join(str(part) for part in error['loc']) or 'value'}: {error['msg']} (got {error.get('input')!r})"
        for error in exc.errors()
    ]
    return f"invalid {exc.title}: " + "; ".join(problems)


if __name__ == "__main__":
    main()
