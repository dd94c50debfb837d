"""The local /docs page works offline: Swagger UI's JavaScript, CSS and icon are
served by the local gateway itself, and the page names no other host."""

import re
from collections.abc import AsyncIterator

import httpx
import pytest

from infra.local.gateway import GatewayApp, api_routes


@pytest.fixture
async def gateway() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=GatewayApp(api_routes()))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield client


async def test_the_docs_page_and_everything_it_loads_come_from_the_local_server(gateway: httpx.AsyncClient) -> None:
    page = await gateway.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "SwaggerUIBundle" in html
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}", html, re.IGNORECASE)  # no other host at all
    assert "'/openapi.json'" in html
    loaded = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sorted(loaded) == [
        "/docs/assets/favicon.png",
        "/docs/assets/swagger-ui-bundle.js",
        "/docs/assets/swagger-ui.css",
    ]
    for url in loaded:
        asset = await gateway.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 1000, url
    bundle = await gateway.get("/docs/assets/swagger-ui-bundle.js")
    assert bundle.headers["content-type"].startswith("text/javascript")
    assert b"SwaggerUIBundle" in bundle.content
    assert (await gateway.get("/docs/assets/swagger-ui.css")).headers["content-type"].startswith("text/css")


@pytest.mark.parametrize("path", ["/docs/assets/../core.py", "/docs/assets/core.py", "/docs/assets/"])
async def test_nothing_else_is_served_from_the_assets_folder(gateway: httpx.AsyncClient, path: str) -> None:
    response = await gateway.get(path, headers={"Authorization": "Bearer me"})
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
