"""DockerRuntime.observe_pod inspects only what may have changed: a container listed in
the settled state (running, exited) its last inspect saw is not inspected again.

A unit test of that rule over a stand-in for the Engine API (httpx.MockTransport): the
real-Docker behaviour of observe_pod is covered by tests/test_kubelet.py."""

from __future__ import annotations

import json
from typing import Any

import httpx

from kubelet.docker import DockerClient, DockerRuntime
from kubelet.runtime import (
    LABEL_CONTAINER_NAME,
    LABEL_CONTAINER_TYPE,
    LABEL_NODE,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    TYPE_SANDBOX,
    PodObservation,
)

NODE = "n1"
UID = "u1"


class Engine:
    """Containers by id with their Docker state; counts the inspects."""

    def __init__(self) -> None:
        self.states: dict[str, str] = {"sbx": "running", "app": "created"}
        self.inspected: list[str] = []

    def labels(self, cid: str) -> dict[str, str]:
        return {LABEL_NODE: NODE, LABEL_POD_UID: UID, LABEL_POD_NAME: "p",
                LABEL_POD_NAMESPACE: "default",
                LABEL_CONTAINER_NAME: "POD" if cid == "sbx" else "app",
                LABEL_CONTAINER_TYPE: TYPE_SANDBOX if cid == "sbx" else "container"}

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/containers/json":
            body: Any = [{"Id": cid, "State": state, "Labels": self.labels(cid)}
                         for cid, state in self.states.items()]
            return httpx.Response(200, json=body)
        cid = path.split("/")[2]
        if path.endswith("/json") and cid in self.states:
            self.inspected.append(cid)
            state = self.states[cid]
            return httpx.Response(200, content=json.dumps({
                "Id": cid, "Created": "2026-01-01T00:00:00Z", "Image": "sha256:1",
                "Config": {"Labels": self.labels(cid), "Image": "busybox"},
                "HostConfig": {"NetworkMode": "bridge"},
                "NetworkSettings": {"IPAddress": "10.0.0.2"},
                "State": {"Status": state, "ExitCode": 0,
                          "StartedAt": "2026-01-01T00:00:01Z",
                          "FinishedAt": "2026-01-01T00:00:02Z" if state == "exited"
                          else "0001-01-01T00:00:00Z"}}),
                headers={"content-type": "application/json"})
        if request.method == "DELETE" and cid in self.states:
            del self.states[cid]
            return httpx.Response(204)
        return httpx.Response(404, json={"message": f"no such container: {cid}"})


def app_state(observation: PodObservation) -> str | None:
    app = observation.latest("app")
    return app.state if app is not None else None


def runtime_on(engine: Engine) -> DockerRuntime:
    client = DockerClient(transport=httpx.MockTransport(engine.handle))
    return DockerRuntime(client, node_name=NODE, sandbox_image="pause")


async def test_settled_containers_are_not_inspected_again() -> None:
    engine = Engine()
    runtime = runtime_on(engine)
    first = await runtime.observe_pod(UID)
    assert sorted(engine.inspected) == ["app", "sbx"]
    sandbox = first.latest_sandbox()
    assert sandbox is not None and sandbox.ready
    engine.inspected.clear()
    # "created" is inspected every time (it may have failed to start); running is not
    engine.states["app"] = "running"
    second = await runtime.observe_pod(UID)
    assert engine.inspected == ["app"]
    assert app_state(second) == "running"
    engine.inspected.clear()
    assert (await runtime.observe_pod(UID)).latest("app") == second.latest("app")
    assert engine.inspected == []
    # a new listed state is inspected again
    engine.states["app"] = "exited"
    third = await runtime.observe_pod(UID)
    assert engine.inspected == ["app"]
    assert app_state(third) == "exited"
    # removed (by the kubelet, or behind its back: the next relist prunes it)
    await runtime.remove_container("app")
    del engine.states["sbx"]
    await runtime.list_summaries()
    engine.states.update(sbx="running", app="running")
    engine.inspected.clear()
    await runtime.observe_pod(UID)
    assert sorted(engine.inspected) == ["app", "sbx"]
    await runtime.client.aclose()
