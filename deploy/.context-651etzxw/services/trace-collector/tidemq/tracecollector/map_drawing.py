"""The service map drawn: services as boxes in columns (callers left of what they call), the
edges of service_map.py as arrows whose width grows with the rate and whose colour says how
many failed. Pure geometry from the same edges the table lists, rendered as inline SVG by
the template (no script, nothing from elsewhere), so the picture and the table cannot
disagree.

Columns are the longest call path into a service (gateway-http → broker → a consumer reads
left to right); a cycle (A calls B, B calls A) is cut where it closes, so every service gets
a column in at most as many rounds as there are services.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tidemq.tracecollector.service_map import Edge

NODE_W, NODE_H = 170, 44
COLUMN_GAP, ROW_GAP = 130, 46
MARGIN = 24
ARC_ROOM = 70  # above the boxes, for arrows that go back left or stay in a column
MIN_STROKE, MAX_STROKE = 1.5, 12.0
WARN_RATIO, ERROR_RATIO = 0.0, 0.05  # any error: amber; 5 % or more: red


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    x: float
    y: float
    requests_in: int
    errors_in: int

    @property
    def cx(self) -> float:
        return self.x + NODE_W / 2


@dataclass(frozen=True, slots=True)
class Arrow:
    edge: Edge
    path: str          # SVG path data from the caller's box to the callee's
    label_x: float
    label_y: float
    stroke: float      # width, by rate
    health: str        # "ok" | "warn" | "error", by error ratio

    @property
    def dashed(self) -> bool:
        return self.edge.kind != "call"  # message flow (receive, consume), not a request


@dataclass(frozen=True, slots=True)
class Drawing:
    nodes: list[Node]
    arrows: list[Arrow]
    width: float
    height: float


def columns(edges: list[Edge]) -> dict[str, int]:
    """Service → column: the longest path of distinct edges into it (cycles cut)."""
    services = sorted({e.caller for e in edges} | {e.callee for e in edges})
    column = dict.fromkeys(services, 0)
    pairs = {(e.caller, e.callee) for e in edges if e.caller != e.callee}
    for _ in range(len(services)):
        changed = False
        for caller, callee in sorted(pairs):
            if column[callee] < column[caller] + 1 <= len(services) - 1:
                column[callee] = column[caller] + 1
                changed = True
        if not changed:
            break
    # a cycle can leave gaps (its services pushed up to the cap): close them
    rank = {value: n for n, value in enumerate(sorted(set(column.values())))}
    return {name: rank[value] for name, value in column.items()}


def stroke_width(rate_per_s: float, busiest: float) -> float:
    if busiest <= 0:
        return MIN_STROKE
    share = math.log1p(rate_per_s * 100) / math.log1p(busiest * 100)
    return round(MIN_STROKE + (MAX_STROKE - MIN_STROKE) * share, 2)


def health(edge: Edge) -> str:
    if edge.error_ratio >= ERROR_RATIO and edge.errors:
        return "error"
    return "warn" if edge.error_ratio > WARN_RATIO else "ok"


def draw(edges: list[Edge]) -> Drawing:
    column = columns(edges)
    by_column: dict[int, list[str]] = {}
    for name in sorted(column):
        by_column.setdefault(column[name], []).append(name)
    tallest = max((len(names) for names in by_column.values()), default=0)
    height = ARC_ROOM + MARGIN * 2 + tallest * NODE_H + max(0, tallest - 1) * ROW_GAP
    nodes: dict[str, Node] = {}
    for col, names in by_column.items():
        top = ARC_ROOM + (height - ARC_ROOM - (len(names) * NODE_H
                                               + (len(names) - 1) * ROW_GAP)) / 2
        for row, name in enumerate(names):
            incoming = [e for e in edges if e.callee == name]
            nodes[name] = Node(name, MARGIN + col * (NODE_W + COLUMN_GAP),
                               top + row * (NODE_H + ROW_GAP),
                               sum(e.requests for e in incoming),
                               sum(e.errors for e in incoming))
    width = MARGIN * 2 + len(by_column) * NODE_W + max(0, len(by_column) - 1) * COLUMN_GAP
    busiest = max((e.rate_per_s for e in edges), default=0.0)
    arrows = []
    seen_pairs: dict[tuple[str, str], int] = {}
    for edge in edges:
        nth = seen_pairs.get((edge.caller, edge.callee), 0)
        seen_pairs[(edge.caller, edge.callee)] = nth + 1
        path, label_x, label_y = _route(nodes[edge.caller], nodes[edge.callee], nth)
        arrows.append(Arrow(edge, path, label_x, label_y,
                            stroke_width(edge.rate_per_s, busiest), health(edge)))
    return Drawing(list(nodes.values()), arrows, max(width, NODE_W + 2 * MARGIN), height)


def _route(a: Node, b: Node, nth: int) -> tuple[str, float, float]:
    """A curve from a's right side to b's left side (forward), or arching over both
    (backward or within a column); `nth` parallel edges of one pair are spread apart."""
    spread = 14 * nth
    if b.x > a.x:
        x1, y1 = a.x + NODE_W, a.y + NODE_H / 2 + spread
        x2, y2 = b.x - 6, b.y + NODE_H / 2 + spread
        bend = (x2 - x1) / 2
        path = f"M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} {x2 - bend:.1f},{y2:.1f} " \
               f"{x2:.1f},{y2:.1f}"
        return path, (x1 + x2) / 2, (y1 + y2) / 2 - 6
    if a.name == b.name:
        x, y = a.x + NODE_W * 0.7, a.y
        path = f"M{x:.1f},{y:.1f} C{x:.1f},{y - 40 - spread:.1f} {x + 50:.1f}," \
               f"{y - 40 - spread:.1f} {x + 40:.1f},{y - 6:.1f}"
        return path, x + 25, y - 34 - spread
    x1, y1 = a.cx, a.y
    x2, y2 = b.cx, b.y - 6
    lift = 40 + spread + abs(x1 - x2) * 0.15
    top = min(y1, y2) - lift
    path = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{top:.1f} {x2:.1f},{top:.1f} {x2:.1f},{y2:.1f}"
    return path, (x1 + x2) / 2, top + lift * 0.25
