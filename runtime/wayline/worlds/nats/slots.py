"""Concurrency slots on JetStream: a KV entry per limit key, ``{"holders": [names], "leases":
{name: expires at}, "tokens": {name: token}}``, changed only by compare-and-set (create when
absent, update on the revision read), so two workers racing for the last slot cannot both win.
A holder without a lease is a run: it is dropped by whoever next looks at the key once its run
has ended (by its log) or is gone; a run whose log cannot be read holds on until it is
repaired. A leased holder (a step) is dropped once its lease ran out (wall clock of the worker
looking: a skew between workers shortens or lengthens a dead holder's lease by as much).

A leased holder's token names the take that holds it now (a redelivery of a step takes its
holder again under a new one): a renewal or a give-back under another token is a stale
attempt's and changes nothing. A holder without a token (written by a worker from before
tokens, whose reader ignores the field and whose writes drop it) is renewed or given back under
any, as before."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ...errors import CorruptLogError, WorldUnavailableError
from ...world import RunInfo, entries
from .buckets import BucketOnFirstUse
from .codec import wrap
from .direct import kv_read, kv_value
from .names import Names, kv_key

_ATTEMPTS = 20


class Slots(BucketOnFirstUse):
    suffix = "slots"

    def __init__(
        self,
        js: Any,
        names: Names,
        get_run: Callable[[str], Awaitable[RunInfo | None]],
        *,
        replicas: int,
        memory: bool,
        url: str,
        now: Callable[[], float],
    ) -> None:
        super().__init__(js, names, replicas=replicas, memory=memory, url=url, now=now)
        self._get_run = get_run

    async def acquire(
        self, key: str, holder: str, limit: int, lease: float | None, token: str | None
    ) -> tuple[bool, list[str]]:
        def change(entry: _Entry) -> tuple[bool, list[str]]:
            held = entry.holders
            won = holder in held or len(held) < limit
            if won and holder not in held:
                held = [*held, holder]
            if won and lease is not None:
                entry.leases[holder] = self._now() + lease
                _take_token(entry.tokens, holder, token)
            return won, held

        return await self._change(key, holder, change)

    async def renew(self, key: str, holder: str, lease: float, token: str | None) -> bool:
        """Extend the holder's lease only while it holds an unexpired one under this take's
        token: a holder that stalled past its lease may find the slot taken and given back
        since, and must not take it again unnoticed; a stale attempt whose redelivery took
        the holder again must not keep the redelivery's lease alive as its own."""

        def change(entry: _Entry) -> tuple[bool, list[str]]:
            now = self._now()
            held, leases = entry.holders, entry.leases
            if holder not in held or leases.get(holder, 0.0) <= now:
                return False, held
            if not _matches(entry.tokens, holder, token):
                return False, held
            leases[holder] = now + lease
            return True, held

        won, _ = await self._change(key, holder, change)
        return won

    async def release(self, key: str, holder: str, token: str | None) -> None:
        def change(entry: _Entry) -> tuple[bool, list[str]]:
            if not _matches(entry.tokens, holder, token):  # the redelivery's slot now
                return False, entry.holders
            entry.leases.pop(holder, None)
            entry.tokens.pop(holder, None)
            return False, [h for h in entry.holders if h != holder]

        await self._change(key, holder, change)

    async def _change(
        self,
        key: str,
        holder: str,
        change: Callable[[_Entry], tuple[bool, list[str]]],
    ) -> tuple[bool, list[str]]:
        """Read the key, drop dead holders, apply ``change`` and write it back by
        compare-and-set (again from the read when another worker wrote first)."""
        import nats.js.errors

        kv = await self._bucket()
        name = kv_key(key)
        for _ in range(_ATTEMPTS):
            found = await kv_read(
                self._js, kv._name, name, url=self._url, what=f"reading concurrency slot {key!r}"
            )
            revision, value_read = kv_value(found)
            held, leases, tokens = _read(value_read)
            now = self._now()
            live = [h for h in held if h == holder or await self._live(h, leases, now)]
            leases = {h: at for h, at in leases.items() if h in live}
            tokens = {h: t for h, t in tokens.items() if h in live}
            seen = _Entry(list(live), dict(leases), dict(tokens))
            current = _Entry(live, leases, tokens)
            won, after = change(current)
            current.holders = after
            if current == seen and live == held:
                return won, after
            stored: dict[str, Any] = {"key": key, "holders": after, "leases": leases}
            if tokens:
                stored["tokens"] = tokens
            value = json.dumps(stored).encode()
            try:
                await kv.update(name, value, last=revision)  # 0: over no entry
            except (nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.BadRequestError):
                continue  # another worker changed the slots first: look again
            except Exception as err:
                raise wrap(self._url, f"taking concurrency slot {key!r}", err) from err
            return won, after
        raise WorldUnavailableError(f"NATS at {self._url}: concurrency slot {key!r} is contended")

    async def _live(self, holder: str, leases: dict[str, float], now: float) -> bool:
        if holder in leases:
            return leases[holder] > now
        try:
            info = await self._get_run(holder)
        except CorruptLogError:
            # A fenced run keeps what it holds until it is repaired (as its hook tokens): its
            # end cannot be read, and the error is the holder's, never the asking run's.
            return True
        return info is not None and not info.status.terminal


@dataclass(slots=True)
class _Entry:
    """A key's live holders, their leases and their takes' tokens, as ``change`` leaves them."""

    holders: list[str]
    leases: dict[str, float]
    tokens: dict[str, str]


def _take_token(tokens: dict[str, str], holder: str, token: str | None) -> None:
    """Record the take's token (a take without one leaves the holder open to any)."""
    if token is None:
        tokens.pop(holder, None)
    else:
        tokens[holder] = token


def _matches(tokens: dict[str, str], holder: str, token: str | None) -> bool:
    """The holder was taken under ``token`` (or either side has none: older writers)."""
    mine = tokens.get(holder)
    return mine is None or token is None or mine == token


def _read(value: bytes | None) -> tuple[list[str], dict[str, float], dict[str, str]]:
    """A stored entry's holders, leases and tokens. Anyone can write into the bucket: what is
    not a holder's name, a lease's finite time or a token's string holds nothing (the next
    write replaces it)."""
    try:
        stored = entries.loads(value) if value else {}
    except entries.Unreadable:
        stored = {}
    if not isinstance(stored, dict):
        stored = {}
    listed, timed, named = stored.get("holders"), stored.get("leases"), stored.get("tokens")
    held = [h for h in listed if isinstance(h, str)] if isinstance(listed, list) else []
    leases: dict[str, float] = {}
    for name, at in timed.items() if isinstance(timed, dict) else ():
        until = entries.seconds(at)
        if until is not None:
            leases[name] = until
    tokens = {
        name: token
        for name, token in (named.items() if isinstance(named, dict) else ())
        if isinstance(name, str) and isinstance(token, str)
    }
    return list(dict.fromkeys(held)), leases, tokens
