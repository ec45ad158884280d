"""The live web dashboard: static files under `/dashboard/` and one pure endpoint that draws
a pod's sequence diagram.

The page (static/) holds no credentials and fetches nothing but the API at its own origin:
a user opens it through `kubectl proxy`, which adds theirs, so RBAC decides what it can
read, as for any other client. `POST /dashboard/timeline` takes the pod and its Events the
page already read with the user's credentials and answers common.timeline_render's SVG of
common.timeline's model (one source of truth with `kubectl timeline -o svg`); it reads no
storage, so it reveals nothing the caller did not send.
"""

from __future__ import annotations

import asyncio
import json
from functools import cache
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from apiserver.decode import media_type, read_body, unsupported_media_type
from common import errors, timeline, timeline_render

STATIC = Path(__file__).parent / "static"
MEDIA_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}
# the page's scripts and styles are its own files; the diagram's SVG carries a <style>
POLICY = ("default-src 'none'; script-src 'self'; connect-src 'self'; img-src 'self' data:; "
          "style-src 'self' 'unsafe-inline'; base-uri 'none'; form-action 'none'; "
          "frame-ancestors 'none'")

router = APIRouter()


@cache
def static_file(name: str) -> bytes:
    return (STATIC / name).read_bytes()


def static_response(name: str) -> Response:
    return Response(static_file(name), media_type=MEDIA_TYPES[name], headers={
        "Content-Security-Policy": POLICY, "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-cache"})


def parse_diagram_request(body: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(pod, events) from `{"pod": {...}, "events": [...]}`; BadRequest for anything else."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.BadRequest(f"the request body is not JSON: {e}") from None
    if not isinstance(data, dict) or set(data) - {"pod", "events"}:
        raise errors.BadRequest('the request body must be {"pod": {...}, "events": [...]}')
    pod, events = data.get("pod"), data.get("events", [])
    if not isinstance(pod, dict) or not isinstance(pod.get("metadata"), dict):
        raise errors.BadRequest("pod: a Pod object with metadata is required")
    if not all(isinstance(pod["metadata"].get(k), str) and pod["metadata"][k]
               for k in ("name", "namespace")):
        raise errors.BadRequest("pod: metadata.name and metadata.namespace are required")
    if pod.get("kind", "Pod") != "Pod":
        raise errors.BadRequest(f"pod: kind must be Pod, not {pod.get('kind')!r}")
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise errors.BadRequest("events: a list of Event objects is required")
    return pod, events


def diagram(pod: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """The SVG of `kubectl timeline -o svg`; BadRequest when the objects are not shaped as
    the API serves them (the model reads what the API writes, and nothing else)."""
    try:
        return timeline_render.svg(timeline.build(pod, events))
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
        raise errors.BadRequest(f"the pod or its events are malformed: {e}") from None


def status(err: errors.ApiError) -> Response:
    # apiserver.app's status_response, which imports this module
    return Response(json.dumps(err.status()), err.code, headers=err.headers or None,
                    media_type="application/json")


def draw_request(body: bytes) -> str:
    return diagram(*parse_diagram_request(body))


@router.get("/dashboard", include_in_schema=False)
async def dashboard_redirect() -> Response:
    return RedirectResponse("/dashboard/", 301)


@router.get("/dashboard/", include_in_schema=False)
async def dashboard_index() -> Response:
    return static_response("index.html")


@router.get("/dashboard/{name}", include_in_schema=False)
async def dashboard_file(name: str) -> Response:
    if name not in MEDIA_TYPES:
        return status(errors.path_not_found())
    return static_response(name)


@router.post("/dashboard/timeline", include_in_schema=False)
async def dashboard_timeline(request: Request) -> Response:
    try:
        if media_type(request) != "application/json":
            raise unsupported_media_type("application/json")
        body = await read_body(request)
        # up to 3 MiB of JSON to read and draw: off the event loop
        drawn = await asyncio.to_thread(draw_request, body)
    except errors.ApiError as e:
        return status(e)
    return Response(drawn, media_type="image/svg+xml",
                    headers={"Content-Security-Policy": "default-src 'none'; style-src "
                             "'unsafe-inline'", "X-Content-Type-Options": "nosniff"})
