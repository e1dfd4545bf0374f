"""Command groups whose commands are imported when one is used, not when ``swe-rl`` starts.

typer builds every registered command's options from its function's signature before it runs any, so a
command whose options come from a settings model (``eval``, ``train rl``) would import that model, and what
the model imports, on every ``swe-rl`` call. A lazy group names its commands by import path instead: ``swe-rl
eval`` imports the eval command alone; a group's ``--help``, which lists every command with its summary,
imports them all.
"""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

import typer
from typer.core import TyperGroup

# what every command is built with (the root's settings: plain-text help, exceptions left to cli.app.main)
SETTINGS: dict[str, Any] = {
    "pretty_exceptions_enable": False,
    # help is plain text: rich markup would take `[default: ...]` and `swe-rl[ray]` for tags and drop them,
    # and label every flag <bool> as if it took a value
    "rich_markup_mode": None,
}


class LazyGroup(TyperGroup):
    """A typer group with more commands in ``lazy``: name -> ``"module:attribute"``, a ``typer.Typer`` (a
    group) or a command function, listed after the group's own commands in the table's order."""

    lazy: ClassVar[dict[str, str]] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *self.lazy]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = self.lazy[cmd_name].partition(":")
        return command(cmd_name, getattr(importlib.import_module(module), attribute))


def lazy_group(commands: dict[str, str]) -> type[LazyGroup]:
    """A :class:`LazyGroup` class with ``commands``, for ``typer.Typer(cls=...)``."""
    return type("LazyGroup", (LazyGroup,), {"lazy": dict(commands)})


def command(name: str, target: typer.Typer | Any) -> Any:
    """The click command (or group) typer makes of ``target`` under ``name``, with :data:`SETTINGS`."""
    holder = typer.Typer(**SETTINGS)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
    holder.callback()(lambda: None)  # a group even of one command: typer would make that command the app
    return typer.main.get_group(holder).commands[name]


def tree(group: Any, words: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every command below the click command ``group`` (``typer.main.get_command(app)``), itself included,
    by its words, lazy ones imported: what a group's ``.commands`` alone would miss."""
    found = {words: group}
    if hasattr(group, "list_commands"):  # a group (of typer's own click, which is not the click package)
        ctx = typer.Context(group)
        for name in group.list_commands(ctx):
            found |= tree(group.get_command(ctx, name), (*words, name))
    return found
