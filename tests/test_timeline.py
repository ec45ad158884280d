"""The timeline model and its renderers, as pure functions (common/timeline.py,
common/timeline_render.py), and what the components record for it.

The stories' pods and Events in tests/data/timeline/ were captured from a real cluster
(`kubectl get pod -o json`, `kubectl get events -o json`, in tests/test_timeline_e2e.py's
run): a scheduled pod, a nodeName pod, an unschedulable one, an image that cannot be
pulled (`127.0.0.1:5999/missing:1`, a closed loopback port) and a crash loop."""

from __future__ import annotations

import asyncio
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from common import timeline, timeline_render
from common.events import make_event
from common.timeline import (
    APISERVER,
    CLIENT,
    DOCKER,
    ETCD,
    KUBELET,
    SCHEDULER,
    Hop,
    Timeline,
    build,
)
from common.timeline_cli import context_namespace, kubeconfig_path, parse_target
from common.timestamps import micro_time
from kubelet.events import EventSink

DATA = Path(__file__).parent / "data" / "timeline"


def story(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    data = json.loads((DATA / f"{name}.json").read_text())
    return data["pod"], data["events"]


def arrows(t: Timeline) -> list[tuple[str, str, str]]:
    return [(h.source, h.target, h.label) for h in t.hops]


# --- the stories --------------------------------------------------------------------------

def test_scheduled_pod() -> None:
    pod, events = story("web")
    t = build(pod, events)
    node = pod["spec"]["nodeName"]
    assert (t.outcome, t.ok, t.why, t.skipped, t.node) == ("Ready", True, (), {}, node)
    assert [(s, d) for s, d, _ in arrows(t)] == [
        (CLIENT, APISERVER), (APISERVER, ETCD), (ETCD, SCHEDULER), (SCHEDULER, SCHEDULER),
        (SCHEDULER, APISERVER), (APISERVER, ETCD), (ETCD, KUBELET), (KUBELET, DOCKER),
        (KUBELET, DOCKER), (KUBELET, DOCKER), (KUBELET, DOCKER), (KUBELET, APISERVER),
        (APISERVER, ETCD)]
    labels = [label for _, _, label in arrows(t)]
    scheduled = next(e for e in events if e["reason"] == "Scheduled")
    assert labels[1] == f"commit pod, rev {scheduled['involvedObject']['resourceVersion']}"
    assert labels[3:5] == [f"filter, score: {node}", f"bind to {node}"]
    assert re.fullmatch(r"commit binding, rev \d+", labels[5])
    assert labels[6:11] == [f"watch: pod on {node}", "run pod sandbox", "image present (app)",
                            "create container app", "start container app"]
    # measured to the microsecond but for the Ready write (a condition's whole second)
    assert [h.precise for h in t.hops] == [True] * 11 + [False] * 2
    starts = [h.at for h in t.hops]
    assert starts[0] == 0.0 and all(s >= 0 for s in starts)
    assert starts[7:11] == sorted(starts[7:11])  # sandbox, image, create, start
    assert starts[2] <= starts[3] <= starts[4] < starts[7]  # scheduled before it ran
    assert all(h.duration is None or h.duration >= 0 for h in t.hops)
    bind = t.hops[4]
    assert bind.duration is not None and 0 < bind.duration < 5
    assert t.hops[3].detail and t.hops[3].detail[0].startswith("Scores of 2 feasible nodes")


def test_node_name_pod_skips_the_scheduler() -> None:
    pod, events = story("pinned")
    t = build(pod, events)
    assert t.skipped == {SCHEDULER: "spec.nodeName was set at create"}
    assert SCHEDULER not in {lane for s, d, _ in arrows(t) for lane in (s, d)}
    assert arrows(t)[2] == (ETCD, KUBELET, f"watch: pod on {pod['spec']['nodeName']}")
    assert t.outcome == "Ready"


def test_unschedulable_pod() -> None:
    pod, events = story("nowhere")
    t = build(pod, events)
    assert (t.outcome, t.ok, t.node) == ("Unschedulable", False, None)
    failed = [h for h in t.hops if h.failed]
    assert len(failed) == 1 and (failed[0].source, failed[0].target) == (SCHEDULER, SCHEDULER)
    assert failed[0].label.startswith("filter: 0/2 nodes are available: 2 node(s) didn't "
                                      "match Pod's node affinity/selector")
    reasons = json.loads(pod["metadata"]["annotations"][timeline.UNSCHEDULABLE_NODES])
    assert failed[0].detail == tuple(f"{n}: {r}" for n, r in sorted(reasons.items()))
    assert t.why[0].startswith("0/2 nodes are available")
    assert KUBELET not in {h.target for h in t.hops}


def test_image_pull_failure() -> None:
    pod, events = story("nopull")
    t = build(pod, events)
    assert t.outcome in ("ErrImagePull", "ImagePullBackOff")
    pull = next(h for h in t.hops if h.label == "pull image (app)")
    assert (pull.source, pull.target, pull.failed) == (KUBELET, DOCKER, True)
    assert "127.0.0.1:5999/missing:1" in pull.detail[0]
    assert t.why[0] == f"container app: {t.outcome}"
    assert not any(h.label.startswith("start container") for h in t.hops)


def test_crash_loop() -> None:
    pod, events = story("crash")
    t = build(pod, events)
    assert t.outcome == "CrashLoopBackOff"
    restarts = pod["status"]["containerStatuses"][0]["restartCount"]
    assert t.why[:2] == (f"container app: CrashLoopBackOff, {restarts} restart(s)",
                         "last exit: Error (exit code 3)")
    assert any(h.failed and h.label.startswith("Back-off restarting failed container")
               for h in t.hops)
    started = next(e for e in events if e["reason"] == "Started")
    times = f" (x{started['count']})" if started["count"] > 1 else ""
    assert any(h.label == f"start container app{times}" for h in t.hops)


def test_second_precision_events_are_flagged_and_other_pods_events_ignored() -> None:
    pod = {"metadata": {"name": "old", "namespace": "default", "uid": "u1",
                        "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}, "status": {}}
    legacy = {"reason": "Started", "firstTimestamp": "2026-01-01T00:00:02Z",
              "source": {"component": "kubelet"},
              "involvedObject": {"uid": "u1", "fieldPath": "spec.containers{c}"}}
    other = {**legacy, "involvedObject": {"uid": "u2", "fieldPath": "spec.containers{c}"}}
    t = build(pod, [legacy, other])
    start = [h for h in t.hops if h.label == "start container c"]
    assert len(start) == 1 and (start[0].at, start[0].precise) == (2.0, False)
    assert not t.hops[0].precise  # no created annotation: creationTimestamp's second


def test_revisions_are_the_ones_each_component_saw() -> None:
    pod = {"metadata": {"name": "p", "uid": "u", "annotations": {
               timeline.CREATED: "2026-01-01T00:00:00.000000Z"}},
           "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}, "status": {}}

    def event(reason: str, component: str, rv: str, at: str,
              annotations: dict[str, str] | None = None) -> dict[str, Any]:
        return {"reason": reason, "source": {"component": component},
                "eventTime": f"2026-01-01T00:00:00.{at}Z",
                "metadata": {"annotations": annotations or {}},
                "involvedObject": {"uid": "u", "resourceVersion": rv,
                                   "fieldPath": "spec.containers{c}"}}
    scheduled = event("Scheduled", "default-scheduler", "10", "100000")
    # the kubelet's first Event came after its own status write (rv 14): its
    # annotation says what it saw first, the binding (12)
    pulled = event("Pulled", KUBELET, "14", "300000", {
        timeline.KUBELET_SEEN: "2026-01-01T00:00:00.150000Z",
        timeline.KUBELET_SEEN_REVISION: "12"})
    labels = [h.label for h in build(pod, [scheduled, pulled]).hops]
    assert labels[1] == "commit pod, rev 10" and "commit binding, rev 12" in labels
    pinned = [h.label for h in build(pod, [pulled]).hops]
    assert pinned[1] == "commit pod, rev 12"
    without = event("Pulled", KUBELET, "14", "300000")
    assert "commit binding, rev 14" in [h.label for h in build(pod, [scheduled, without]).hops]


def test_pending_pod_nobody_saw_yet() -> None:
    pod = {"metadata": {"name": "p", "annotations": {
        timeline.CREATED: "2026-01-01T00:00:00.250000Z"}}, "spec": {}, "status": {}}
    t = build(pod, [])
    assert (t.outcome, t.why) == ("Pending", ("not scheduled yet",))
    assert arrows(t) == [(CLIENT, APISERVER, "create pod"), (APISERVER, ETCD, "commit pod")]
    assert t.created == "2026-01-01T00:00:00.250000Z"


# --- renderers ----------------------------------------------------------------------------

SMALL = Timeline(namespace="ns", name="p", created="2026-01-01T00:00:00.000000Z",
                 node="n1", outcome="ErrImagePull", why=("container c: ErrImagePull",),
                 skipped={SCHEDULER: "spec.nodeName was set at create"},
                 hops=(Hop(CLIENT, APISERVER, "create pod", 0.0),
                       Hop(ETCD, KUBELET, "watch: pod on n1", 0.0, 0.004),
                       Hop(KUBELET, DOCKER, "pull image (c)", 0.3, 0.012,
                           detail=("no <registry> & co",), failed=True),
                       Hop(KUBELET, APISERVER, "status; #1", 1.5, precise=False)))


def test_text_draws_lanes_and_arrows() -> None:
    out = timeline_render.text(SMALL)
    lines = out.splitlines()
    assert lines[0] == ("pod ns/p on n1: stopped: ErrImagePull "
                        "(created 2026-01-01T00:00:00.000000Z)")
    header = lines[2]
    assert header.split() == ["since", "took", *timeline.LANES]
    centre = {lane: header.index(lane) + len(lane) // 2 for lane in timeline.LANES}
    create, watch, pull, detail, status = lines[3:8]
    assert create[centre[CLIENT]] == "├" and create[centre[APISERVER] - 1] == "▶"
    assert set(create[centre[CLIENT] + 1:centre[APISERVER] - 1]) == {"─"}
    assert watch.split()[:2] == ["+0.0ms", "4.0ms"] and watch.endswith("watch: pod on n1")
    assert watch[centre[SCHEDULER]] == "─"  # crossed, not drawn
    assert pull[centre[DOCKER] - 1] == "✗" and pull.endswith("✗ pull image (c)")
    assert detail.endswith("no <registry> & co") and detail[centre[SCHEDULER]] == "┆"
    assert status[centre[APISERVER] + 1] == "◀" and status[centre[KUBELET]] == "┤"
    assert status.split()[0] == "~+1.50s"
    assert create[centre[SCHEDULER]] == "┆" and create[centre[KUBELET]] == "│"
    assert lines[8:] == ["scheduler skipped: spec.nodeName was set at create",
                         "~ read from a whole-second timestamp (no Event marks that hop)",
                         "stopped at ErrImagePull:", "  container c: ErrImagePull"]


def test_self_arrow() -> None:
    t = Timeline(namespace="d", name="p", created="x", node=None, outcome="Unschedulable",
                 hops=(Hop(SCHEDULER, SCHEDULER, "filter", 0.001, 0.0002, failed=True),
                       Hop(SCHEDULER, SCHEDULER, "score", 0.002)))
    out = timeline_render.text(t).splitlines()
    centre = out[2].index(SCHEDULER) + len(SCHEDULER) // 2
    assert (out[3][centre], out[4][centre]) == ("✗", "↻")


def test_mermaid() -> None:
    assert timeline_render.mermaid(SMALL) == "\n".join([
        "sequenceDiagram",
        "    title pod ns/p on n1: stopped: ErrImagePull (created 2026-01-01T00:00:00.000000Z)",
        "    participant client", "    participant apiserver", "    participant etcd",
        "    participant scheduler", "    participant kubelet", "    participant docker",
        "    Note over scheduler: skipped: spec.nodeName was set at create",
        "    client->>apiserver: create pod (+0.0ms)",
        "    etcd->>kubelet: watch: pod on n1 (+0.0ms, took 4.0ms)",
        "    kubelet-xdocker: pull image (c) (+300ms, took 12ms)",
        "    Note over docker: no <registry> & co",
        "    kubelet->>apiserver: status#59; #35;1 (~+1.50s)",
        "    Note over apiserver: stopped: ErrImagePull. container c: ErrImagePull", ""])


def test_svg_is_standalone_xml_with_one_arrow_per_hop() -> None:
    out = timeline_render.svg(SMALL)
    root = ET.fromstring(out)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert "no <registry> & co" in texts and "✗ pull image (c)" in texts
    assert "scheduler skipped: spec.nodeName was set at create" in texts
    hops = [e for e in root.iter(f"{ns}line") if e.get("marker-end")]
    assert len(hops) == len(SMALL.hops)
    assert [h.get("marker-end") for h in hops] == ["url(#a)", "url(#a)", "url(#x)", "url(#a)"]
    # the pull goes right (kubelet → docker), the status write left (kubelet → apiserver)
    assert float(hops[2].get("x2") or 0) > float(hops[2].get("x1") or 0)
    assert float(hops[3].get("x2") or 0) < float(hops[3].get("x1") or 0)
    dashed = [r for r in root.iter(f"{ns}rect") if r.get("stroke-dasharray")]
    assert len(dashed) == 1  # the skipped scheduler's head
    assert "http" not in out.replace("http://www.w3.org/2000/svg", "")  # nothing fetched


def test_json_is_the_model() -> None:
    data = json.loads(timeline_render.as_json(SMALL))
    assert data["lanes"] == list(timeline.LANES)
    assert data["skipped"] == {SCHEDULER: "spec.nodeName was set at create"}
    assert data["hops"][2] == {"source": KUBELET, "target": DOCKER, "label": "pull image (c)",
                               "at": 0.3, "duration": 0.012, "detail": ["no <registry> & co"],
                               "failed": True, "precise": True}
    assert (data["outcome"], data["why"], data["total"]) == (
        "ErrImagePull", ["container c: ErrImagePull"], 1.5)


@pytest.mark.parametrize("name", ["web", "pinned", "nowhere", "nopull", "crash"])
def test_every_renderer_draws_every_story(name: str) -> None:
    t = build(*story(name))
    text = timeline_render.text(t)
    assert all(h.label in text for h in t.hops)
    mermaid = timeline_render.mermaid(t)
    assert mermaid.count("->>") + mermaid.count("-x") == len(t.hops)
    ET.fromstring(timeline_render.svg(t))


# --- what the components record -----------------------------------------------------------

def test_events_carry_micro_time_action_and_annotations() -> None:
    event = make_event(name="p.1", namespace="d", involved={"kind": "Pod", "name": "p"},
                       type_="Normal", reason="Scheduled", message="m",
                       source={"component": "default-scheduler"}, count=1,
                       first_timestamp="2026-01-01T00:00:00Z",
                       last_timestamp="2026-01-01T00:00:00Z",
                       event_time="2026-01-01T00:00:00.123456Z", action="Binding",
                       annotations={timeline.DECIDED: "2026-01-01T00:00:00.100000Z"})
    assert (event["eventTime"], event["action"], event["reportingComponent"]) == (
        "2026-01-01T00:00:00.123456Z", "Binding", "default-scheduler")
    assert event["reportingInstance"].startswith("default-scheduler-")
    assert event["metadata"]["annotations"] == {
        timeline.DECIDED: "2026-01-01T00:00:00.100000Z"}
    kubelet = make_event(name="p.2", namespace="d", involved={}, type_="Normal",
                         reason="Started", message="m",
                         source={"component": "kubelet", "host": "n1"}, count=1,
                         first_timestamp="x", last_timestamp="x", event_time="y")
    assert (kubelet["action"], kubelet["reportingInstance"]) == ("Started", "n1")
    assert "annotations" not in kubelet["metadata"]


def test_micro_time_and_scheduling_instants() -> None:
    assert micro_time(1767225600.25) == "2026-01-01T00:00:00.250000Z"
    assert timeline.scheduling_instants(0.5, 1767225600.75, now=1767225601.0) == {
        timeline.QUEUED: "2026-01-01T00:00:00.500000Z",
        timeline.CYCLE_STARTED: "2026-01-01T00:00:00.750000Z",
        timeline.DECIDED: "2026-01-01T00:00:01.000000Z"}


async def test_kubelet_events_carry_their_instant_and_the_pods_notes() -> None:
    written: list[dict[str, Any]] = []

    class Recorder:
        async def event(self, obj: dict, type_: str, reason: str, message: str, *,
                        field_path: str | None = None, at: float | None = None,
                        annotations: dict[str, str] | None = None) -> None:
            written.append({"reason": reason, "at": at, "annotations": annotations})

    sink = EventSink(Recorder())
    pod = {"metadata": {"name": "p", "namespace": "d", "uid": "u1"},
           "spec": {"containers": [{"name": "c"}]}}
    sink.emit(pod, "Normal", "Pulled", "present", container="c")
    sink.note("u1", timeline.KUBELET_SEEN)
    sink.note("u1", timeline.KUBELET_SEEN_REVISION, "42")
    sink.emit(pod, "Normal", "Created", "made", container="c")
    await asyncio.sleep(0)
    await sink.flush()
    assert [w["reason"] for w in written] == ["Pulled", "Created"]
    assert written[0]["annotations"] is None
    assert set(written[1]["annotations"]) == {timeline.KUBELET_SEEN,
                                              timeline.KUBELET_SEEN_REVISION}
    assert written[1]["annotations"][timeline.KUBELET_SEEN_REVISION] == "42"
    assert all(isinstance(w["at"], float) for w in written)
    assert written[0]["at"] <= written[1]["at"]


def test_created_annotation_is_stamped_by_the_creates_admission() -> None:
    from apiserver.resources.pods import PODS
    pod: dict[str, Any] = {"metadata": {"annotations": {"a": "b"}}, "spec": {"containers": []}}
    PODS.admit(pod)
    stamp = pod["metadata"]["annotations"][timeline.CREATED]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stamp)
    assert pod["metadata"]["annotations"]["a"] == "b"
    assert pod["spec"]["tolerations"]  # DefaultTolerationSeconds still


def test_recording_off_stamps_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """KUBELITE_TIMELINE=off (bench_pod_startup.py's recording-off run): no annotation
    from the apiserver, the scheduler or the kubelet, no Event eventTime; the rest alike."""
    from apiserver.resources.pods import PODS
    monkeypatch.setattr(timeline, "RECORDING", False)
    pod: dict[str, Any] = {"metadata": {"annotations": {"a": "b"}}, "spec": {"containers": []}}
    PODS.admit(pod)
    assert pod["metadata"]["annotations"] == {"a": "b"}
    assert pod["spec"]["tolerations"]
    assert timeline.scheduling_instants(0.5, 1767225600.75, now=1767225601.0) == {}
    sink = EventSink(None)
    sink.note("u1", timeline.KUBELET_SEEN)
    assert not sink.instants
    event = make_event(name="p.1", namespace="d", involved={}, type_="Normal",
                       reason="Started", message="m", source={"component": "kubelet"},
                       count=1, first_timestamp="x", last_timestamp="x", event_time="y")
    assert event["eventTime"] is None and event["reason"] == "Started"


# --- the plugin's pure parts --------------------------------------------------------------

def test_targets() -> None:
    assert [parse_target(t) for t in ("pod/a", "pods/b", "po/c", "d", "Pod/e")] == [
        "a", "b", "c", "d", "e"]
    with pytest.raises(ValueError, match='only pods have a timeline, not "deploy"'):
        parse_target("deploy/web")
    with pytest.raises(ValueError, match="names no pod"):
        parse_target("pod/")


def test_kubeconfig_lookup(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.write_text("current-context: c\ncontexts:\n- name: c\n  context: {namespace: team}\n")
    env = {"KUBECONFIG": f"{tmp_path / 'missing'}:{real}"}
    assert kubeconfig_path(None, env) == real
    assert kubeconfig_path("/x", env) == Path("/x")
    assert kubeconfig_path(None, {}) == Path.home() / ".kube" / "config"
    assert context_namespace(real, None) == "team"
    assert context_namespace(real, "other") == "default"
    assert context_namespace(tmp_path / "missing", None) == "default"
