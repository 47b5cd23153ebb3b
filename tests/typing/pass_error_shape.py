"""Must pass ``mypy --strict``: a failure's ``cause`` is a typed ``ErrorCause`` chain, and its
``message`` a ``str``."""

from __future__ import annotations

from typing import assert_type

import wayline


async def read(handle: wayline.RunHandle[str]) -> str | None:
    try:
        return await handle.result()
    except wayline.RunFailedError as err:
        assert_type(err.message, str)
        assert_type(err.cause, wayline.ErrorCause)
        assert_type(err.cause.code, str)
        assert_type(err.cause.step, str | None)
        assert_type(err.cause.attempt, int | None)
        assert_type(err.cause.cause, wayline.ErrorCause | None)
        assert_type(err.cause.root, wayline.ErrorCause)
        return err.cause.root.message


@wayline.workflow
async def catches() -> str:
    try:
        await wayline.sleep(1)
    except wayline.StepFailedError as err:
        assert_type(err.cause, wayline.ErrorCause)
        return err.message
    except wayline.ChildFailedError as err:
        assert_type(err.cause, wayline.ErrorCause)
        return err.message
    return ""
