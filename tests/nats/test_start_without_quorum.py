"""A world started against a cluster that cannot answer for its streams (two of three nodes
down: no stream has a leader) ends as the runtime's ``WorldUnavailableError``, which callers
handle (a worker retries, the CLI prints one line), not as the client library's own error."""

from __future__ import annotations

import time

import pytest

import wayline
from tests.nats_fixtures import NatsCluster
from wayline.worlds.nats import NatsWorld

pytestmark = pytest.mark.slow


async def test_a_start_without_stream_leaders_is_world_unavailable(
    nats_cluster: NatsCluster,
) -> None:
    prefix = f"nq{time.monotonic_ns() % 10**9}"
    first = NatsWorld(nats_cluster.urls, prefix=prefix, replicas=3)
    await first.start()  # provisions the streams and buckets on all three nodes
    await first.close()
    survivor, *others = nats_cluster.servers
    for server in others:
        server.kill()
    later = NatsWorld([survivor.url], prefix=prefix, replicas=3, request_timeout=1.0)
    with pytest.raises(wayline.WorldUnavailableError) as caught:
        await later.start()
    assert "NATS at" in str(caught.value)
    await later.close()
