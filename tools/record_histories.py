"""Record the golden histories of the examples: ``python tools/record_histories.py``.

Runs the saga, typed-hook and retry-policy examples' workflows on an embedded world and writes
their logs, as ``wayline runs export`` does, to ``tests/golden/examples.jsonl``. The tests
replay that file against the examples' current code (``tests/unit/test_golden_histories.py``):
a change to an example that would block or strand its live runs fails there. Record again only
on purpose (a deliberate, versioned change), and say why in the commit.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples import retry_policy, trip_saga, typed_hooks  # noqa: E402

import wayline  # noqa: E402
from wayline._core.histories import history_of  # noqa: E402

OUT = ROOT / "tests" / "golden" / "examples.jsonl"


async def record() -> list[str]:
    workflows = [trip_saga.trip, typed_hooks.expense, retry_policy.reservation]
    with tempfile.TemporaryDirectory() as tmp:
        world = wayline.LocalWorld(Path(tmp) / "wayline.db")
        async with world, wayline.Worker(world, workflows):
            client = wayline.Client(world)
            trip = await client.start(trip_saga.trip, "LIS-2027")
            for _ in range(600):  # the unwind parks on the seat's failing release
                if await trip.status() is wayline.RunStatus.COMPENSATION_STUCK:
                    break
                await asyncio.sleep(0.05)
            await client.abandon_compensation(trip.run_id)
            expense = await client.start(typed_hooks.expense, "c-7", 2500)
            for by in ("ana", "bo"):
                await client.wait_for_hook("expense:c-7", timeout="30s")
                approval = typed_hooks.Approval(approved=True, by=by)
                await typed_hooks.Approval.resume(client, "expense:c-7", approval)
            handles = [
                trip,
                expense,
                await client.start(retry_policy.reservation, "BOOK-42"),
                await client.start(retry_policy.reservation, "GONE"),
            ]
            for handle in handles:
                try:
                    await handle.result(timeout=30)
                except wayline.RunFailedError:
                    pass  # the saga and the out-of-stock reservation fail, as they should
            lines = []
            for handle in handles:
                events = await world.list_events(handle.run_id)
                line = json.dumps(history_of(handle.run_id, events).to_json())
                # tracebacks name files by where this checkout is: keep only the repo's path
                lines.append(line.replace(str(ROOT) + "/", ""))
            return lines


def main() -> None:
    lines = asyncio.run(record())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} histories to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
