"""The report's pages: Jinja2 templates (autoescaped, strict) under ``templates/``, one per kind of run."""

from __future__ import annotations

from typing import Any


def render_page(template: str, **context: Any) -> str:
    """Render ``templates/<template>`` with ``context``; every value is escaped unless marked safe, and a
    name the template uses but the context lacks is an error, not an empty string."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("swe_rl.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.policies["json.dumps_kwargs"] = {"sort_keys": False}  # tables list metrics in the run's order
    return env.get_template(template).render(**context)
