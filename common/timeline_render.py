"""Drawing a `Timeline` (common/timeline.py): as text for a terminal, as a Mermaid
sequenceDiagram, as a hand-written SVG. Pure functions of the model, no I/O."""

from __future__ import annotations

import dataclasses
import json as _json
from xml.sax.saxutils import escape

from common.timeline import Hop, Timeline, fmt_duration

LANE_WIDTH = 11


def headline(timeline: Timeline) -> str:
    where = f" on {timeline.node}" if timeline.node else ""
    verdict = (f"{timeline.outcome} after {fmt_duration(timeline.total)}" if timeline.ok
               else f"stopped: {timeline.outcome}")
    return f"pod {timeline.namespace}/{timeline.name}{where}: {verdict} (created {timeline.created})"


def since(hop: Hop) -> str:
    """`+12ms` since the create; `~` when read from a whole-second timestamp."""
    return f"{'' if hop.precise else '~'}+{fmt_duration(hop.at)}"


def took(hop: Hop) -> str:
    return "" if hop.duration is None else fmt_duration(hop.duration)


def timing(hop: Hop) -> str:
    return since(hop) if hop.duration is None else f"{since(hop)}, took {took(hop)}"


def label_of(hop: Hop) -> str:
    return f"{'✗ ' if hop.failed else ''}{hop.label}"


# --- text ---------------------------------------------------------------------------------

def _grid(timeline: Timeline, hop: Hop | None) -> str:
    lanes = timeline.lanes
    cells = [" "] * (LANE_WIDTH * len(lanes))
    centers = [i * LANE_WIDTH + LANE_WIDTH // 2 for i in range(len(lanes))]
    for lane, center in zip(lanes, centers, strict=True):
        cells[center] = "┆" if lane in timeline.skipped else "│"
    if hop is not None:
        a, b = centers[lanes.index(hop.source)], centers[lanes.index(hop.target)]
        head = "✗" if hop.failed else None
        if a == b:
            cells[a] = head or "↻"
        else:
            step = 1 if b > a else -1
            for x in range(a, b, step):
                cells[x] = "─"
            cells[a] = "├" if step > 0 else "┤"
            cells[b - step] = head or ("▶" if step > 0 else "◀")
    return "".join(cells).rstrip()


def text(timeline: Timeline) -> str:
    """The sequence diagram for a terminal: one column per lane, one row per hop."""
    width = LANE_WIDTH * len(timeline.lanes)
    header = ""
    for i, lane in enumerate(timeline.lanes):  # each name's middle over its lane
        header = header.ljust(i * LANE_WIDTH + LANE_WIDTH // 2 - len(lane) // 2) + lane
    lines = [headline(timeline), "", f"{'since':>9} {'took':>7}  " + header.rstrip()]
    for hop in timeline.hops:
        grid = _grid(timeline, hop).ljust(width)
        lines.append(f"{since(hop):>9} {took(hop):>7}  {grid} {label_of(hop)}".rstrip())
        for more in hop.detail:
            lines.append(f"{'':>19}{_grid(timeline, None).ljust(width)}   {more}".rstrip())
    for lane, why in timeline.skipped.items():
        lines.append(f"{lane} skipped: {why}")
    if not all(hop.precise for hop in timeline.hops):
        lines.append("~ read from a whole-second timestamp (no Event marks that hop)")
    if timeline.why:
        lines.append(f"stopped at {timeline.outcome}:")
        lines.extend(f"  {line}" for line in timeline.why)
    return "\n".join(lines) + "\n"


# --- Mermaid ------------------------------------------------------------------------------

_MERMAID_ESCAPES = str.maketrans({"#": "#35;", ";": "#59;", "\n": " "})


def _mermaid_text(value: str) -> str:
    # `;` ends a statement and `#` starts an entity code in Mermaid's grammar
    return value.translate(_MERMAID_ESCAPES)


def mermaid(timeline: Timeline) -> str:
    lines = ["sequenceDiagram", f"    title {_mermaid_text(headline(timeline))}"]
    lines += [f"    participant {lane}" for lane in timeline.lanes]
    for lane, why in timeline.skipped.items():
        lines.append(f"    Note over {lane}: skipped: {_mermaid_text(why)}")
    for hop in timeline.hops:
        arrow = "-x" if hop.failed else "->>"
        lines.append(f"    {hop.source}{arrow}{hop.target}: "
                     f"{_mermaid_text(hop.label)} ({timing(hop)})")
        for more in hop.detail:
            lines.append(f"    Note over {hop.target}: {_mermaid_text(more)}")
    if timeline.why:
        last = timeline.hops[-1].target if timeline.hops else timeline.lanes[0]
        lines.append(f"    Note over {last}: stopped: "
                     f"{_mermaid_text('. '.join((timeline.outcome, *timeline.why)))}")
    return "\n".join(lines) + "\n"


# --- SVG ------------------------------------------------------------------------------------

SVG_LANE = 150
SVG_LEFT = 110
SVG_TOP = 70
SVG_ROW = 34
SVG_DETAIL = 15


def svg(timeline: Timeline) -> str:
    """A standalone SVG (no scripts, no external references)."""
    lanes = timeline.lanes
    width = SVG_LEFT + SVG_LANE * len(lanes) + 20

    def x(lane: str) -> int:
        return SVG_LEFT + SVG_LANE * lanes.index(lane) + SVG_LANE // 2

    rows: list[str] = []
    y = SVG_TOP + 20
    for hop in timeline.hops:
        y += SVG_ROW
        colour = "#c0392b" if hop.failed else "#1f4e79"
        x1, x2 = x(hop.source), x(hop.target)
        rows.append(f'<text x="8" y="{y + 4}" class="t">{escape(timing(hop))}</text>')
        if x1 == x2:
            rows.append(f'<path d="M{x1},{y - 8} h28 v16 h-26" fill="none" stroke="{colour}" '
                        f'marker-end="url(#{"x" if hop.failed else "a"})"/>')
            label_x, anchor = x1 + 34, "start"
        else:
            rows.append(f'<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="{colour}" '
                        f'stroke-width="1.5" marker-end="url(#{"x" if hop.failed else "a"})"/>')
            label_x, anchor = (x1 + x2) // 2, "middle"
        rows.append(f'<text x="{label_x}" y="{y - 5}" text-anchor="{anchor}" fill="{colour}">'
                    f'{escape(label_of(hop))}</text>')
        for more in hop.detail:
            y += SVG_DETAIL
            rows.append(f'<text x="{label_x}" y="{y + 2}" text-anchor="{anchor}" class="d">'
                        f'{escape(more)}</text>')
    notes: list[str] = []
    for lane, why in timeline.skipped.items():
        notes.append(f"{lane} skipped: {why}")
    if timeline.why:
        notes.append(f"stopped at {timeline.outcome}: " + "; ".join(timeline.why))
    for note in notes:
        y += SVG_ROW
        rows.append(f'<text x="8" y="{y}" class="n">{escape(note)}</text>')
    height = y + 30
    heads = []
    for lane in lanes:
        dash = ' stroke-dasharray="4 4"' if lane in timeline.skipped else ""
        heads.append(f'<rect x="{x(lane) - 55}" y="{SVG_TOP - 24}" width="110" height="28" '
                     f'rx="4" fill="{"#eee" if lane in timeline.skipped else "#dbe8f5"}" '
                     f'stroke="#1f4e79"{dash}/>'
                     f'<text x="{x(lane)}" y="{SVG_TOP - 5}" text-anchor="middle">{lane}</text>'
                     f'<line x1="{x(lane)}" y1="{SVG_TOP + 4}" x2="{x(lane)}" y2="{height - 20}" '
                     f'stroke="#999"{dash}/>')
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(headline(timeline))}</title>",
        "<style>.t{font-family:monospace;fill:#555}.d{fill:#555;font-size:11px}"
        ".n{fill:#333}</style>",
        '<defs><marker id="a" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#1f4e79"/></marker><marker id="x" viewBox="0 0 10 10" refX="5" refY="5" '
        'markerWidth="9" markerHeight="9"><path d="M0,0 L10,10 M10,0 L0,10" '
        'stroke="#c0392b" stroke-width="2"/></marker></defs>',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="8" y="20" font-weight="bold">{escape(headline(timeline))}</text>',
        *heads, *rows, "</svg>"]) + "\n"


# --- JSON -------------------------------------------------------------------------------------

def as_json(timeline: Timeline) -> str:
    """The model itself, for a page or a script to draw: lanes, hops (seconds since the
    create), outcome, why, skipped lanes."""
    data = dataclasses.asdict(timeline)
    data["skipped"] = dict(timeline.skipped)
    data["total"] = timeline.total
    return _json.dumps(data, indent=2, ensure_ascii=False) + "\n"


RENDERERS = {"text": text, "mermaid": mermaid, "svg": svg, "json": as_json}
