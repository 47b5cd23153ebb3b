"""The OpenAPI document checked into docs/ is the one the server serves, and it names every
route of the API with its methods (regenerate: docs/console.md says how)."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.routing import Route

from tests.console.conftest import Console
from wayline import Client
from wayline.cli.console import create_app

DOC = Path(__file__).parents[2] / "docs" / "openapi.json"


async def test_the_checked_in_document_is_the_served_one(console: Console) -> None:
    served = (await console.http.get("/api/openapi.json")).json()
    assert json.loads(DOC.read_text()) == served


def test_every_api_route_is_in_the_document() -> None:
    # the routes only: the client, which has no world, is never called
    app = create_app(Client.__new__(Client))
    documented = json.loads(DOC.read_text())["paths"]
    routes: dict[str, set[str]] = {}
    for route in app.routes:
        # the API, and the webhook URLs, which callers outside post to
        if isinstance(route, Route) and route.path.startswith(("/api/", "/hooks/")):
            methods = {m.lower() for m in route.methods or ()} - {"head"}
            path = route.path.replace(":path}", "}")  # a convertor is not the path's name
            routes.setdefault(path, set()).update(methods)
    routes.pop("/api/openapi.json")
    assert {path: set(ops) for path, ops in documented.items()} == routes
