"""A workflow whose second half may run on another worker (the tracing test); apart from
``flows.py``, whose workflow list other tests pin."""

from __future__ import annotations

import wayline


@wayline.step(name="relay_tests.shout")
def shout(text: str) -> str:
    return text.upper()


@wayline.workflow
async def relay(text: str, seconds: float) -> list[str]:
    """Two steps a sleep apart."""
    first = await shout(text)
    await wayline.sleep(seconds)
    second = await shout(first + "!")
    return [first, second]
