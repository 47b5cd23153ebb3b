"""A module with a module-level ``__getattr__`` (PEP 562), for definition identity: a workflow
that names ``identity_lazy.lazy_charge`` reaches a step only through ``__getattr__``, which the
identity must not call (it reads the module's namespace), and ``identity_lazy.real_charge``,
which is in the namespace."""

from __future__ import annotations

from typing import Any

import wayline


@wayline.step(name="idpin.lazy.real_charge", max_retries=4)
async def real_charge(amount: int) -> int:
    return amount


@wayline.step(name="idpin.lazy.hidden_charge")
async def _hidden_charge(amount: int) -> int:
    return amount


def __getattr__(name: str) -> Any:
    if name == "lazy_charge":
        return _hidden_charge
    raise AttributeError(name)
