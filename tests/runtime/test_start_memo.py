"""``StartOptions(memo=...)`` on every world: a start records who made the run in its
``run_created``, a start that finds the run keeps the first memo, and a memo that is not a
small mapping of strings is refused before anything is written."""

from __future__ import annotations

import uuid

import pytest

import wayline
from tests.runtime.harness import Engine

pytestmark = pytest.mark.engine_logic  # docs/testing.md, "The pyramid"


@wayline.workflow
async def memo_echo(value: str) -> str:
    return value


async def test_a_memo_is_recorded_once_with_the_run(engine: Engine) -> None:
    client, bid = engine.client, f"order-{uuid.uuid4().hex[:8]}"
    first = await client.start_with(
        wayline.StartOptions(id=bid, memo={"owner": "a"}), memo_echo, "x"
    )
    again = await client.start_with(
        wayline.StartOptions(id=bid, memo={"owner": "b"}), memo_echo, "x"
    )
    assert again.run_id == first.run_id
    info = await client.get_run(bid)
    assert info.attributes.get("memo") == {"owner": "a"}
    plain = await client.start(memo_echo, "y")
    assert "memo" not in (await client.get_run(plain.run_id)).attributes


@pytest.mark.parametrize(
    ("memo", "says"),
    [
        ({"owner": 1}, "is a int, not a string"),
        ({"": "a"}, "a memo key has 1 to 256"),
        ({"k": "v" * 257}, "a memo value has 0 to 256"),
        ({f"k{i}": "v" for i in range(17)}, "at most 16 entries"),
        (["owner"], "maps strings to strings"),
    ],
)
async def test_a_bad_memo_is_refused_before_anything_is_written(
    engine: Engine, memo: object, says: str
) -> None:
    with pytest.raises(wayline.InvalidPayloadError, match=says):
        wayline.StartOptions(memo=memo)  # type: ignore[arg-type]
    assert await engine.client.list_runs() == []
