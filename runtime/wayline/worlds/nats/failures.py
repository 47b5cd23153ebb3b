"""Why a connection to NATS cannot succeed, said in words an operator acts on.

A failed TLS verification or a server that wants TLS answers the same way on every attempt:
retrying only hides the cause (and nats-py can then wait forever on a close), so these fail
at once with the cause named. Anything else (refused, timed out) may be an outage and is
retried by the caller.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence

from .tls_only import PlaintextOfferedError


def connect_bound(connect_timeout: float, servers: int) -> float:
    """Seconds one connect attempt may take in all: nats-py tries each server twice (see
    ``ConnectOptions.connect_kwargs``), each try a TCP connect plus a TLS handshake bounded by
    ``connect_timeout`` apiece, plus slack for the INFO/CONNECT exchange."""
    return 2 * max(1, servers) * (2 * connect_timeout + 0.5) + 1.0


def hopeless(errors: Sequence[BaseException], *, asked_tls: bool = True) -> str | None:
    """The cause, if one of ``errors`` (or what they were raised from) says retrying cannot
    help; None otherwise. ``asked_tls``: the client was configured for TLS (a ``tls://`` URL
    or TLS options); without it a TLS failure means the server demanded TLS."""
    cause = _cause(errors)
    if cause is not None and not asked_tls and "TLS" in cause:
        return f"the server requires TLS (nats:// was upgraded) and {cause}"
    return cause


def _cause(errors: Sequence[BaseException]) -> str | None:
    for err in _chain(errors):
        if isinstance(err, PlaintextOfferedError):
            return str(err)
        if isinstance(err, ssl.SSLCertVerificationError):
            detail = err.verify_message or str(err)
            if "mismatch" in detail.lower():
                return (
                    f"TLS hostname mismatch: the server's certificate does not name the host "
                    f"connected to ({detail}); connect by a name the certificate holds or set "
                    "tls_hostname"
                )
            return (
                f"TLS certificate verify failed ({detail}): the server's certificate is not "
                "signed by a CA this client trusts; set tls_ca to the CA that signed it"
            )
        text = str(err).lower()
        if "tls required" in text or "secure connection" in text:
            return (
                "the server requires TLS: connect with tls:// (and tls_ca if its certificate "
                "is signed by a private CA)"
            )
        if isinstance(err, ssl.SSLError):
            return f"TLS handshake failed ({err.reason or err})"
        if isinstance(err, OSError) and err.filename:
            return f"cannot read {err.filename} ({err.strerror})"
    return None


def _chain(errors: Sequence[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    todo = list(errors)
    while todo:
        err = todo.pop(0)
        if err in out:
            continue
        out.append(err)
        for nxt in (err.__cause__, err.__context__):
            if nxt is not None:
                todo.append(nxt)
    return out
