"""One check of a run's input, before anything is written: ``Client.start`` refuses what
``wayline start`` refuses, with the same message, and ``wayline.child`` refuses it in the parent."""

from __future__ import annotations

import pytest

import wayline
from tests.runtime import client_flows
from tests.runtime.harness import Engine
from wayline.cli.commands import validate_input

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


async def test_client_start_refuses_input_the_workflow_cannot_take(engine: Engine) -> None:
    with pytest.raises(wayline.SerializationError) as refused:
        await engine.client.start(client_flows.takes_list, "not a list")  # type: ignore[arg-type]
    assert "input of workflow 'takes_list' argument 'items' does not match" in refused.value.message
    with pytest.raises(wayline.SerializationError) as cli:
        validate_input(client_flows.takes_list, ["not a list"])
    assert cli.value.message == refused.value.message  # the CLI's words, exactly
    assert await engine.world.list_runs() == []  # nothing written


async def test_client_start_by_name_checks_a_known_workflow(engine: Engine) -> None:
    client = wayline.Client(engine.world, [client_flows.takes_list])
    with pytest.raises(wayline.SerializationError, match="argument 'items' does not match"):
        await client.start("takes_list", {"not": "a list"})
    assert await engine.world.list_runs() == []


async def test_a_child_with_input_it_cannot_take_is_refused_in_the_parent(engine: Engine) -> None:
    flows = [client_flows.starts_bad_child, client_flows.takes_list]
    async with engine.worker(flows):
        handle = await engine.client.start(client_flows.starts_bad_child)
        said = await handle.result(timeout=10)
    assert "input of child workflow 'takes_list' argument 'items' does not match" in said
    runs = await engine.world.list_runs()
    assert [r.run_id for r in runs] == [handle.run_id]  # no child run was written


def test_the_cli_check_measures_the_input_against_the_environments_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CLI checks before it opens a world, with the limits its client will read."""
    monkeypatch.setenv("WAYLINE_MAX_INPUT_BYTES", "1024")
    with pytest.raises(wayline.PayloadTooLargeError, match="over the limit of 1024 bytes"):
        validate_input(client_flows.takes_list, [["x" * 2000]])
    validate_input(client_flows.takes_list, [["x" * 500]])
