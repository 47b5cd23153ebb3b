"""An operator process on this test's world, on the session's API server: a SQLite file, or a
prefix on the session's real nats-server (as in a cluster), in a namespace of its own."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import wayline
from tests.operator.test_workflowrun import Cluster, Operator, _kubeconfig_env
from wayline.worlds.local import LocalWorld


@contextlib.asynccontextmanager
async def operated(
    request: pytest.FixtureRequest,
    control_plane: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    prefix: str,
    env: Mapping[str, str],
) -> AsyncIterator[Cluster]:
    """``request.param``: the world, ``local`` or ``nats``; ``env``: the operator's own."""
    namespace = f"{prefix}-{uuid.uuid4().hex[:10]}"
    world: wayline.World
    if request.param == "local":
        url = f"sqlite:///{tmp_path / 'wayline.db'}"
        world = LocalWorld(tmp_path / "wayline.db", poll_interval=0.01)
    else:
        server = request.getfixturevalue("nats_server")
        url = f"{server.url}?prefix={namespace.replace('-', '')}"
        world = wayline.open_world(url)
    monkeypatch.setenv("WAYLINE_WORLD", url)
    done = control_plane.kubectl("create", "namespace", namespace)
    assert done.returncode == 0, done.stderr
    await world.start()
    operator = Operator(
        namespace,
        {**_kubeconfig_env(url, control_plane.kubeconfig), **env},
        tmp_path / "operator.log",
    )
    operator.start()
    try:
        yield Cluster(control_plane, namespace, world, wayline.Client(world), operator)
    finally:
        operator.stop()
        await world.close()
