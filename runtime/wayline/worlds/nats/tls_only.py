"""A connection that asked for TLS is never made in plain text.

nats-py switches to TLS only when the server's INFO says ``tls_required``: against a server
without TLS (or one whose INFO was rewritten on the way) a ``tls://`` URL or ``tls_ca`` would
connect in the clear and send the credentials with CONNECT. So where TLS was asked for, an
INFO that does not require it is refused before anything is sent, on the first connection
and on every reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


class PlaintextOfferedError(ConnectionError):
    """The server offered a plain-text connection where TLS was asked for (an ``OSError``:
    nats-py gives up on that server as on any failed connect, and reconnects keep trying)."""


def refuse_plaintext(nc: Any, shown: str) -> None:
    """Wrap ``nc``'s handling of the server's INFO so a connect without TLS fails there."""
    process_info = nc._process_info

    async def checked(info: dict[str, Any], initial_connection: bool = False) -> None:
        server = nc._current_server
        scheme = server.uri.scheme if server is not None else ""
        secured = scheme == "wss" or nc.options.get("tls_handshake_first")
        if initial_connection and not secured and not info.get("tls_required"):
            # nats-py leaves a failed reconnect's socket open: nothing more goes over this one
            transport = nc._transport
            if transport is not None:
                with contextlib.suppress(Exception):
                    transport.close()
                    await asyncio.wait_for(transport.wait_closed(), 1.0)
            raise PlaintextOfferedError(
                f"the server at {shown} offers no TLS, and TLS was asked for (tls:// or "
                "tls_ca/tls_cert): refusing to send credentials in plain text; turn TLS on at "
                "the server, or connect with nats:// and no TLS options"
            )
        await process_info(info, initial_connection=initial_connection)

    nc._process_info = checked
