"""The served compiler as an A2A agent, with the official ``a2a-sdk`` client: the agent
card, send, streaming send, get, cancel; a held call as ``input-required`` answered by the
next message, then ``completed`` with the answer as an artifact."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.client.client import ClientConfig
from a2a.client.client_factory import ClientFactory
from a2a.helpers import get_artifact_text, get_data_parts, new_data_part, new_text_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    TaskState,
)

from llm_compiler.serving import build_app
from llm_compiler.serving.security import SecurityPolicy
from tests.durable.conftest import cluster  # noqa: F401 - the session's Postgres

from .conftest import ANSWER, sse, start_server, stop, workflow
from .test_mcp_api import paying

pytestmark = pytest.mark.timeout(60)

TOKEN = "s3cret-token-0123456789"
AUTH = {"authorization": f"Bearer {TOKEN}"}


def ask(*parts, task_id: str = "", context_id: str = "") -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        parts=list(parts),
        message_id=uuid.uuid4().hex,
        task_id=task_id,
        context_id=context_id,
    )
    return SendMessageRequest(message=message)


async def client_for(http: httpx.AsyncClient, url: str, streaming: bool):
    card = await A2ACardResolver(httpx_client=http, base_url=url).get_agent_card()
    return card, ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(card)


def task_of(responses):
    """The task a send answered with (its last snapshot)."""
    tasks = [r.task for r in responses if r.HasField("task")]
    return tasks[-1]


async def test_card_send_stream_and_get(overlap):
    policy = SecurityPolicy.build(token=TOKEN)
    url, task, _ = await start_server(
        lambda: build_app({"compiler": workflow(overlap)}, policy=policy)
    )
    try:
        async with httpx.AsyncClient(timeout=30, headers=AUTH) as http:
            card, client = await client_for(http, url, streaming=False)
            done = task_of([r async for r in client.send_message(ask(new_text_part("a and b?")))])
            got = await client.get_task(GetTaskRequest(id=done.id))
            _, streaming = await client_for(http, url, streaming=True)
            updates = [r async for r in streaming.send_message(ask(new_text_part("a and b?")))]
            await client.close()
            await streaming.close()
    finally:
        await stop(task)
    assert card.capabilities.streaming
    assert card.supported_interfaces[0].url == f"{url}/a2a"
    assert card.supported_interfaces[0].protocol_binding == "JSONRPC"
    assert {s.id for s in card.skills} >= {"compiler", "compiler.fetch", "compiler.combine"}
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_artifact_text(done.artifacts[0]) == ANSWER
    assert got.status.state == TaskState.TASK_STATE_COMPLETED and got.id == done.id
    statuses = [r.status_update for r in updates if r.HasField("status_update")]
    texts = [p.text for s in statuses for p in s.status.message.parts]
    assert "[task 1 fetch done: value of alpha]" in texts
    assert statuses[-1].status.state == TaskState.TASK_STATE_COMPLETED
    artifacts = [r.artifact_update for r in updates if r.HasField("artifact_update")]
    assert get_artifact_text(artifacts[0].artifact) == ANSWER


async def test_input_required_is_answered_by_the_next_message(overlap):
    url, task, _ = await start_server(lambda: build_app({"compiler": paying(overlap)}))
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            _, client = await client_for(http, url, streaming=False)
            held = task_of([r async for r in client.send_message(ask(new_text_part("pay?")))])
            (data,) = get_data_parts(held.status.message.parts)
            (approval,) = data["approvals"]

            async def reply(verdict: dict):
                request = ask(new_data_part(verdict), task_id=held.id, context_id=held.context_id)
                return task_of([r async for r in client.send_message(request)])

            typo = await reply({"action": "edit", "args": {"amount": "lots"}})
            done = await reply(
                {"approval_id": approval["approval_id"], "action": "edit", "args": {"amount": 5}}
            )
            await client.close()
    finally:
        await stop(task)
    assert held.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert approval["tool"] == "pay" and approval["args"]["account"] == "value of alpha"
    assert approval["approval_id"] in held.status.message.parts[0].text
    assert typo.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "amount" in typo.status.message.parts[0].text
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_artifact_text(done.artifacts[0]) == ANSWER


async def test_cancel_task_cancels_the_run(overlap):
    overlap.release = asyncio.Event()  # the fetches run until the run is cancelled
    url, task, _ = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            _, streaming = await client_for(http, url, streaming=True)
            _, client = await client_for(http, url, streaming=False)
            stream = streaming.send_message(ask(new_text_part("x?")))
            async for r in stream:
                update = r.status_update if r.HasField("status_update") else None
                if update and any("started" in p.text for p in update.status.message.parts):
                    task_id = update.task_id
                    break
            cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
            await stream.aclose()
            (handler,) = (await http.get(f"{url}/handlers")).json()["handlers"]
            async with httpx.AsyncClient(base_url=url, timeout=20) as h:
                events = await sse(h, handler["handler_id"])
            await client.close()
            await streaming.close()
    finally:
        await stop(task)
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert events[-1][1]["type"] == "WorkflowCancelledEvent"


async def test_the_card_is_public_and_declares_the_bearer_token(overlap):
    policy = SecurityPolicy.build(token=TOKEN)
    url, task, _ = await start_server(
        lambda: build_app({"compiler": workflow(overlap)}, policy=policy)
    )
    try:
        async with httpx.AsyncClient(timeout=30) as http:  # no token
            card = await A2ACardResolver(httpx_client=http, base_url=url).get_agent_card()
            refused = await http.post(f"{url}/a2a", json={"jsonrpc": "2.0", "id": 1})
    finally:
        await stop(task)
    scheme = card.security_schemes["bearer"].http_auth_security_scheme
    assert scheme.scheme.lower() == "bearer"
    assert [list(r.schemes) for r in card.security_requirements] == [["bearer"]]
    assert refused.status_code == 401


async def test_a_held_task_is_read_and_answered_after_a_restart(overlap, tmp_path):
    """The task is the run: a new app on the same durable store gets it and its verdict."""
    from llm_compiler.durable import open_durable

    store = f"sqlite:///{tmp_path / 'runs.db'}"

    async def app_on_store():
        durable = await open_durable(store)
        return await start_server(lambda: build_app({"compiler": paying(overlap)}, durable=durable))

    url, task, _ = await app_on_store()
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            _, client = await client_for(http, url, streaming=False)
            held = task_of([r async for r in client.send_message(ask(new_text_part("pay?")))])
            await client.close()
    finally:
        await stop(task)
    url, task, _ = await app_on_store()
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            _, client = await client_for(http, url, streaming=False)
            got = await client.get_task(GetTaskRequest(id=held.id))
            (data,) = get_data_parts(got.status.message.parts)
            verdict = new_data_part({"action": "approve"})
            request = ask(verdict, task_id=held.id, context_id=got.context_id)
            done = task_of([r async for r in client.send_message(request)])
            after = await client.get_task(GetTaskRequest(id=held.id))
            await client.close()
    finally:
        await stop(task)
    assert held.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert [a["tool"] for a in data["approvals"]] == ["pay"]
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_artifact_text(done.artifacts[0]) == ANSWER
    assert after.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_artifact_text(after.artifacts[0]) == ANSWER


async def test_another_worker_answers_get_a_verdict_and_a_resubscribe(overlap, cluster):  # noqa: F811
    """Two workers on one Postgres: the task started on the first is read, followed and
    answered through the second, while the first holds its run."""
    from a2a.types import SubscribeToTaskRequest

    from llm_compiler.durable import open_durable

    database = cluster.new_database()

    async def worker(name: str):
        durable = await open_durable(database, worker=name)
        return await start_server(lambda: build_app({"compiler": paying(overlap)}, durable=durable))

    first, first_task, _ = await worker("first")
    second, second_task, _ = await worker("second")
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            _, one = await client_for(http, first, streaming=False)
            held = task_of([r async for r in one.send_message(ask(new_text_part("pay?")))])
            _, two = await client_for(http, second, streaming=False)
            got = await two.get_task(GetTaskRequest(id=held.id))
            _, following = await client_for(http, second, streaming=True)
            stream = following.subscribe(SubscribeToTaskRequest(id=held.id))
            snapshot = await anext(stream)  # the task as it stands, before the verdict
            request = ask(new_data_part({"action": "approve"}), task_id=held.id)
            done = task_of([r async for r in two.send_message(request)])
            followed = [r async for r in stream]
            for client in (one, two, following):
                await client.close()
    finally:
        await stop(second_task)
        await stop(first_task)
    assert got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and got.id == held.id
    assert snapshot.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_artifact_text(done.artifacts[0]) == ANSWER
    artifacts = [r.artifact_update.artifact for r in followed if r.HasField("artifact_update")]
    assert [get_artifact_text(a) for a in artifacts] == [ANSWER]
    statuses = [r.status_update.status.state for r in followed if r.HasField("status_update")]
    assert statuses[-1] == TaskState.TASK_STATE_COMPLETED


def kept_per_task(obj: object) -> dict[str, object]:
    """`obj`'s attributes that hold something per task (non-empty maps)."""
    return {k: v for k, v in vars(obj).items() if isinstance(v, dict) and v}


async def test_nothing_of_a_task_stays_in_memory_once_it_ends(overlap):
    import gc

    from a2a.server.request_handlers import DefaultRequestHandler

    from llm_compiler.serving.a2a_api import CompilerExecutor

    url, task, served = await start_server(lambda: build_app({"compiler": paying(overlap)}))
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            _, client = await client_for(http, url, streaming=False)
            held = task_of([r async for r in client.send_message(ask(new_text_part("pay?")))])
            verdict = ask(new_data_part({"action": "approve"}), task_id=held.id)
            ended = [task_of([r async for r in client.send_message(verdict)])]
            for _ in range(2):  # the script holds the first plan only
                ended.append(
                    task_of([r async for r in client.send_message(ask(new_text_part("a?")))])
                )
            assert {t.status.state for t in ended} == {TaskState.TASK_STATE_COMPLETED}
            await client.close()
        (handler,) = [
            o
            for o in gc.get_objects()
            if isinstance(o, DefaultRequestHandler)
            and isinstance(o.agent_executor, CompilerExecutor)
            and o.agent_executor.runs.server is served.server
        ]
        assert kept_per_task(handler.agent_executor) == {}
        assert kept_per_task(handler.task_store) == {}
    finally:
        await stop(task)
