"""``POST /events/{handler_id}``: only the events a client may send reach a run.

The workflow server accepts any event type of a workflow there, engine events included: a
forged ``TaskReady`` would run a tool no plan contained. The check in front of the
server's endpoint accepts only human-response events (``HumanResponseEvent`` subclasses the
workflow consumes or was registered with, e.g. :class:`~llm_compiler.events.PlanApprovalResponse`),
checks that a plan approval answers the plan waiting (same run, same round) and a task
verdict a task held for approval now (:mod:`~llm_compiler.serving.verdicts`), and passes
the event on, re-encoded from the validated object, to the server's endpoint (a validator
of :class:`~llm_compiler.serving.guard.RequestGuard`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from workflows import Workflow
from workflows.events import Event, HumanResponseEvent

from llm_compiler.events import PlanApprovalResponse, TaskApprovalResponse
from llm_compiler.serving.guard import BadRequest, BodyRoute, Checked, field_errors
from llm_compiler.serving.verdicts import check_task_verdict, run_state

if TYPE_CHECKING:
    from llama_agents.server import AbstractWorkflowStore


def client_event_types(
    workflow: Workflow, extra: Sequence[type[Event]] = ()
) -> dict[str, type[Event]]:
    """The events clients may send to a run of `workflow`: its human-response events."""
    events = [*workflow.events, *extra]
    return {e.__name__: e for e in events if issubclass(e, HumanResponseEvent)}


EVENTS_PATH = re.compile(r"^/events/(?P<handler_id>[^/]+)/?$")


class ClientEvents:
    """Checks the body of ``POST /events/{handler_id}`` for the server's own endpoint.

    Args:
        store: The workflow store (to find the run a handler id names, and its state).
        accepted: Workflow name -> event type name -> type, from :func:`client_event_types`.
        workflows: The served workflows, by name (a task verdict is checked against its run's).
    """

    def __init__(
        self,
        store: AbstractWorkflowStore,
        accepted: Mapping[str, Mapping[str, type[Event]]],
        workflows: Mapping[str, Workflow],
    ) -> None:
        self.store = store
        self.accepted = accepted
        self.workflows = workflows

    async def validate(self, match: re.Match[str], data: dict[str, Any], body: bytes) -> Checked:
        """The event the body sends, and the body to forward (the event, re-encoded)."""
        event, forward = await self.check(match["handler_id"], data)
        return Checked(event, forward)

    async def check(self, handler_id: str, data: Mapping[str, Any]) -> tuple[Event, bytes]:
        """The event and the body to forward (the event, re-encoded), or :class:`BadRequest`."""
        from llama_agents.server import HandlerQuery

        found = await self.store.query(HandlerQuery(handler_id_in=[handler_id]))
        if not found:
            raise BadRequest(404, f"No run with handler id {handler_id!r}.")
        handler = found[0]
        event = self._event(handler.workflow_name, data.get("event"))
        if isinstance(event, PlanApprovalResponse):
            await self._check_approval(handler.run_id, event)
        elif isinstance(event, TaskApprovalResponse):
            workflow = self.workflows.get(handler.workflow_name)
            await check_task_verdict(self.store, workflow, handler.run_id, event)
        envelope = {"type": type(event).__name__, "value": event.model_dump(mode="json")}
        step = data.get("step")
        forward = {"event": envelope, **({"step": step} if step else {})}
        return event, json.dumps(forward).encode()

    def _event(self, workflow: str, envelope: Any) -> Event:
        """The event a client sent, if its type is one clients may send; else BadRequest."""
        if isinstance(envelope, str):  # the server also takes the envelope JSON-encoded
            try:
                envelope = json.loads(envelope)
            except ValueError:
                raise BadRequest(400, "The event must be a JSON object.") from None
        if not isinstance(envelope, dict) or not isinstance(envelope.get("type"), str):
            raise BadRequest(400, 'Send {"event": {"type": "<EventName>", "value": {...}}}.')
        accepted = self.accepted.get(workflow, {})
        kind = envelope["type"]
        if kind not in accepted:
            allowed = ", ".join(sorted(accepted)) or "none"
            raise BadRequest(
                403, f"Clients may not send {kind} events; a {workflow} run accepts: {allowed}."
            )
        value = envelope.get("value", envelope.get("data", {}))
        try:
            return accepted[kind].model_validate(value)
        except ValidationError as e:
            raise BadRequest(400, f"Invalid {kind}: {field_errors(e)}.") from None

    async def _check_approval(self, run_id: str | None, event: PlanApprovalResponse) -> None:
        state = await run_state(self.store, run_id)
        held = state.held if state is not None else None
        if held is None:
            raise BadRequest(409, "No plan of this run is waiting for approval.")
        if (event.run_id, event.round) != (held.run_id, held.round):
            raise BadRequest(
                409,
                f"This approval answers run {event.run_id!r} round {event.round}, but the plan "
                f"waiting is run {held.run_id!r} round {held.round}.",
            )


def events_route(
    store: AbstractWorkflowStore,
    workflows: Mapping[str, Workflow],
    extras: Mapping[str, Sequence[type[Event]]],
) -> BodyRoute:
    """The validator of ``POST /events/{handler_id}`` for runs of `workflows`."""
    accepted = {n: client_event_types(w, extras.get(n, ())) for n, w in workflows.items()}
    return BodyRoute(EVENTS_PATH, ClientEvents(store, accepted, workflows).validate)
