"""The drawn service map: callers left of what they call, every edge an arrow whose width
grows with its rate and whose colour follows its errors; cycles and self-calls still draw."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tidemq.tracecollector.map_drawing import (
    MAX_STROKE,
    MIN_STROKE,
    NODE_H,
    NODE_W,
    columns,
    draw,
    stroke_width,
)
from tidemq.tracecollector.service_map import Edge


def _edge(caller, callee, requests=10, errors=0, kind="call", window_s=60.0):
    return Edge(caller, callee, kind, requests, errors, window_s)


def test_callers_stand_left_of_what_they_call():
    edges = [_edge("gateway-http", "broker"), _edge("broker", "config-center"),
             _edge("gateway-http", "consumer", kind="receive"), _edge("consumer", "broker")]
    assert columns(edges) == {"gateway-http": 0, "consumer": 1, "broker": 2,
                              "config-center": 3}
    drawing = draw(edges)
    x = {node.name: node.x for node in drawing.nodes}
    assert x["gateway-http"] < x["consumer"] < x["broker"] < x["config-center"]
    assert [a.dashed for a in drawing.arrows] == [False, False, True, False]


def test_width_follows_the_rate_and_colour_the_errors():
    edges = [_edge("a", "b", requests=6000), _edge("a", "c", requests=6, errors=1),
             _edge("b", "c", requests=600, errors=1)]
    arrows = {(a.edge.caller, a.edge.callee): a for a in draw(edges).arrows}
    assert arrows["a", "b"].stroke == MAX_STROKE
    assert MIN_STROKE < arrows["a", "c"].stroke < arrows["b", "c"].stroke < MAX_STROKE
    assert (arrows["a", "b"].health, arrows["a", "c"].health, arrows["b", "c"].health) == (
        "ok", "error", "warn")
    assert stroke_width(0.0, 0.0) == MIN_STROKE


def test_a_cycle_and_a_self_call_are_drawn():
    edges = [_edge("a", "b"), _edge("b", "a"), _edge("b", "b")]
    drawing = draw(edges)
    assert len(drawing.nodes) == 2 and len(drawing.arrows) == 3


_names = st.sampled_from(["gw", "broker", "ns", "cc", "consumer", "spark"])


@given(st.lists(st.tuples(_names, _names, st.integers(1, 10_000), st.integers(0, 5)),
                max_size=20))
def test_every_box_is_inside_the_picture_and_no_two_overlap(raw):
    edges = [_edge(a, b, requests=n, errors=min(e, n)) for a, b, n, e in raw]
    drawing = draw(edges)
    assert len(drawing.arrows) == len(edges)
    for node in drawing.nodes:
        assert node.x >= 0 and node.x + NODE_W <= drawing.width
        assert node.y >= 0 and node.y + NODE_H <= drawing.height
    boxes = {(round(n.x), round(n.y)) for n in drawing.nodes}
    assert len(boxes) == len(drawing.nodes)
