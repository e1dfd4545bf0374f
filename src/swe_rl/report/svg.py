"""Tiny inline-SVG charts (no plotting dependency): bars, histograms, a stacked bar."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

COLORS = ["#2f7d32", "#c62828", "#9e9e9e", "#1565c0", "#ef6c00", "#6a1b9a"]


def bars(
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    width: int = 360,
    height: int = 180,
    color: str | None = None,
) -> str:
    top = max(values, default=0) or 1
    n = max(1, len(values))
    slot = (width - 40) / n
    parts = [f'<text x="4" y="14" class="t">{escape(title)}</text>']
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        h = (height - 50) * value / top
        x = 30 + i * slot
        parts.append(
            f'<rect x="{x + 4:.1f}" y="{height - 25 - h:.1f}" width="{slot - 8:.1f}" height="{h:.1f}" '
            f'fill="{color or COLORS[i % len(COLORS)]}"><title>{escape(label)}: {value:g}</title></rect>'
        )
        parts.append(
            f'<text x="{x + slot / 2:.1f}" y="{height - 10}" text-anchor="middle">{escape(label)}</text>'
        )
        parts.append(
            f'<text x="{x + slot / 2:.1f}" y="{height - 30 - h:.1f}" text-anchor="middle">{value:g}</text>'
        )
    return _svg(parts, width, height)


def histogram(title: str, values: Sequence[float], bins: int = 10, unit: str = "") -> str:
    if not values:
        return bars(title, [], [])
    lo, hi = min(values), max(values)
    step = (hi - lo) / bins or 1
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / step))] += 1
    labels = [f"{lo + i * step:.3g}{unit}" for i in range(bins)]
    return bars(title, labels, counts, width=max(360, 36 * bins), color="#1565c0")


def stacked(title: str, parts: dict[str, float], width: int = 360, height: int = 90) -> str:
    total = sum(parts.values()) or 1
    x = 10.0
    out = [f'<text x="4" y="14" class="t">{escape(title)}</text>']
    for i, (label, value) in enumerate(parts.items()):
        w = (width - 20) * value / total
        out.append(
            f'<rect x="{x:.1f}" y="24" width="{w:.1f}" height="26" fill="{COLORS[i % len(COLORS)]}">'
            f"<title>{escape(label)}: {value:.3g}s ({value / total:.0%})</title></rect>"
        )
        out.append(
            f'<text x="{10 + i * (width - 20) / len(parts):.1f}" y="72">{escape(label)} {value / total:.0%}</text>'
        )
        x += w
    return _svg(out, width, height)


def _svg(parts: list[str], width: int, height: int) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
        + "".join(parts)
        + "</svg>"
    )


def lines(
    title: str,
    series: dict[str, Sequence[tuple[float, float]]],
    *,
    y_range: tuple[float, float] | None = None,
    width: int = 480,
    height: int = 220,
    x_label: str = "step",
) -> str:
    """A line chart of one or more (x, y) series, with min/max labels on both axes and a legend."""
    points = [p for s in series.values() for p in s]
    if not points:
        return bars(title, [], [])
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = y_range or (min(ys), max(ys) if max(ys) > min(ys) else min(ys) + 1)
    left, right, top, bottom = 52, 10, 24, 40

    def at(x: float, y: float) -> str:
        px = left + (width - left - right) * (x - x0) / (x1 - x0)
        py = height - bottom - (height - top - bottom) * (y - y0) / (y1 - y0)
        return f"{px:.1f},{py:.1f}"

    parts = [
        f'<text x="4" y="14" class="t">{escape(title)}</text>',
        f'<polyline points="{at(x0, y0)} {at(x1, y0)}" stroke="#888" fill="none"/>',
        f'<polyline points="{at(x0, y0)} {at(x0, y1)}" stroke="#888" fill="none"/>',
        f'<text x="{left - 4}" y="{height - bottom}" text-anchor="end">{y0:.3g}</text>',
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{y1:.3g}</text>',
        f'<text x="{left}" y="{height - bottom + 14}">{x0:g}</text>',
        f'<text x="{width - right}" y="{height - bottom + 14}" text-anchor="end">{x1:g}</text>',
        f'<text x="{(width + left) / 2:.0f}" y="{height - bottom + 14}" text-anchor="middle">{escape(x_label)}</text>',
    ]
    for i, (name, values) in enumerate(series.items()):
        color = COLORS[(i + 3) % len(COLORS)]
        path = " ".join(at(x, y) for x, y in values)
        parts.append(f'<polyline points="{path}" stroke="{color}" stroke-width="2" fill="none"/>')
        for x, y in values:
            xy = at(x, y).split(",")
            parts.append(
                f'<circle cx="{xy[0]}" cy="{xy[1]}" r="2.5" fill="{color}"><title>{escape(name)} '
                f"{x:g}: {y:.3g}</title></circle>"
            )
        parts.append(
            f'<text x="{left + 10 + i * 150}" y="{height - 8}" fill="{color}">&#9632; {escape(name)}</text>'
        )
    return _svg(parts, width, height)
