"""Hook-token claims on JetStream: the hooks KV bucket, an entry a token (``kv_key``) naming
the run and correlation id of the hook that holds it.

An append that creates hooks claims their tokens first (create, or update over a stale holder,
by compare-and-set), so two runs cannot both hold one token; a failed append releases what it
claimed, a disposed hook or an ended run gives its tokens back, and a deleted run's are
dropped. Whether a holder is live is judged against the log (``EventLog``), whose catch-up this
module is given; the entry itself is only a claim.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..._core.events import HOOK_ACTIVE, RUN_TERMINAL_EVENTS, Event, EventType
from ...errors import (
    CorruptEntryError,
    CorruptLogError,
    HookTokenConflictError,
    WorldUnavailableError,
)
from ...world import HookInfo, entries
from .buckets import kv_bucket
from .codec import dumps, parse_stamp, wrap
from .direct import StoredMsg, kv_read
from .names import Names, kv_key
from .run_cache import RunState
from .skew import Skew

log = logging.getLogger("wayline.worlds.nats")

_CLAIM_GRACE = 30.0
"""A hook-token claim whose hook is not in the log yet is honoured this long (seconds), and
only while the run's log is where the claim says its append will land (``at``)."""


class HookClaims:
    def __init__(
        self,
        js: Any,
        names: Names,
        *,
        url: str,
        skew: Skew,
        catch_up: Callable[[RunState], Awaitable[object]],
        fresh: Callable[[str], Awaitable[RunState]],
    ) -> None:
        self._js = js
        self._names = names
        self._url = url
        self.skew = skew
        """The server's clock as the log learns it: a claim's grace is measured on it."""
        self._catch_up = catch_up
        """Reads another run's log into a throwaway projection (``EventLog._catch_up``)."""
        self._fresh = fresh
        """A run's projection, caught up (``EventLog._fresh``)."""
        self._hooks: Any = None
        self.locate: Callable[[str], HookClaims] | None = None
        """In a world of several partitions: the claims of the partition's log a run lives
        in (a token's holder may live in another partition than the run that asks)."""

    async def start(self) -> None:
        self._hooks = await kv_bucket(self._js, self._names.hooks_bucket, url=self._url)

    async def _kv_last(self, key: str) -> StoredMsg | None:
        """The key's newest stored message (a value or a delete marker): ``kv_last``, not
        nats-py's ``get``, which takes a forged ``Status`` header for the server's."""
        bucket = self._names.hooks_bucket
        return await kv_read(self._js, bucket, key, url=self._url, what="reading a hook token")

    async def _create(self, key: str, value: bytes) -> int:
        """nats-py's ``KeyValue.create`` (a write over no entry or a delete marker), reading
        the key through :meth:`_kv_last`."""
        import nats.js.errors

        try:
            return int(await self._hooks.update(key, value, last=0))
        except nats.js.errors.KeyWrongLastSequenceError:
            last = await self._kv_last(key)
            if last is None or last.headers.get("KV-Operation") not in ("DEL", "PURGE"):
                raise
            return int(await self._hooks.update(key, value, last=last.seq))

    async def _kv_entry(self, key: str) -> tuple[int, dict[str, Any] | entries.Unreadable] | None:
        raw = await self._kv_last(key)
        if raw is None:
            return None
        headers = raw.headers
        if headers.get("KV-Operation") in ("DEL", "PURGE"):
            return None
        if not raw.data:  # a PUT of nothing: ``create`` refuses the key, so it must be judged
            return int(raw.seq), entries.Unreadable("an empty value")
        try:
            value = entries.loads_object(raw.data)
            for name in ("token", "run", "cid"):
                entries.field(value, name, str)
            entries.field(value, "active", bool)
            if kv_key(value["token"]) != key:
                raise entries.Unreadable(f"names token {value['token'][:60]!r}")
            value["_at"] = parse_stamp(headers.get("Nats-Time-Stamp", ""))
        except entries.Unreadable as err:
            return int(raw.seq), err
        except (ValueError, IndexError, OverflowError) as err:
            return int(raw.seq), entries.Unreadable(f"no server timestamp ({err})")
        return int(raw.seq), value

    async def claim_tokens(
        self, st: RunState, hooks: list[tuple[str, str]], claims: dict[str, tuple[str, int, int]]
    ) -> None:
        import nats.js.errors

        for cid, token in hooks:
            key = kv_key(token)
            # ``at``: the log position this append expects (the stream sequence of the run's
            # last message); a claim whose run has moved past it without the hook is stale
            claim = {"token": token, "run": st.run_id, "cid": cid, "active": True}
            value = dumps({**claim, "at": st.stream_seq})
            if token in claims:
                if claims[token][2] == st.stream_seq:
                    continue
                # another round on a moved log: the claim says so, or it would look stale
                try:
                    rev = await self._hooks.update(key, value, last=claims[token][1])
                    claims[token] = (key, rev, st.stream_seq)
                    continue
                except nats.js.errors.KeyWrongLastSequenceError:
                    del claims[token]  # taken over meanwhile: claim it again, as anyone would
                except Exception as err:
                    raise wrap(self._url, f"claiming hook token {token!r}", err) from err
            for _ in range(5):
                try:
                    rev = await self._create(key, value)
                    claims[token] = (key, rev, st.stream_seq)
                    break
                except nats.js.errors.KeyWrongLastSequenceError:
                    pass
                except Exception as err:
                    raise wrap(self._url, f"claiming hook token {token!r}", err) from err
                entry = await self._kv_entry(key)
                if entry is None:
                    continue
                rev, held = entry
                if isinstance(held, entries.Unreadable):
                    log.warning(
                        "hook token %r: its entry in %s is unreadable (%s); the hook that "
                        "claims it now overwrites it",
                        token,
                        self._names.hooks_bucket,
                        held,
                    )
                elif await self._holds(st, held):
                    if (held.get("run"), held.get("cid")) == (st.run_id, cid):
                        # a live claim for this very hook by another writer appending it at
                        # the same position (an owner and a replay): share it, own nothing.
                        # Taking it over would let our failed append delete the entry the
                        # winner's hook resolves through.
                        break
                    raise HookTokenConflictError.held_by(token, str(held.get("run")), st.run_id)
                try:  # a stale holder (disposed, terminal run, claim that never landed)
                    rev = await self._hooks.update(key, value, last=rev)
                    claims[token] = (key, rev, st.stream_seq)
                    break
                except nats.js.errors.KeyWrongLastSequenceError:
                    continue
                except Exception as err:
                    raise wrap(self._url, f"claiming hook token {token!r}", err) from err
            else:  # another writer kept rewriting the entry: not a conflict, a retry
                raise WorldUnavailableError(
                    f"NATS at {self._url}: hook token {token!r} stayed contended; try again",
                    url=self._url,
                )

    async def _holds(self, st: RunState, held: dict[str, Any]) -> bool:
        """Whether the KV holder of a token is a live hook (checked against the log)."""
        if not held.get("active"):
            return False
        run, hcid = str(held.get("run")), str(held.get("cid"))
        if run == st.run_id:
            other = st
        else:
            # a throwaway projection: taking the other run's lock while holding ours could
            # deadlock with an append on that run that checks a token we hold
            home = self if self.locate is None else self.locate(run)
            other = RunState(run, home._names.run_subject(run))
            try:
                await home._catch_up(other)
            except CorruptLogError:
                return True  # a fenced run keeps what it holds until it is repaired
        status = other.entities.get(hcid)
        if other.status is None or other.status.terminal:
            # no such run (a hook is only ever created in a run that exists), or it ended
            return False
        if status is None:  # claimed but not (yet) in the log
            # honoured only while its append can still land where it said (a forged claim
            # naming a live run but no hook of it, or one without ``at``, holds nothing)
            at = held.get("at")
            if type(at) is not int or at != other.stream_seq:
                return False
            return bool(self.skew.now() - float(held.get("_at", 0.0)) < _CLAIM_GRACE)
        return status == HOOK_ACTIVE

    async def release_claims(self, st: RunState, claims: dict[str, tuple[str, int, int]]) -> None:
        """Delete the claims of a failed append, except those whose hook is in the log as
        read (another writer appended that very hook: its entry is the claim we hold)."""
        landed = set(st.hook_tokens.values())
        for token, (key, rev, _) in claims.items():
            if token in landed:
                continue
            try:
                await self._hooks.delete(key, last=rev)
            except Exception as err:  # best effort; _holds repairs stale claims
                log.debug("releasing hook claim %s failed: %s", key, err)

    def tokens_to_release(self, st: RunState, stored: list[Event]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for ev in stored:
            if ev.type is EventType.HOOK_DISPOSED and ev.correlation_id in st.hook_tokens:
                out.append((ev.correlation_id, st.hook_tokens[ev.correlation_id]))
            elif ev.type in RUN_TERMINAL_EVENTS:
                # hooks still active when the run ended (entity statuses stay as they were)
                out.extend(
                    (cid, token)
                    for cid, token in st.hook_tokens.items()
                    if st.entities.get(cid) == HOOK_ACTIVE
                )
        return out

    async def dispose_token(self, run_id: str, cid: str, token: str) -> None:
        key = kv_key(token)
        try:
            entry = await self._kv_entry(key)
            if entry is None:
                return
            rev, held = entry
            if isinstance(held, entries.Unreadable):
                return  # not ours; a claimant of the token overwrites it
            if held.get("run") != run_id or held.get("cid") != cid or not held.get("active"):
                return
            value = dumps({"token": token, "run": run_id, "cid": cid, "active": False})
            await self._hooks.update(key, value, last=rev)
        except Exception as err:  # best effort; get_hook checks the log
            log.debug("releasing hook token %r failed: %s", token, err)

    async def drop_token(self, run_id: str, cid: str, token: str, last: int) -> None:
        """Delete a token's entry if it still names this run's hook (its run is deleted; its
        log ended at stream sequence ``last``). A claim made past ``last`` is a new run's
        under the same id, started once the log was purged: it stays."""
        key = kv_key(token)
        entry = await self._kv_entry(key)
        if entry is None:
            return
        rev, held = entry
        if isinstance(held, entries.Unreadable):
            return
        if held.get("run") != run_id or held.get("cid") != cid:
            return
        at = held.get("at")
        if type(at) is int and at > last:
            return
        try:
            await self._hooks.delete(key, last=rev)
        except Exception as err:  # best effort: get_hook checks the (now empty) log anyway
            log.debug("deleting hook token %r failed: %s", token, err)

    async def get_hook(self, token: str) -> HookInfo | None:
        entry = await self._kv_entry(kv_key(token))
        if entry is None:
            return None
        _, held = entry
        if isinstance(held, entries.Unreadable):
            raise CorruptEntryError(
                f"hook token {token!r}: its entry in {self._names.hooks_bucket} is unreadable "
                f"({held}); the next hook that claims the token overwrites it",
                store=self._names.hooks_bucket,
                key=token,
                why=str(held),
            )
        run, cid, active = str(held["run"]), str(held["cid"]), bool(held.get("active"))
        if active:
            home = self if self.locate is None else self.locate(run)
            st = await home._fresh(run)
            status = st.entities.get(cid)
            if status is None:  # a claim that never reached the log, or a deleted run
                return None
            active = status == HOOK_ACTIVE and not (st.status is not None and st.status.terminal)
        return HookInfo(token, run, cid, active)
