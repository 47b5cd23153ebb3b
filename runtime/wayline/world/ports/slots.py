"""The slot port: concurrency slots of a key, held by a run or leased by a step."""

from __future__ import annotations


class Slots:
    """Counted slots per key (``_engine.concurrency``, ``_engine.step_slots``)."""

    async def acquire_slot(
        self,
        key: str,
        holder: str,
        limit: int,
        *,
        lease: float | None = None,
        token: str | None = None,
    ) -> tuple[bool, list[str]]:
        """Take one of ``limit`` slots of ``key`` for ``holder`` (again: True at once).

        Without ``lease`` the holder is a run id, holding its slot while the run is live:
        holders whose runs have ended or are gone are dropped first. With ``lease`` (seconds)
        the holder is any name (a step of a run), holding its slot until ``lease`` seconds from
        now; taking it again renews the lease (a holder already running renews with
        :meth:`renew_slot`), :meth:`release_slot` ends it, and a holder whose
        lease ran out (it died) is dropped by whoever next looks at the key. A leased take
        records ``token`` (a fresh one per take) in place of the holder's previous one, so the
        take that held the holder before (a stale attempt of a step its redelivery took again)
        can neither renew nor give back what is now the new take's. Returns whether
        ``holder`` holds a slot now, and the holders after the attempt."""
        raise NotImplementedError(f"{type(self).__name__} does not keep concurrency slots")

    async def renew_slot(
        self, key: str, holder: str, *, lease: float, token: str | None = None
    ) -> bool:
        """Extend ``holder``'s leased slot of ``key`` to ``lease`` seconds from now, only if it
        still holds it under a lease that has not run out, taken under ``token``. False means
        the slot is lost: the holder stalled past its lease, so another may have taken and even
        given back the slot meanwhile (a renewal that merely found room again would overlap
        with it), or the holder was taken again under another token (a redelivery). A slot
        recorded without a token (by a writer from before tokens), or a renewal without one,
        matches any."""
        raise NotImplementedError(f"{type(self).__name__} does not keep concurrency slots")

    async def release_slot(self, key: str, holder: str, *, token: str | None = None) -> None:
        """Give back ``holder``'s slot of ``key`` (a no-op when it holds none, or holds it
        under a token other than ``token``: a later take's; no token on either side matches
        any)."""
        raise NotImplementedError(f"{type(self).__name__} does not keep concurrency slots")
