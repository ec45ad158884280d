"""The dashboard's static files and its diagram endpoint on the secure apiserver: served to
anyone signed in (the system:kubelite-dashboard ClusterRole, bound to system:authenticated),
refused to anonymous callers, every malformed request a Status that writes nothing. The
browser test is tests/test_dashboard_browser.py."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from apiserver.dashboard import STATIC, parse_diagram_request
from common import errors
from tests.support import ApiServer, user_cert

POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                    "creationTimestamp": "2026-12-02T04:35:10Z"},
       "spec": {"containers": [{"name": "app", "image": "busybox"}]},
       "status": {"phase": "Pending", "conditions": [{
           "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
           "message": "0/1 nodes are available: 1 node(s) didn't match Pod's node "
                      "affinity/selector."}]}}

FAILED = {"apiVersion": "v1", "kind": "Event", "type": "Warning", "reason": "FailedScheduling",
          "metadata": {"name": "web.1", "namespace": "default"},
          "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "uid": "u1"},
          "source": {"component": "default-scheduler"}, "count": 1,
          "firstTimestamp": "2026-12-02T04:35:10Z", "lastTimestamp": "2026-12-02T04:35:10Z",
          "message": POD["status"]["conditions"][0]["message"]}  # type: ignore[index]


# --- the pure request parser ------------------------------------------------------------

@pytest.mark.parametrize(("body", "why"), [
    (b"{", "not JSON"),
    (b"\xff", "not JSON"),
    (b"[]", "must be"),
    (b'{"pod": {}, "extra": 1}', "must be"),
    (b'{"events": []}', "a Pod object"),
    (b'{"pod": {"metadata": 1}}', "a Pod object"),
    (b'{"pod": {"metadata": {"name": "a"}}}', "metadata.name and metadata.namespace"),
    (b'{"pod": {"metadata": {"name": 5, "namespace": "d"}}}', "metadata.name"),
    (b'{"pod": {"kind": "Node", "metadata": {"name": "a", "namespace": "d"}}}',
     "kind must be Pod"),
    (b'{"pod": {"metadata": {"name": "a", "namespace": "d"}}, "events": {}}',
     "a list of Event"),
    (b'{"pod": {"metadata": {"name": "a", "namespace": "d"}}, "events": [1]}',
     "a list of Event"),
])
def test_malformed_diagram_requests_are_refused(body: bytes, why: str) -> None:
    with pytest.raises(errors.BadRequest, match=why):
        parse_diagram_request(body)


def test_a_pod_without_events_parses() -> None:
    assert parse_diagram_request(json.dumps({"pod": POD}).encode()) == (POD, [])


# --- over HTTP ----------------------------------------------------------------------------

def viewer(apiserver: ApiServer) -> httpx.Client:
    """A signed-in user with no role of its own: only what system:authenticated gets."""
    return apiserver.sync_client(cert=user_cert("dash-viewer"))


@pytest.mark.parametrize(("path", "media"), [
    ("/dashboard/", "text/html"), ("/dashboard/dashboard.js", "text/javascript"),
    ("/dashboard/dashboard.css", "text/css")])
def test_any_signed_in_user_gets_the_page(apiserver: ApiServer, path: str, media: str) -> None:
    with viewer(apiserver) as client:
        response = client.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(media)
    name = path.removeprefix("/dashboard/") or "index.html"
    assert response.content == (STATIC / name).read_bytes()
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert response.headers["x-content-type-options"] == "nosniff"


def test_the_page_fetches_nothing_from_elsewhere() -> None:
    """No CDN, no absolute URL: every reference is relative or to the API's own paths."""
    for name in ("index.html", "dashboard.js", "dashboard.css"):
        text = Path(STATIC / name).read_text()
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, name


def test_the_bare_path_redirects(apiserver: ApiServer) -> None:
    with viewer(apiserver) as client:
        response = client.get("/dashboard")
    assert response.status_code == 301
    assert response.headers["location"] == "/dashboard/"


def test_anonymous_callers_are_refused(apiserver: ApiServer) -> None:
    with apiserver.sync_client(cert=None) as client:
        page = client.get("/dashboard/")
        drawn = client.post("/dashboard/timeline", json={"pod": POD})
    for response in (page, drawn):
        assert response.status_code == 403, response.text
        assert response.json()["kind"] == "Status"
        assert response.json()["reason"] == "Forbidden"


@pytest.mark.parametrize("path", ["/dashboard/nope.js", "/dashboard/..%2fapp.py",
                                  "/dashboard/__init__.py"])
def test_only_the_dashboards_own_files_are_served(apiserver: ApiServer, path: str) -> None:
    with viewer(apiserver) as client:
        response = client.get(path)
    assert response.status_code == 404, response.text
    assert response.json()["kind"] == "Status"


def test_the_diagram_is_kubectl_timelines_svg(apiserver: ApiServer) -> None:
    with viewer(apiserver) as client:
        response = client.post("/dashboard/timeline", json={"pod": POD, "events": [FAILED]})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/svg+xml"
    svg = response.text
    assert svg.startswith("<svg ") and "<script" not in svg
    assert "<title>pod default/web: stopped: Unschedulable" in svg
    assert "didn&apos;t match" in svg or "didn't match" in svg


def test_events_the_model_cannot_read_are_left_out(apiserver: ApiServer) -> None:
    """An Event with a timestamp that is not one says nothing the diagram can place: drawn
    without it, as `kubectl timeline` would."""
    odd = {**FAILED, "lastTimestamp": 5, "firstTimestamp": [], "eventTime": {}}
    with viewer(apiserver) as client:
        response = client.post("/dashboard/timeline", json={"pod": POD, "events": [odd]})
    assert response.status_code == 200, response.text
    assert "<title>pod default/web: stopped: " in response.text


@pytest.mark.parametrize(("body", "content_type", "code"), [
    (b"{", "application/json", 400),
    (b'{"pod": {"metadata": {"name": 5}}}', "application/json", 400),
    (b'{"pod": {"metadata": {"name": "a", "namespace": "d"}, "status": "x"}}',
     "application/json", 400),
    (json.dumps({"pod": POD}).encode(), "text/plain", 415),
    (b" " * (3 * 1024 * 1024 + 1), "application/json", 413),
])
def test_bad_diagram_requests_get_a_status(apiserver: ApiServer, body: bytes,
                                           content_type: str, code: int) -> None:
    with viewer(apiserver) as client:
        response = client.post("/dashboard/timeline", content=body,
                               headers={"Content-Type": content_type})
    assert response.status_code == code, response.text
    status = response.json()
    assert status["kind"] == "Status" and status["code"] == code


def test_the_dashboard_role_grants_nothing_else(apiserver: ApiServer) -> None:
    """The page reads with the user's own RBAC: a signed-in user with no role cannot list
    pods, so neither can the page it opens."""
    with viewer(apiserver) as client:
        assert client.get("/api/v1/pods").status_code == 403
        assert client.put("/dashboard/timeline", json={}).status_code == 403
