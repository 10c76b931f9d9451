"""What every operation of the JSON API shares: its prefix, its error bodies and
responses, strict request bodies, and operation ids a generated client can use."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

from bson import ObjectId
from fastapi import APIRouter, HTTPException
from fastapi.routing import APIRoute
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, GetJsonSchemaHandler

from fingerprinter import DEFAULT_PARAMS
from fingerprinter.initials import common_letters_class
from tracker.context import Context
from tracker.findings import FindingNotFound, WorkflowError, parse_object_id
from tracker.masters.library import MAX_MASTER_CHARS

from ..i18n import N_
from ..limits import BoundedJsonRoute, body_cap

PREFIX = "/api/v1"
#: A work's text must hold enough letters to fingerprint (the library's own rule, stated
#: with the characters that always count): the schema says it, the server checks it.
MIN_LETTERS = DEFAULT_PARAMS.granule
_LETTER = common_letters_class()
WORK_TEXT_PATTERN = f"^(?:[^{_LETTER[1:-1]}]*{_LETTER}){{{MIN_LETTERS}}}"
_ENOUGH_LETTERS = re.compile(WORK_TEXT_PATTERN)


def operation_id(route: APIRoute) -> str:
    """An operation's id is its function's name (``list_findings``): a generated client's
    method names, stable within /api/v1."""
    return route.name


def api_router(prefix: str) -> APIRouter:
    """A router of API operations (``admin.routes.api.ROUTERS``)."""
    return APIRouter(
        prefix=prefix,
        route_class=BoundedJsonRoute,
        generate_unique_id_function=operation_id,
    )


class Problem(BaseModel):
    """The body of every error but 422."""

    detail: str = Field(description=N_("What went wrong, and what to do about it."))


class Invalid(BaseModel):
    """The body of 422: the request does not match this document."""

    detail: list[str] = Field(description=N_("One line per problem: where, then what."))


_ERRORS: dict[int, tuple[type[BaseModel], str]] = {
    400: (Problem, "A filter value the server cannot use, or a body that is not JSON"),
    401: (Problem, "No token, or one that is unknown, expired or revoked"),
    403: (Problem, "The token's role may not do this (or a session write lacks X-CSRF-Token)"),
    404: (Problem, "No such finding or campaign"),
    409: (Problem, "The current state does not allow it"),
    413: (Problem, "The body is larger than the operation takes, or holds more JSON values"),
    422: (Invalid, "The request does not match this document"),
    503: (Problem, "A server does not answer or the index is not ready: retry after Retry-After"),
}


def errors(*codes: int, **described: str) -> dict[int | str, dict[str, Any]]:
    """The error responses of an operation: 401, 403, 422 and 503 on every one, ``codes``
    besides; ``described`` (``e409="..."``) words a code for this operation."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in sorted({401, 403, 422, 503, *codes}):
        model, description = _ERRORS[code]
        out[code] = {"model": model, "description": described.get(f"e{code}", description)}
    return out


def too_large(path: str, what: str) -> str:
    """The 413 of an operation on ``path`` whose body holds at most ``what``."""
    return f"The body is over {body_cap(PREFIX + path) // 2**20} MB, or holds more than {what}"


@contextmanager
def workflow_refusals() -> Iterator[None]:
    """The review workflow's refusals as the API answers them: an unknown finding 404, a
    change its state does not allow 409."""
    try:
        yield
    except FindingNotFound as err:
        raise HTTPException(404, str(err)) from None
    except WorkflowError as err:
        raise HTTPException(409, str(err)) from None


def finding_id_of(value: str) -> ObjectId:
    """A finding's id from a path; 404 when it cannot be one."""
    try:
        return parse_object_id(value)
    except ValueError as err:
        raise HTTPException(404, str(err)) from None


def stored_finding(
    ctx: Context, finding_id: str, fields: dict[str, int] | None = None
) -> dict[str, Any]:
    """The finding a path names (with ``fields`` only, when given); 404 when there is none."""
    doc = ctx.db.findings.find_one({"_id": finding_id_of(finding_id)}, fields)
    if doc is None:
        raise HTTPException(404, f"no finding {finding_id}")
    return doc


class Strict(BaseModel):
    """Request bodies refuse unknown fields, so a typo is an error, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


def example(**values: Any) -> ConfigDict:
    """A model's configuration with one example (shown in the document, sent by fuzzers)."""
    return ConfigDict(json_schema_extra={"examples": [values]})


def named_enum(name: str, doc: str, members: Iterable[str] | Mapping[str, str]) -> type[StrEnum]:
    """A string enum that the document names: a schema of its own, a class in a generated
    client, whose members take the names given here (``x-enum-varnames``: the values, or
    the keys of a mapping), not ones made up from values such as ``-score``."""
    named = members if isinstance(members, Mapping) else {value: value for value in members}
    enum = StrEnum(name, named)  # type: ignore[misc]  # mypy takes literal members only
    enum.__doc__ = doc

    def json_schema(cls: type[StrEnum], core: Any, handler: GetJsonSchemaHandler) -> Any:
        schema = handler.resolve_ref_schema(handler(core))
        schema["x-enum-varnames"] = [member.name for member in cls]
        return schema

    # pydantic's hook, looked up on the class: no attribute StrEnum declares.
    enum.__get_pydantic_json_schema__ = classmethod(json_schema)  # type: ignore[attr-defined]
    return enum


# mypy takes no enum made from values at run time for a type: to it, each is a StrEnum.
if TYPE_CHECKING:
    WorkResultStatus = StrEnum
else:
    WorkResultStatus = named_enum(
        "WorkResultStatus",
        N_(
            "What registering a work did: added, unchanged (the same text under its id), updated "
            "(a new text for its id), duplicate (the text of another id)."
        ),
        ("added", "unchanged", "updated", "duplicate"),
    )


def _enough_letters(text: str) -> str:
    if not _ENOUGH_LETTERS.search(text):
        raise ValueError(
            f"too few letters to fingerprint: give at least {MIN_LETTERS} Chinese "
            "characters or ASCII letters"
        )
    return text


def _text_field(max_chars: int) -> Any:
    # A text of at most ``max_chars`` characters, as the document describes a work's.
    return Field(
        max_length=max_chars,
        description=f"At least {MIN_LETTERS} Chinese characters or ASCII letters.",
        json_schema_extra={"pattern": WORK_TEXT_PATTERN},
    )


#: A checked text, of at most 20 M characters with enough letters.
WorkText = Annotated[str, AfterValidator(_enough_letters), _text_field(20_000_000)]
#: A work's text in the library, of at most MAX_MASTER_CHARS characters with enough letters.
MasterText = Annotated[str, AfterValidator(_enough_letters), _text_field(MAX_MASTER_CHARS)]
