"""The report's charts: matplotlib figures rendered as inline SVG (text drawn as paths, so a page looks the
same offline, on any machine, with no font or script from elsewhere).

Each chart is laid out by matplotlib with a tight bounding box (a title, count labels and a legend always
fit the picture) and carries the data it plots, which the page puts beside it as JSON. Element ids in the
SVG are prefixed with the chart's name (``steps-title``, ``steps-count-0``, ``time-legend``) and its
internal ids are salted by the name, so several charts share one page without clashing.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.container import BarContainer
    from matplotlib.figure import Figure

COLORS = ["#2f7d32", "#c62828", "#9e9e9e", "#1565c0", "#ef6c00", "#6a1b9a"]
SERIES_COLORS = ["#1565c0", "#ef6c00", "#6a1b9a", "#2f7d32", "#c62828"]
SIZE = (4.4, 2.6)  # inches; an SVG point is 1/72 inch


@dataclass(frozen=True)
class Chart:
    """One chart of a page: ``name`` (its id), ``title``, the inline ``svg`` and the ``data`` it plots."""

    name: str
    title: str
    svg: str
    data: dict[str, Any] = field(default_factory=dict)


@contextmanager
def _figure(name: str, title: str, size: tuple[float, float] = SIZE) -> Iterator[tuple[Figure, Axes]]:
    """A figure with one axes and its title, in the report's style; ids salted by ``name``."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(
        {
            "svg.hashsalt": name,
            "svg.fonttype": "path",
            "font.size": 8.5,
            "axes.titlesize": 10,
            "axes.titleweight": "bold",
            "axes.titlelocation": "left",
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    ):
        fig = Figure(figsize=size)
        ax = fig.add_subplot()
        ax.set_title(title, gid=f"{name}-title")
        yield fig, ax


def _svg(fig: Figure) -> str:
    """The figure as an SVG element to inline (no XML prologue, no creation date)."""
    buf = io.StringIO()
    blank = {"Creator": None, "Date": None, "Format": None, "Type": None}
    fig.savefig(buf, format="svg", bbox_inches="tight", pad_inches=0.06, metadata=blank)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _counts(ax: Axes, name: str, container: BarContainer, counts: Sequence[int], zeros: bool = False) -> None:
    """Count labels above the bars (a zero's only where ``zeros``), inside the axes (headroom above the
    tallest), so never on the title."""
    labels = [str(c) if c or zeros else "" for c in counts]
    for i, text in enumerate(ax.bar_label(container, labels=labels, padding=2)):
        text.set_gid(f"{name}-count-{i}")
    ax.set_ylim(0, max(max(counts, default=0), 1) * 1.22)
    ax.yaxis.set_major_locator(_integers())


def _integers() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True, min_n_ticks=1)


def bars(name: str, title: str, counts: Mapping[str, int]) -> Chart:
    """One bar per label with its count."""
    with _figure(name, title) as (fig, ax):
        labels, values = list(counts), list(counts.values())
        container = ax.bar(labels, values, color=[COLORS[i % len(COLORS)] for i in range(len(labels))])
        _counts(ax, name, container, values, zeros=True)
        return Chart(name, title, _svg(fig), {"bars": dict(counts)})


def integer_histogram(name: str, title: str, values: Sequence[int], x_label: str) -> Chart:
    """Counts of integer values (steps, turns): one bar per integer from the least to the greatest."""
    with _figure(name, title) as (fig, ax):
        found = Counter(values)
        xs = list(range(min(values), max(values) + 1)) if values else []
        counts = [found[x] for x in xs]
        container = ax.bar(xs, counts, width=0.8, color=COLORS[3])
        _counts(ax, name, container, counts)
        ax.xaxis.set_major_locator(_integers())
        if xs:
            ax.set_xlim(xs[0] - 0.6, xs[-1] + 0.6)
        ax.set_xlabel(x_label)
        return Chart(name, title, _svg(fig), {"bins": [[x, c] for x, c in zip(xs, counts, strict=True)]})


def histogram(name: str, title: str, values: Sequence[float], x_label: str, bins: int = 8) -> Chart:
    """Counts of continuous values (seconds) in up to ``bins`` equal bins."""
    import numpy

    with _figure(name, title) as (fig, ax):
        counts: list[int] = []
        edges: list[float] = []
        if values:
            found, bounds = numpy.histogram(values, bins=max(1, min(bins, len(set(values)))))
            counts, edges = [int(c) for c in found], [float(e) for e in bounds]
        widths = [b - a for a, b in pairwise(edges)]
        container = ax.bar(edges[:-1], counts, width=widths, align="edge", color=COLORS[3], edgecolor="white")
        _counts(ax, name, container, counts)
        ax.set_xlabel(x_label)
        return Chart(name, title, _svg(fig), {"edges": edges, "counts": counts})


def shares(name: str, title: str, parts: Mapping[str, float], unit: str = "s") -> Chart:
    """One bar split into ``parts`` (where the time went), with a legend of each part's share."""
    with _figure(name, title, (SIZE[0], 1.5)) as (fig, ax):
        total = sum(parts.values()) or 1.0
        left = 0.0
        for i, (label, value) in enumerate(parts.items()):
            text = f"{label} {value / total:.0%} ({value:.3g} {unit})"
            ax.barh(0, value, left=left, color=COLORS[i % len(COLORS)], label=text, height=0.6)
            left += value
        ax.set_yticks([])
        ax.spines["left"].set_visible(False)
        ax.set_xlabel(unit)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.45), ncols=2, frameon=False).set_gid(
            f"{name}-legend"
        )
        return Chart(name, title, _svg(fig), {"parts": dict(parts)})


def lines(
    name: str,
    title: str,
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    x_range: tuple[int, int],
    percent: bool = False,
) -> Chart:
    """Series over training steps, on a common integer step axis ``x_range``, with a legend below."""
    with _figure(name, title) as (fig, ax):
        for i, (label, points) in enumerate(series.items()):
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            color = SERIES_COLORS[i % len(SERIES_COLORS)]
            ax.plot(xs, ys, marker="o", markersize=4, color=color, label=label, gid=f"{name}-line-{i}")
        if not any(series.values()):
            ax.text(0.5, 0.5, "nothing logged yet", transform=ax.transAxes, ha="center", color="#777")
        ax.set_xlim(x_range[0] - 0.3, max(x_range[1], x_range[0] + 1) + 0.3)
        ax.xaxis.set_major_locator(_integers())
        ax.set_xlabel("step")
        if percent:
            from matplotlib.ticker import PercentFormatter

            ax.set_ylim(-0.04, 1.04)
            ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        if series:
            ax.legend(
                loc="upper center", bbox_to_anchor=(0.5, -0.28), ncols=min(3, len(series)), frameon=False
            ).set_gid(f"{name}-legend")
        data = {"x_range": list(x_range), "series": {k: [list(p) for p in v] for k, v in series.items()}}
        return Chart(name, title, _svg(fig), data)
