"""Charts as inline SVG, drawn on the server (no JavaScript library).

>>> svg = bar_chart([("events/0", 5), ("events/1", 0)], title="lag")
>>> svg.startswith("<svg") and "events/0" in svg and "</svg>" in svg
True
"""

from __future__ import annotations

from html import escape

MAX_BARS = 200
"""A chart shows at most this many bars (the largest); the page's table lists every one."""


def bar_chart(bars: list[tuple[str, int]], *, title: str, unit: str = "records", width: int = 640) -> str:
    """Horizontal bars, one per (label, value), scaled to the largest; an SVG element as text."""
    shown = sorted(bars, key=lambda b: -b[1])[:MAX_BARS] if len(bars) > MAX_BARS else list(bars)
    row, label_w, pad = 22, 180, 8
    height = max(1, len(shown)) * row + 2 * pad + 20
    top = max((v for _, v in shown), default=0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{pad}" y="{pad + 12}" class="chart-title">{escape(title)}</text>',
    ]
    if not shown:
        parts.append(f'<text x="{pad}" y="{pad + 36}" class="chart-label">nothing to show</text>')
    bar_space = width - label_w - 2 * pad - 90
    for i, (label, value) in enumerate(shown):
        y = pad + 20 + i * row
        length = 0 if top <= 0 else max(1 if value > 0 else 0, round(bar_space * value / top))
        parts.append(
            f'<text x="{label_w}" y="{y + 15}" text-anchor="end" class="chart-label">{escape(label)}</text>'
            f'<rect x="{label_w + pad}" y="{y + 3}" width="{length}" height="{row - 6}" rx="3" '
            f'class="bar{" bar-zero" if value == 0 else ""}"/>'
            f'<text x="{label_w + pad + length + 6}" y="{y + 15}" class="chart-value">{value:,} {escape(unit)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
