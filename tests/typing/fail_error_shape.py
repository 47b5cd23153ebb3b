"""Must fail ``mypy --strict`` with deprecations reported: ``RunFailedError.error_code`` is
reported, naming what replaces it."""

# mypy: enable-error-code="deprecated"

from __future__ import annotations

import wayline


def code(err: wayline.RunFailedError) -> str:
    return err.error_code  # E: use err.cause.code
