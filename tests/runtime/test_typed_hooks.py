"""Typed hooks on every world: ``Approval.wait``/``Approval.resume``, refusal of a payload that
does not validate, metadata, and a token re-created in the same run after disposal."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.runtime import flows, sdk_flows
from tests.runtime.harness import Engine, of_type, wait_for
from wayline._core.events import EventType
from wayline.cli.timeline import render_show
from wayline.client import RunHandle
from wayline.errors import InvalidPayloadError, RunFailedError
from wayline.world import HookInfo, RunInfo

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"

Approval, Note = sdk_flows.Approval, sdk_flows.Note


async def _active(engine: Engine, token: str, *not_cids: str) -> HookInfo:
    """Wait until ``token`` is held by an active hook (one other than ``not_cids``)."""

    async def ready() -> HookInfo | None:
        hook = await engine.world.get_hook(token)
        if hook is None or not hook.active or hook.correlation_id in not_cids:
            return None
        return hook

    found: HookInfo = await wait_for(ready)
    return found


async def _held_then_refused(
    engine: Engine,
    token: str,
    holder: Callable[[], Awaitable[RunHandle[Any]]],
    late: Callable[[], Awaitable[RunHandle[Any]]],
) -> tuple[RunHandle[Any], RunHandle[Any], RunInfo]:
    """The run started by ``holder``, once it holds ``token``'s hook; the run ``late`` starts
    after it on the same token; and the late run's info, once it has failed HOOK_CONFLICT."""
    held = await holder()
    await _active(engine, token)
    refused = await late()
    with pytest.raises(RunFailedError, match="HOOK_CONFLICT"):
        await refused.result(timeout=20)
    return held, refused, await engine.client.get_run(refused.run_id)


async def _resumed(engine: Engine, token: str, holder: RunHandle[Any]) -> None:
    """The holder's hook resumed with "ok", which its run returns."""
    await engine.client.resume_hook(token, "ok")
    assert await holder.result(timeout=10) == "ok"


async def test_typed_hooks_wait_resume_and_reuse_their_token(engine: Engine) -> None:
    client = engine.client
    async with engine.worker([sdk_flows.approvals]):
        handle = await client.start(sdk_flows.approvals, "o1", 2)
        first = await _active(engine, "approve:o1")
        await Approval.resume(client, "approve:o1", Approval(approved=True, by="ana"))
        # the same token, a second hook in the same run: the first was disposed
        await _active(engine, "approve:o1", first.correlation_id)
        await Approval.resume(client, "approve:o1", {"approved": False, "by": "bo"})
        await _active(engine, "note:o1")
        await Note.resume(client, "note:o1", Note("ship it"))
        assert await handle.result(timeout=10) == [
            [True, "ana", "Approval"],
            [False, "bo", "Approval"],
            "ship it",
        ]
    events = await handle.events()
    created = of_type(events, EventType.HOOK_CREATED)
    assert [e.data["token"] for e in created] == ["approve:o1", "approve:o1", "note:o1"]
    assert created[0].data["type"] == "tests.runtime.sdk_flows:Approval"
    assert [e.data["metadata"] for e in created[:2]] == [
        {"order": "o1", "round": 0},
        {"order": "o1", "round": 1},
    ]
    # the last wait ends the run, whose end frees its tokens: no disposal is written for it
    assert len(of_type(events, EventType.HOOK_DISPOSED)) == 2
    out = io.StringIO()
    render_show(await client.get_run(handle.run_id), events, out)
    assert 'metadata {"order": "o1", "round": 1}' in out.getvalue()
    assert "type tests.runtime.sdk_flows:Approval" in out.getvalue()


async def test_a_hook_conflict_names_the_run_holding_the_token(engine: Engine) -> None:
    """A run waiting on a token another live run holds fails ``HOOK_CONFLICT``; its error
    names the holder (message and ``holderRunId``), and so does ``wayline runs show``."""
    client = engine.client
    async with engine.worker([sdk_flows.approvals]):
        holder = await client.start(sdk_flows.approvals, "c1", 1)
        await _active(engine, "approve:c1")
        late = await client.start(sdk_flows.approvals, "c1", 1)
        with pytest.raises(RunFailedError):
            await late.result(timeout=10)
        info = await client.get_run(late.run_id)
        assert info.error is not None and info.error["code"] == "HOOK_CONFLICT"
        assert info.error["holderRunId"] == holder.run_id
        assert info.error["token"] == "approve:c1"
        assert f"of run {holder.run_id}" in info.error["message"]
        out = io.StringIO()
        render_show(info, await late.events(), out)
        assert f"held by another active hook, of run {holder.run_id}" in out.getvalue()
        # the holder is untouched: it still takes its payload
        await Approval.resume(client, "approve:c1", Approval(approved=True, by="ana"))
        await _active(engine, "note:c1")
        await Note.resume(client, "note:c1", Note("done"))
        assert (await holder.result(timeout=10))[-1] == "done"


async def test_a_payload_that_does_not_validate_is_refused_at_resume(engine: Engine) -> None:
    client = engine.client
    async with engine.worker([sdk_flows.approvals]):
        handle = await client.start(sdk_flows.approvals, "o2", 1)
        await _active(engine, "approve:o2")
        before = len(await handle.events())
        with pytest.raises(InvalidPayloadError, match="approved"):
            await Approval.resume(client, "approve:o2", {"approved": "perhaps", "by": "x"})
        # the untyped client path refuses it too: the hook recorded its type
        with pytest.raises(InvalidPayloadError, match="by"):
            await client.resume_hook("approve:o2", {"approved": True})
        with pytest.raises(InvalidPayloadError, match="waits for"):
            await Note.resume(client, "approve:o2", Note("wrong hook"))
        assert len(await handle.events()) == before  # nothing was written
        await Approval.resume(client, "approve:o2", Approval(approved=True, by="ana"))
        await _active(engine, "note:o2")
        await client.resume_hook("note:o2", {"text": "ok"})
        assert (await handle.result(timeout=10))[0] == [True, "ana", "Approval"]


async def test_a_timed_out_typed_hook_frees_its_token(engine: Engine) -> None:
    async with engine.worker([sdk_flows.approval_times_out]):
        handle = await engine.client.start(sdk_flows.approval_times_out, "o3")

        async def timed_out() -> bool:
            return bool(of_type(await handle.events(), EventType.HOOK_DISPOSED))

        await wait_for(timed_out)
        await _active(engine, "late:o3", "h1")
        await Approval.resume(engine.client, "late:o3", Approval(approved=True, by="cy"))
        assert await handle.result(timeout=10) == "cy"


async def test_an_untyped_hook_disposes_and_its_token_is_reused(engine: Engine) -> None:
    async with engine.worker([sdk_flows.untyped_dispose]):
        handle = await engine.client.start(sdk_flows.untyped_dispose, "legacy:1")
        first = await _active(engine, "legacy:1")
        await engine.client.resume_hook("legacy:1", 1)

        await _active(engine, "legacy:1", first.correlation_id)
        await engine.client.resume_hook("legacy:1", 2)
        assert await handle.result(timeout=10) == [1, 2]
    created = of_type(await handle.events(), EventType.HOOK_CREATED)
    assert created[0].data["metadata"] == {"why": "legacy"}
    assert "type" not in created[0].data


def test_hook_classes_need_fields_and_a_workflow() -> None:
    with pytest.raises(TypeError, match="typed hook"):
        wayline.Hook._check_typed("wait")
    with pytest.raises(wayline.NotInWorkflowError):
        Approval.wait("x").send(None)


async def test_a_process_without_the_class_refuses_by_the_recorded_shape(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator and the CLI do not import the workflow's code: the hook's recorded shape
    still names the missing or mistyped field."""
    from wayline._sdk import hooks

    client = engine.client
    async with engine.worker([sdk_flows.approvals]):
        handle = await client.start(sdk_flows.approvals, "o4", 1)
        await _active(engine, "approve:o4")
        monkeypatch.setattr(hooks, "find_type", lambda name, **_: None)
        with pytest.raises(InvalidPayloadError, match="by: Field required"):
            await client.resume_hook("approve:o4", {"approved": True})
        # "yes" would be true to the class (pydantic's lax booleans): "perhaps" is not
        with pytest.raises(InvalidPayloadError, match="approved: expected boolean, got str"):
            await client.resume_hook("approve:o4", {"approved": "perhaps", "by": "x"})
        with pytest.raises(InvalidPayloadError, match="expected an object"):
            await client.resume_hook("approve:o4", [1])
        await client.resume_hook("approve:o4", {"approved": True, "by": "ana"})
        await _active(engine, "note:o4")
        await client.resume_hook("note:o4", {"text": "ok"})
        assert (await handle.result(timeout=10))[0] == [True, "ana", "Approval"]


async def test_a_process_without_the_class_refuses_a_nested_field_by_the_recorded_shape(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded shape follows nested models: a process without the class (the operator,
    the CLI) refuses a payload whose nested object misses a field or mistypes one, naming
    its path, and writes nothing (it checked the top level only, so such a payload was
    written and failed the run on arrival)."""
    from wayline._sdk import hooks

    client = engine.client
    async with engine.worker([sdk_flows.shipped]):
        handle = await client.start(sdk_flows.shipped, "o5")
        await _active(engine, "ship:o5")
        created = of_type(await handle.events(), EventType.HOOK_CREATED)[0]
        assert created.data["shape"]["nested"]["to"]["required"] == ["city"]
        before = len(await handle.events())
        monkeypatch.setattr(hooks, "find_type", lambda name, **_: None)
        with pytest.raises(InvalidPayloadError, match=r"to\.city: Field required"):
            await client.resume_hook("ship:o5", {"by": "ana", "to": {"zip": 1}})
        mistyped = r"alternative\.zip: expected integer or null"
        with pytest.raises(InvalidPayloadError, match=mistyped):
            await client.resume_hook(
                "ship:o5",
                {"by": "ana", "to": {"city": "Oslo"}, "alternative": {"city": "B", "zip": "x"}},
            )
        with pytest.raises(InvalidPayloadError, match="to: expected object, got str"):
            await client.resume_hook("ship:o5", {"by": "ana", "to": "Oslo"})
        assert len(await handle.events()) == before  # nothing was written
        await client.resume_hook("ship:o5", {"by": "ana", "to": {"city": "Oslo"}})
        assert await handle.result(timeout=10) == ["ana", "Oslo", None]


async def test_a_create_hook_type_is_checked_at_resume_before_anything_is_written(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``create_hook(type=Model)`` records its type as a ``wayline.Hook`` does: a payload that
    would fail the run on arrival is refused at resume, by the class where the resumer has it
    and by the recorded shape where it does not (the operator, the CLI); the run goes on."""
    from tests.runtime import flows
    from wayline._sdk import hooks

    client = engine.client
    async with engine.worker([flows.typed]):
        handle = await client.start(flows.typed, flows.Point(1, 2))
        await _active(engine, "typed:1")
        created = of_type(await handle.events(), EventType.HOOK_CREATED)[0]
        assert created.data["type"] == "tests.runtime.flows:Approval"
        assert created.data["shape"]["required"] == ["approved", "by"]
        before = len(await handle.events())
        with pytest.raises(InvalidPayloadError, match="approved"):
            await client.resume_hook("typed:1", {"approved": "maybe", "by": "x"})
        with pytest.raises(InvalidPayloadError):
            await client.resume_hook("typed:1", None)
        with monkeypatch.context() as m:
            m.setattr(hooks, "find_type", lambda name, **_: None)
            with pytest.raises(InvalidPayloadError, match="by: Field required"):
                await client.resume_hook("typed:1", {"approved": True})
        assert len(await handle.events()) == before  # nothing was written
        await client.resume_hook("typed:1", {"approved": True, "by": "ana"})
        assert (await handle.result(timeout=10))["by"] == "ana"


async def test_a_hook_typed_by_a_scalar_class_refuses_what_does_not_convert(
    engine: Engine,
) -> None:
    client = engine.client
    async with engine.worker([sdk_flows.counted]):
        handle = await client.start(sdk_flows.counted, "count:1")
        await _active(engine, "count:1")
        created = of_type(await handle.events(), EventType.HOOK_CREATED)[0]
        assert created.data["type"] == "builtins:int" and "shape" not in created.data
        with pytest.raises(InvalidPayloadError):
            await client.resume_hook("count:1", "many")
        with pytest.raises(InvalidPayloadError):
            await client.resume_hook("count:1", {"n": 1})
        await client.resume_hook("count:1", 41)
        assert await handle.result(timeout=10) == 42


@wayline.step
async def hc_refund(path: str, order: str) -> None:
    flows.mark(path, f"refund {order}")


@wayline.step(compensate=hc_refund)
async def hc_charge(path: str, order: str) -> str:
    flows.mark(path, f"charge {order}")
    return f"ch-{order}"


@wayline.workflow
async def hc_order(path: str, order: str, token: str) -> object:
    await hc_charge(path, order)
    return await wayline.create_hook(token)


async def test_a_hook_conflict_reverses_the_completed_steps_like_any_failure(
    engine: Engine, tmp_path: Path
) -> None:
    """A run that fails ``HOOK_CONFLICT`` after a step it compensates is unwound as any other
    failure: the charge is refunded, and the run then ends failed with the conflict's error
    (the holder named). It ended failed at once before, the charge kept."""
    path, token = str(tmp_path / "log"), f"hc-{tmp_path.name}"
    async with engine.worker([hc_order]):
        holder, late, info = await _held_then_refused(
            engine,
            token,
            lambda: engine.client.start(hc_order, path, "o1", token),
            lambda: engine.client.start(hc_order, path, "o2", token),
        )
        assert info.error is not None and info.error["code"] == "HOOK_CONFLICT"
        assert info.error["holderRunId"] == holder.run_id
        assert flows.lines(path) == ["charge o1", "charge o2", "refund o2"]
        kinds = [e.type for e in await late.events()]
        assert EventType.RUN_COMPENSATING in kinds
        await _resumed(engine, token, holder)
    assert flows.lines(path) == ["charge o1", "charge o2", "refund o2"]


@wayline.workflow
async def hc_tagged_order(path: str, order: str, token: str) -> object:
    await hc_charge(path, order)
    wayline.set_attributes(stage="awaiting-approval")
    return await wayline.create_hook(token)


async def test_a_hook_conflict_keeps_the_attributes_set_before_it(
    engine: Engine, tmp_path: Path
) -> None:
    """The attributes a workflow set in the batch a hook conflict refused are recorded when
    the unwind begins, as for any other failure (before: that batch's ``attributes_set`` was
    never written, and the run ended without them)."""
    path, token = str(tmp_path / "log"), f"hct-{tmp_path.name}"
    async with engine.worker([hc_order, hc_tagged_order]):
        holder, _, info = await _held_then_refused(
            engine,
            token,
            lambda: engine.client.start(hc_order, path, "o1", token),
            lambda: engine.client.start(hc_tagged_order, path, "o2", token),
        )
        assert info.search_attributes.get("stage") == "awaiting-approval"
        assert flows.lines(path) == ["charge o1", "charge o2", "refund o2"]
        await _resumed(engine, token, holder)


@wayline.workflow
async def hc_tagged_wait(token: str) -> object:
    wayline.set_attributes(stage="awaiting-approval")
    return await wayline.create_hook(token)


async def test_a_hook_conflict_with_nothing_to_reverse_keeps_the_attributes_set_before_it(
    engine: Engine, tmp_path: Path
) -> None:
    """With nothing to compensate the run fails at once, and the attributes it set in the
    refused batch are written with its end (before: they were never written)."""
    token = f"hcw-{tmp_path.name}"
    async with engine.worker([hc_tagged_wait]):
        holder, _, info = await _held_then_refused(
            engine,
            token,
            lambda: engine.client.start(hc_tagged_wait, token),
            lambda: engine.client.start(hc_tagged_wait, token),
        )
        assert info.search_attributes.get("stage") == "awaiting-approval"
        assert info.error is not None and info.error["holderRunId"] == holder.run_id
        await _resumed(engine, token, holder)
