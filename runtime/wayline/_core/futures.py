"""The deterministic future a workflow awaits. Resolved only by the replay, in log order."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from ..errors import WorkflowDeterminismError

T = TypeVar("T")

_PENDING, _DONE, _FAILED = 0, 1, 2

_closing: ContextVar[bool] = ContextVar("wayline_closing", default=False)


@contextmanager
def closing() -> Iterator[None]:
    """While a replay closes its workflow's coroutines (``Replay.close``): awaiting a future
    not settled ends the coroutine (``GeneratorExit``) instead of suspending it again."""
    token = _closing.set(True)
    try:
        yield
    finally:
        _closing.reset(token)


class WFuture(Generic[T]):
    __slots__ = ("_callbacks", "_state", "_value", "label", "order")

    def __init__(self, label: str = "") -> None:
        self._state = _PENDING
        self._value: Any = None
        self._callbacks: list[Callable[[WFuture[T]], None]] = []
        self.label = label
        self.order = 0
        """Settlement order within the replay (log order), for ``race``."""

    def done(self) -> bool:
        return self._state != _PENDING

    def failed(self) -> bool:
        return self._state == _FAILED

    def result(self) -> T:
        if self._state == _FAILED:
            raise self._value
        if self._state == _PENDING:
            raise RuntimeError(f"{self.label or 'future'} is not settled")
        value: T = self._value
        return value

    def exception(self) -> BaseException | None:
        return self._value if self._state == _FAILED else None

    def set_result(self, value: T, order: int = 0) -> None:
        if self._state == _PENDING:
            self._state, self._value, self.order = _DONE, value, order
            self._fire()

    def set_exception(self, exc: BaseException, order: int = 0) -> None:
        if self._state == _PENDING:
            self._state, self._value, self.order = _FAILED, exc, order
            self._fire()

    def add_done_callback(self, fn: Callable[[WFuture[T]], None]) -> None:
        if self._state != _PENDING:
            fn(self)
        else:
            self._callbacks.append(fn)

    def _fire(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)

    def __await__(self) -> Generator[Any, None, T]:
        if self._state == _PENDING:
            if _closing.get():
                # awaited by a ``finally`` of a workflow its replay is closing (see
                # ``Replay.close``): nothing more of the workflow runs
                raise GeneratorExit
            try:
                yield self
            except RuntimeError as err:  # thrown in by an asyncio task that stepped this await
                if not str(err).startswith("Task got bad yield"):
                    raise
                raise WorkflowDeterminismError(
                    f"a workflow awaited {self.label} in an asyncio task (asyncio.gather, "
                    "create_task or ensure_future), which is not durable: use wayline.gather "
                    "or wayline.race"
                ) from None
        return self.result()

    def __repr__(self) -> str:
        state = {_PENDING: "pending", _DONE: "done", _FAILED: "failed"}[self._state]
        return f"<WFuture {self.label} {state}>"
