"""``POST /workflows/{name}/run`` and ``run-nowait``: what a client may start a run with.

The start event is read as the workflow server reads it: ``start_event`` (else ``kwargs``)
as a bare object of the event's fields, as an envelope ``{"type": ..., "value": {...}}``
(or ``qualified_name``, or legacy ``data``), or either one JSON-encoded in a string. The
event must hold a non-blank question and no field the server chooses
(``compiler_run_id``); the server is handed the checked fields as an envelope of the
workflow's start event, so it reads nothing else.

A ``handler_id`` the client names must look like one (:data:`HANDLER_ID`: letters, digits,
``_ - . :``, at most 128, not starting with a dot), else 400; it names one run for good: a
start naming an id some run has gets that run (:mod:`.admission`), never a second one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from workflows import Workflow
from workflows.context.serializers import JsonSerializer
from workflows.events import Event, StartEvent

from llm_compiler.serving.guard import BadRequest, BodyRoute, Checked, field_errors, loads_checked

RUN_PATH = re.compile(r"^/workflows/(?P<name>[^/]+)/(run|run-nowait)/?$")
#: Start-event fields the server sets; a client sending them gets a 400.
SERVER_FIELDS = ("compiler_run_id",)
_SHAPE = 'Give the question as {"start_event": {"user_msg": "..."}}.'
_BLANK = "start_event.user_msg must be a non-empty question."
HANDLER_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.:-]{0,127}")


def run_route(
    workflows: Mapping[str, Workflow],
    extras: Mapping[str, Sequence[type[Event]]],
) -> BodyRoute:
    """The validator of run requests to `workflows` (with their `extras` event types)."""

    async def validate(match: re.Match[str], data: dict[str, Any], body: bytes) -> Checked:
        if data.get("handler_id") is not None:
            check_handler_id(data["handler_id"])
        workflow = workflows.get(match["name"])
        if workflow is None:
            known = ", ".join(sorted(workflows)) or "none"
            raise BadRequest(404, f"Unknown workflow {match['name']!r}; known: {known}.")
        allowed = [*workflow.events, *extras.get(match["name"], ())]
        event, value = start_event(workflow.start_event_class, data, allowed)
        # Forwarded as the envelope of what was checked: the server reads nothing else.
        forward = {k: v for k, v in data.items() if k not in ("start_event", "kwargs")}
        forward["start_event"] = {"type": type(event).__name__, "value": value}
        return Checked(event, json.dumps(forward).encode())

    return BodyRoute(RUN_PATH, validate)


def start_event(
    start_class: type[StartEvent], data: Mapping[str, Any], allowed: Sequence[type[Event]]
) -> tuple[StartEvent, dict[str, Any]]:
    """The start event a run request's body asks for and its fields, or BadRequest."""
    value = start_fields(data.get("start_event", data.get("kwargs")), start_class)
    question = value.get("user_msg")
    if not isinstance(question, dict) and (not isinstance(question, str) or not question.strip()):
        raise BadRequest(400, _BLANK)
    try:
        with JsonSerializer(allowed_types=list(allowed)).validation_context():
            event = start_class.model_validate(value)
    except ValidationError as e:
        raise BadRequest(400, f"Invalid start_event: {field_errors(e)}") from None
    check_start(event)
    return event, value


def start_fields(given: Any, start_class: type[StartEvent]) -> dict[str, Any]:
    """The fields of a start event given bare, as an envelope or JSON-encoded (read as the
    workflow server reads them), or BadRequest."""
    from llama_agents.client.protocol.serializable_events import EventEnvelope

    if isinstance(given, str):
        given = loads_checked(given)
    if not isinstance(given, dict):
        raise BadRequest(400, _SHAPE)
    if not (("qualified_name" in given and "type" in given) or "value" in given):
        return given  # the bare fields
    envelope = EventEnvelope.model_validate(given)
    name = envelope.type or (envelope.qualified_name or "").rpartition(".")[2]
    if not name:
        raise BadRequest(
            400, f'An envelope names its event: {{"type": "{start_class.__name__}", "value": ...}}.'
        )
    if name != start_class.__name__:
        raise BadRequest(400, f"start_event must be a {start_class.__name__}, not {name}.")
    if not isinstance(envelope.value, dict):
        raise BadRequest(400, _SHAPE)
    return envelope.value


def check_start(event: StartEvent) -> None:
    """A non-blank question, and none of the fields the server sets."""
    question = getattr(event, "user_msg", None)
    text = question if isinstance(question, str) else getattr(question, "content", None)
    if not isinstance(text, str) or not text.strip():
        raise BadRequest(400, _BLANK)
    for name in SERVER_FIELDS:
        if getattr(event, name, None) is not None:  # it keys the run's events and journal
            raise BadRequest(400, f"start_event.{name} is chosen by the server, not a client.")


def check_handler_id(value: Any) -> None:
    """BadRequest 400 unless `value` is a usable handler id."""
    if not isinstance(value, str) or not HANDLER_ID.fullmatch(value):
        raise BadRequest(
            400,
            f"Invalid handler_id {repr(value)[:80]}: use 1 to 128 letters, digits, '_', '-', "
            "'.' or ':' (not starting with '.').",
        )
