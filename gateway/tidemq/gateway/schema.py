"""Declared request schemas: one pydantic model per request body (and per route's query
parameters), used both to validate the request and to describe it in /openapi.json, so the
two cannot drift.

Why this shape: before, each view read the fields it knew with `dict.get` and silently ignored
the rest, so a typo (`dealy_ms`) or a field of a newer API was dropped without a word. A body
model forbids unknown fields (400 UNKNOWN_FIELD naming the field and the known ones) and is
strict (no "4" for 4, no true for 1). Every rejection keeps a precise code:

* a field declares its code with `ErrorCode` (missing, wrong type or out of range: that code);
  an error in a nested field takes the code of the nearest field that declares one, else the
  model's `error_code` (the body or an item that is not a JSON object);
* a rule of our own (a validator) raises `rule_error(CODE, sentence)`: the error type is the
  code;
* an unknown field is UNKNOWN_FIELD, reported before any other error (a misspelt field also
  makes the real one look missing).

Views take the parsed model as a keyword argument:

    @bp.post("/v1/things")
    @accepts_body(ThingRequest)
    def create_thing(body: ThingRequest): ...

Query parameters (`@accepts_query`) are parsed leniently ("5" is 5) and unknown ones are
tolerated (proxies and caches add their own), but a bad value is a 400.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from flask import request
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError
from tidemq.common.errors import InvalidArgument, TideMQError
from tidemq.gateway import jsonio

M = TypeVar("M", bound=BaseModel)
UNKNOWN_FIELD = "UNKNOWN_FIELD"
BODY_ATTR = "request_body_schema"
BODY_REQUIRED_ATTR = "request_body_required"
QUERY_ATTR = "query_schema"


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """`Annotated[int, Field(ge=1), ErrorCode("INVALID_QUEUE_COUNT")]`: the code of any error
    in this field; `too_long` overrides it when a list has more items than allowed. Shown in
    the OpenAPI document as `x-error-code`."""

    code: str
    too_long: str | None = None

    def __get_pydantic_json_schema__(self, core_schema, handler):
        schema = handler(core_schema)
        schema["x-error-code"] = self.code
        return schema

    def for_error(self, error_type: str) -> str:
        return self.too_long if error_type == "too_long" and self.too_long else self.code


class RequestBody(BaseModel):
    """Base of every request body (and object inside one): strict, unknown fields refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    error_code: ClassVar[str] = "INVALID_REQUEST"
    _int_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._int_fields = tuple(name for name, field in cls.model_fields.items()
                                if _holds_int(field.annotation))

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, values: Any) -> Any:
        """JSON does not tell 537 from 537.0 (JSON Schema's "integer" takes both): an integer
        field given an integral number written with a fraction takes that integer. Strings
        and booleans stay refused ("4" and true are not 4)."""
        if isinstance(values, dict):
            for name in cls._int_fields:
                value = values.get(name)
                if type(value) is float and value.is_integer():
                    values = {**values, name: int(value)}
        return values


def _holds_int(annotation: Any) -> bool:
    """`int`, `int | None`, `Annotated[int, ...]` (not bool, not a list of ints)."""
    if annotation is int:
        return True
    if typing.get_origin(annotation) is typing.Annotated:
        return _holds_int(typing.get_args(annotation)[0])
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(_holds_int(arg) for arg in typing.get_args(annotation))
    return False


class QueryParameters(BaseModel):
    """Base of a route's query parameters: strings converted, unknown names tolerated."""

    model_config = ConfigDict(extra="ignore", strict=False, frozen=True)
    error_code: ClassVar[str] = "INVALID_ARGUMENT"

    @model_validator(mode="before")
    @classmethod
    def _empty_is_absent(cls, values: Any) -> Any:
        """`?offset=` means the default, as it always did."""
        if isinstance(values, dict):
            return {name: value for name, value in values.items() if value != ""}
        return values


def rule_error(code: str, sentence: str) -> PydanticCustomError:
    """Raise from a validator: a 400 with `code` and `sentence` as its detail."""
    return PydanticCustomError(code, sentence)


def domain_check(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A field validator from a domain check that raises TideMQError (e.g. the client's
    `validate_topic_name`): its code and sentence become the field's error."""

    def validate(value: Any) -> Any:
        try:
            check(value)
        except TideMQError as exc:
            raise rule_error(exc.code, exc.message) from None
        return value

    return validate


# -- errors -> InvalidArgument --------------------------------------------------------------

def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model an annotation holds (`Model`, `list[Model]`, `Model | None`, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) is typing.Annotated:
        return _model_in(typing.get_args(annotation)[0])
    for arg in typing.get_args(annotation):
        if arg is not types.NoneType and (found := _model_in(arg)) is not None:
            return found
    return None


def _field_code(model: type[BaseModel], name: str, error_type: str) -> str | None:
    for meta in model.model_fields[name].metadata:
        if isinstance(meta, ErrorCode):
            return meta.for_error(error_type)
    return None


@dataclass
class _Located:
    path: str               # "messages[0].body"; "" for the body itself
    model: type[BaseModel]  # the innermost model the error is in
    code: str


def _locate(model: type[BaseModel], loc: tuple[str | int, ...], error_type: str) -> _Located:
    """Walk `loc` through the models: the readable path, the innermost model and the code of
    the deepest field on the way (its declared code, else its model's `error_code`)."""
    code, path, current = model.error_code, "", model
    in_value = False  # past a field that holds no model: the rest are indexes and map keys
    for index, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":  # pydantic's marker: the error is in a map's key, not its value
            path += " (the key)"
        elif in_value or part not in current.model_fields:
            path += f"[{part!r}]"
        else:
            path += f".{part}" if path else part
            declared = _field_code(current, part, error_type if index == len(loc) - 1 else "")
            code = declared or current.error_code
            inner = _model_in(current.model_fields[part].annotation)
            if inner is None:
                in_value = True
            else:
                current = inner
    return _Located(path, current, code)


def _known(model: type[BaseModel]) -> str:
    return ", ".join(model.model_fields)


def _sentence(model: type[BaseModel], error: Mapping[str, Any], where: _Located) -> str:
    kind, message = error["type"], error["msg"]
    if issubclass(model, QueryParameters):
        subject = f"query parameter {where.path!r}"
    else:
        subject = where.path or "the request body"
    if kind == "missing":
        return f"{subject} is required"
    if kind.isupper():  # rule_error: the sentence is already the whole story
        return f"{subject}: {message}" if where.path else message
    if kind == "model_type":
        text = f"{subject} must be a JSON object"
    elif message.startswith("Input should "):
        text = f"{subject} should {message[len('Input should '):]}"
    else:
        text = f"{subject}: {message[:1].lower()}{message[1:]}"
    value = error.get("input")
    if isinstance(value, list | dict) and kind != "model_type":
        return text  # the message already says what is wrong with the collection
    got = repr(value[:61] if isinstance(value, str) else value)
    return f"{text}, got {got if len(got) <= 60 else got[:57] + '...'}"


def parse_json(raw: bytes) -> Any:
    if not raw or not raw.strip():
        raise InvalidArgument("the request body is empty; send a JSON document",
                              code="EMPTY_BODY")
    try:
        return jsonio.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"the request body is not valid JSON: {exc}",
                              code="MALFORMED_JSON") from None


def validation_failure(model: type[BaseModel], exc: ValidationError) -> InvalidArgument:
    """The one InvalidArgument for a failed validation: unknown fields first, then the first
    error in field order; the detail says how many more there were."""
    errors = exc.errors(include_url=False)
    errors.sort(key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    more = f" ({len(errors) - 1} more problem(s) in this request)" if len(errors) > 1 else ""
    if first["type"] == "extra_forbidden":
        where = _locate(model, first["loc"][:-1], "")
        name = first["loc"][-1]
        place = where.path or "the request body"
        return InvalidArgument(
            f'unknown field "{name}" in {place}; known fields: {_known(where.model)}{more}',
            code=UNKNOWN_FIELD)
    where = _locate(model, first["loc"], first["type"])
    code = first["type"] if first["type"].isupper() else where.code
    return InvalidArgument(_sentence(model, first, where) + more, code=code)


def parse(model: type[M], document: Any) -> M:
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise validation_failure(model, exc) from None


# -- views ----------------------------------------------------------------------------------

def accepts_body(model: type[RequestBody], *, required: bool = True):
    """Parse the JSON body with `model` and pass it to the view as `body`; without `required`
    an empty body is the model's defaults."""

    def decorate(view):
        @functools.wraps(view)
        def wrapper(*args, **kwargs):
            raw = request.get_data()
            document = parse_json(raw) if required or raw.strip() else {}
            return view(*args, body=parse(model, document), **kwargs)

        setattr(wrapper, BODY_ATTR, model)
        setattr(wrapper, BODY_REQUIRED_ATTR, required)
        return wrapper

    return decorate


def accepts_query(model: type[QueryParameters]):
    """Parse the query string with `model` and pass it to the view as `query`."""

    def decorate(view):
        @functools.wraps(view)
        def wrapper(*args, **kwargs):
            return view(*args, query=parse(model, request.args.to_dict()), **kwargs)

        setattr(wrapper, QUERY_ATTR, model)
        return wrapper

    return decorate
