"""Owns the local API's documentation page, `/docs`: Swagger UI over the app's `/openapi.json`, with
its JavaScript, CSS and icon served by the local gateway itself, so the page works offline.

FastAPI's own `/docs` loads Swagger UI from a CDN (blank without a network). The assets come from
the `fastapi-offline` package (a dev dependency: it ships Swagger UI 5's dist files, which render
FastAPI's OpenAPI 3.1); the page is FastAPI's own `get_swagger_ui_html`, pointed at them. The page
is a local tool's: the deployed API routes neither `/docs` nor `/openapi.json`.
"""

from importlib.resources import files
from importlib.resources.abc import Traversable

from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets/"
# The only files served, and their types: nothing else under the package's folder is reachable.
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}


def docs_page(openapi_url: str = "/openapi.json") -> bytes:
    return bytes(_page(openapi_url).body)


def _page(openapi_url: str) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=openapi_url,
        title="Onboarding coach API (local)",
        swagger_js_url=f"{ASSETS_PATH}swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PATH}swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_PATH}favicon.png",
        # Swagger UI would send the document to an online validator for its badge otherwise.
        swagger_ui_parameters={"validatorUrl": None},
    )


def asset(path: str) -> tuple[bytes, str] | None:
    """The content and type of the asset at `path` (under ASSETS_PATH), or None."""
    name = path.removeprefix(ASSETS_PATH)
    if not path.startswith(ASSETS_PATH) or name not in ASSETS:
        return None
    source: Traversable = files("fastapi_offline") / "static" / name
    return source.read_bytes(), ASSETS[name]
