"""A world wrapper whose queue mints a fresh message id for every delivery: the degraded mode
of seed 000 ("a World whose queue mints fresh IDs per delivery ... never wedges and never
duplicates"). Everything else passes through to the wrapped world."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from wayline._core.events import Event, NewEvent, RunStatus
from wayline._core.ids import MessageId
from wayline._core.search_attributes import Where
from wayline.world import Delivery, HookInfo, RunInfo, World


class UnstableIdWorld(World):
    unstable_message_ids = True

    def __init__(self, inner: World) -> None:
        super().__init__()
        self.inner = inner
        self.url = inner.url

    @property
    def visibility_seconds(self) -> float:
        return self.inner.visibility_seconds

    def now(self) -> float:
        return self.inner.now()

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def append(
        self, run_id: str, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[Event]:
        return await self.inner.append(run_id, events, expected_seq=expected_seq)

    async def list_events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        return await self.inner.list_events(run_id, after_seq)

    async def get_run(self, run_id: str) -> RunInfo | None:
        return await self.inner.get_run(run_id)

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        workflow: str | None = None,
        limit: int = 100,
        where: Sequence[Where] = (),
        since: float | None = None,
    ) -> list[RunInfo]:
        return await self.inner.list_runs(
            status=status, workflow=workflow, limit=limit, where=where, since=since
        )

    async def get_hook(self, token: str) -> HookInfo | None:
        return await self.inner.get_hook(token)

    async def enqueue(
        self,
        topic: str,
        payload: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        delay_seconds: float = 0.0,
        recoverable: bool = False,
    ) -> MessageId:
        return await self.inner.enqueue(
            topic,
            payload,
            idempotency_key=idempotency_key,
            delay_seconds=delay_seconds,
            recoverable=recoverable,
        )

    async def receive(
        self, topic: str, *, max_messages: int = 1, wait_seconds: float = 1.0
    ) -> list[Delivery]:
        got = await self.inner.receive(topic, max_messages=max_messages, wait_seconds=wait_seconds)
        return [
            Delivery(
                d.topic,
                MessageId(f"{d.message_id}~{secrets.token_hex(6)}"),
                d.attempt,
                d.payload,
                d.raw,
                d,
            )
            for d in got
        ]

    async def ack(self, delivery: Delivery) -> bool:
        return await self.inner.ack(delivery.handle)

    async def retry(self, delivery: Delivery, delay_seconds: float = 0.0) -> bool:
        return await self.inner.retry(delivery.handle, delay_seconds)

    async def release(
        self, delivery: Delivery, delay_seconds: float = 0.0, *, held: bool = False
    ) -> bool:
        return await self.inner.release(delivery.handle, delay_seconds, held=held)

    async def cancel_delayed(self, message_id: MessageId) -> bool:
        return await self.inner.cancel_delayed(message_id)

    async def renew(self, delivery: Delivery) -> bool:
        return await self.inner.renew(delivery.handle)

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        return await self.inner.dead_letter(delivery.handle, reason)

    async def list_dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        return await self.inner.list_dead_letters(limit)

    async def record_served(self, entries: Sequence[Mapping[str, Any]]) -> None:
        await self.inner.record_served(entries)

    async def list_served(self) -> list[dict[str, Any]]:
        return await self.inner.list_served()
