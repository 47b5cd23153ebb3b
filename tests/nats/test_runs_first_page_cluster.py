"""The first runs pages before the runs model loads, and the entries the index's stream holds
outside its subjects or with bodies nested past the decoder's stack, on a three-node
JetStream cluster (replicas 3): a direct get there may be answered by any replica, the
leader's or a follower's, for the windows, the tail's start-time lookup and the model's
load, none of which names a subject filter."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.nats import test_runs_first_page_equals_loaded as equals
from tests.nats import test_runs_index_nested_bodies as nested
from tests.nats_fixtures import NatsCluster, OpenWorlds


@pytest.fixture
async def open_cluster_world(nats_cluster: NatsCluster) -> AsyncIterator[OpenWorlds]:
    from wayline.worlds.nats import NatsWorld

    prefix = "t" + uuid.uuid4().hex[:12]

    async def factory(**options: Any) -> NatsWorld:
        options.setdefault("prefix", prefix)
        options.setdefault("replicas", 3)
        options.setdefault("connect_attempts", 5)
        options.setdefault("reconnect_time_wait", 0.2)
        return NatsWorld(nats_cluster.urls, **options)

    worlds = OpenWorlds(factory)
    yield worlds
    await worlds.close()


async def test_the_first_pages_equal_the_loaded_model_s_on_a_cluster(
    open_cluster_world: OpenWorlds, monkeypatch: pytest.MonkeyPatch
) -> None:
    await equals.test_the_first_pages_before_the_load_are_the_loaded_model_s_pages(
        open_cluster_world, monkeypatch
    )


async def test_entries_outside_the_index_s_subjects_on_a_cluster(
    open_cluster_world: OpenWorlds,
) -> None:
    await equals.test_entries_outside_the_index_s_subjects_are_never_runs(open_cluster_world)


async def test_foreign_nested_bodies_on_a_cluster(open_cluster_world: OpenWorlds) -> None:
    await nested.test_a_foreign_message_past_the_loaded_model_is_never_decoded(open_cluster_world)


async def test_nested_bodies_on_the_index_s_subjects_on_a_cluster(
    open_cluster_world: OpenWorlds,
) -> None:
    await nested.test_a_nested_body_on_the_index_s_own_subjects_fails_no_call(open_cluster_world)
