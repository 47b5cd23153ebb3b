"""Workflows whose code reaches steps in the less common ways, for the recorded definition
identities of tests/unit/test_identity_recorded.py: through a class with ``__slots__``, a
nested function, a closure, a module with ``__getattr__``, and decorated methods and helpers.
Changing a step's name or options here changes a recorded identity, which is the point."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import wayline
from tests.unit import identity_lazy


@wayline.step(name="idpin.refund")
async def refund(amount: int) -> int:
    return -amount


@wayline.step(name="idpin.charge", max_retries=3, compensate=refund)
async def charge(amount: int) -> int:
    return amount


@wayline.step(name="idpin.ship", retry_delay=2.5)
async def ship(amount: int) -> int:
    return amount


@wayline.step(name="idpin.notify")
async def notify(amount: int) -> int:
    return amount


@wayline.workflow(name="idpin.kid")
async def kid(amount: int) -> int:
    return await ship(amount)


class Slotted:
    """A class with ``__slots__``: its namespace is a mappingproxy with slot descriptors."""

    __slots__ = ("amount",)
    pay = charge
    send = ship

    def __init__(self, amount: int) -> None:
        self.amount = amount


class Meta(type):
    """A metaclass whose ``__getattr__`` answers every name: identity must not ask it."""

    def __getattr__(cls, name: str) -> Any:
        return notify


class WithMeta(metaclass=Meta):
    pay = charge


def logged(fn: Callable[..., Awaitable[int]]) -> Callable[..., Awaitable[int]]:
    @functools.wraps(fn)
    async def wrapper(*args: Any) -> int:
        return await fn(*args)

    return wrapper


@logged
async def wrapped_helper(amount: int) -> int:
    return await notify(amount)


class Methods:
    @staticmethod
    async def static_send(amount: int) -> int:
        return await ship(amount)

    @classmethod
    async def class_pay(cls, amount: int) -> int:
        return await charge(amount)

    async def plain(self, amount: int) -> int:
        return await refund(amount)


@wayline.workflow(name="idpin.slotted")
async def through_slots(amount: int) -> int:
    return await Slotted.pay(amount) + await Slotted.send(amount)


@wayline.workflow(name="idpin.nested")
async def through_nested(amount: int) -> int:
    async def inner(x: int) -> int:
        return await ship(x) + await kid(x)

    return await inner(amount)


def _closing_over(step: Any, child: Any) -> Any:
    @wayline.workflow(name="idpin.closure")
    async def closure(amount: int) -> int:
        return await step(amount) + await child(amount)

    return closure


through_closure = _closing_over(refund, kid)


@wayline.workflow(name="idpin.lazy_module")
async def through_lazy_module(amount: int) -> int:
    return await identity_lazy.real_charge(amount) + await identity_lazy.lazy_charge(amount)


@wayline.workflow(name="idpin.metaclass")
async def through_metaclass(amount: int) -> int:
    return await WithMeta.pay(amount) + await WithMeta.unlisted(amount)  # type: ignore[attr-defined]


@wayline.workflow(name="idpin.decorated")
async def through_decorated(amount: int) -> int:
    total = await wrapped_helper(amount) + await Methods.static_send(amount)
    return total + await Methods.class_pay(amount) + await Methods().plain(amount)


ALL = [
    through_slots,
    through_nested,
    through_closure,
    through_lazy_module,
    through_metaclass,
    through_decorated,
]
