"""Webhook URLs: a hook created with ``webhook=True`` can be resumed by a POST to
``<WAYLINE_CONSOLE_URL>/hooks/<token>/webhook?sig=<signature>``, where the signature is the
credential (docs/console.md, "Webhook URLs").

The signature is an HMAC-SHA256 of the token under a key the workers and the console share
(``WAYLINE_WEBHOOK_SECRET`` or ``WAYLINE_WEBHOOK_SECRET_FILE``). Nothing of it is written to
the run's log: whoever may read runs (the console's pages need no token) must not learn a
URL that resumes a hook. A replay signs the token again, so the URL is the same on every
replay for as long as the first key is."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from urllib.parse import quote

from ..errors import ConfigurationError
from ..settings import Settings

MIN_SECRET_CHARS = 16
"""A shorter key is guessed; as for the console's bearer token, it is refused."""

# A prefix of the signed text, so that a signature made here is never valid for another
# use of the same key (a key shared with something else by mistake, say).
_PURPOSE = b"wayline-webhook\x00"


def signature(secret: str, token: str) -> str:
    """The URL-safe signature of ``token`` under ``secret`` (43 characters)."""
    mac = hmac.new(secret.encode(), _PURPOSE + token.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def verify(secrets: Sequence[str], token: str, given: str) -> bool:
    """Whether ``given`` is ``token``'s signature under any of ``secrets`` (the first signs;
    the others still verify during a rotation). Compared in constant time."""
    guess = given.encode("utf-8", "surrogateescape")
    return any(hmac.compare_digest(guess, signature(s, token).encode()) for s in secrets)


def check_secrets(secrets: Sequence[str], who: str) -> None:
    if not secrets:
        raise ConfigurationError(
            f"{who} needs a webhook key: set WAYLINE_WEBHOOK_SECRET (or "
            "WAYLINE_WEBHOOK_SECRET_FILE), the same for the workers and the console"
        )
    short = [i for i, s in enumerate(secrets) if len(s) < MIN_SECRET_CHARS]
    if short:
        raise ConfigurationError(
            f"webhook key #{short[0] + 1} has fewer than {MIN_SECRET_CHARS} characters"
        )


def webhook_base(settings: Settings) -> tuple[str, str]:
    """The console's public address and the signing key, or a :class:`ConfigurationError`
    that says which is missing: checked before the hook is created, so nothing is written
    for a hook whose URL cannot be given."""
    check_secrets(settings.webhook_secrets, "create_hook(..., webhook=True)")
    base = settings.console_url
    if not base or not base.startswith(("http://", "https://")):
        raise ConfigurationError(
            "create_hook(..., webhook=True) needs WAYLINE_CONSOLE_URL, the console's address "
            f"as callers reach it (http:// or https://), not {base!r}"
        )
    return base.rstrip("/"), settings.webhook_secrets[0]


def webhook_url(base: str, secret: str, token: str) -> str:
    return f"{base}/hooks/{quote(token, safe='')}/webhook?sig={signature(secret, token)}"
