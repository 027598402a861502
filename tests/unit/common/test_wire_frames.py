"""The wire protocol's frames (tidemq.common.wire.frames): what is encoded decodes to the same
call, an error keeps its class, code and sentence, and bytes that are not a frame say so."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.common import errors
from tidemq.common.wire import frames

ids = st.integers(0, 2**32 - 1)
text = st.text(max_size=40)
metadata = st.lists(st.tuples(st.text(min_size=1, max_size=20).filter(
    lambda k: len(k.encode()) < 256), text), max_size=4)


def body_of(frame: bytes) -> bytes:
    (length,) = frames.LENGTH.unpack_from(frame)
    assert length == len(frame) - 4
    return frame[4:]


@given(ids, st.integers(0, 255), st.integers(0, 2**32 - 1), metadata, st.binary(max_size=300))
def test_a_request_decodes_to_what_was_encoded(request_id, method, timeout_ms, meta, payload):
    frame = frames.request(request_id, method, timeout_ms, meta, payload)
    assert frames.parse_request(body_of(frame)) == (request_id, method, timeout_ms, meta, payload)


@given(ids, st.binary(max_size=300))
def test_an_answer_decodes_to_its_payload(request_id, payload):
    assert frames.parse_response(body_of(frames.ok(request_id, payload))) == (request_id, payload)


ERRORS = [errors.InvalidArgument("bad", code="INVALID_RECEIPT_HANDLE"),
          errors.TopicNotExist("no such topic"), errors.PayloadTooLarge("too big"),
          errors.PreconditionFailed("slave", code="NOT_MASTER"), errors.Conflict("again"),
          errors.ServiceUnavailable("down"), errors.ResourceExhausted("full"),
          errors.DeadlineExceeded("late"), errors.Unauthenticated("who"),
          errors.PermissionDenied("no"), errors.Internal("oops"), errors.NotFound("gone")]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: e.code)
@given(request_id=ids, sentence=text)
def test_an_error_keeps_its_class_code_and_sentence(error, request_id, sentence):
    sent = type(error)(sentence, code=error.code)
    body = body_of(frames.error(request_id, sent))
    for read in (body, memoryview(body)):  # the client parses views into its read buffer
        answered_id, answer = frames.parse_response(read)
        assert answered_id == request_id
        assert type(answer) is type(sent)
        assert (answer.code, answer.message) == (sent.code, sentence)


@given(ids, st.integers(0, 255), metadata, st.binary(max_size=50), st.data())
def test_a_cut_request_head_is_refused(request_id, method, meta, payload, data):
    body = body_of(frames.request(request_id, method, 1000, meta, payload))
    head_end = len(body) - len(payload)
    cut = data.draw(st.integers(0, head_end - 1))
    with pytest.raises(frames.FrameError):
        frames.parse_request(body[:cut])


def test_malformed_answers_are_refused():
    with pytest.raises(frames.FrameError):
        frames.parse_response(b"\x00\x00")
    with pytest.raises(frames.FrameError, match="status 7"):
        frames.parse_response(frames.RESPONSE_HEAD.pack(1, 7))
