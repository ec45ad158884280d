"""The dashboard in a real browser: Debian's chromium driven by Playwright, the page opened
through the real `kubectl proxy` (which adds the admin's client certificate) in front of a
whole kubelite cluster on Docker, pods created with the real kubectl, and what the page
shows asserted as it changes, without a reload: the node, a scheduled pod whose diagram
fills in live up to Ready, a nodeName pod (no scheduler lane), a pod that cannot be
scheduled (its diagram stops at the scheduler with the reason), a deletion. One cluster,
one browser. It takes the README's screenshot: into the test's temporary directory, and into
docs/dashboard.png with `KUBELITE_UPDATE_SCREENSHOT=1` (so that `make test` leaves the
checkout as it found it)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect, sync_playwright

from tests import readme
from tests.docker_support import BUSYBOX_IMAGE, docker_cluster
from tests.support import REPO, ApiServer, Kubectl, unique

pytestmark = pytest.mark.docker

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
README_SCREENSHOT = REPO / "docs" / "dashboard.png"
WAIT = 90_000  # ms, generous: a pod on Docker is Ready in about a second


@dataclass
class Dashboard:
    kubectl: Kubectl
    apiserver: ApiServer
    node: str
    origin: str
    page: Page
    workdir: Path
    requests: list[str]
    errors: list[str]

    def create(self, name: str, spec: dict[str, Any]) -> str:
        return self.kubectl.apply_pod(name, spec)

    def row(self, name: str) -> Locator:
        return self.page.locator(f'#pods tr[data-pod="default/{name}"]')

    def diagram(self) -> Locator:
        return self.page.locator("#diagram svg")

    def diagram_texts(self) -> list[str]:
        return self.page.locator("#diagram svg text").all_text_contents()


def sleeping(**spec: Any) -> dict[str, Any]:
    return {**spec, "containers": [{"name": "app", "image": BUSYBOX_IMAGE,
                                    "command": ["sleep", "3600"]}]}


@contextlib.contextmanager
def kubectl_proxy(kubectl: Kubectl, kubeconfig: Path | None = None) -> Iterator[str]:
    """`kubectl proxy --port=0` as a user runs it (the kubectl's kubeconfig unless another
    is given); the origin it serves on."""
    process = subprocess.Popen(
        [str(kubectl.binary), "--kubeconfig", str(kubeconfig or kubectl.kubeconfig),
         "--cache-dir", str(kubectl.cache_dir), "proxy", "--port=0"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env={"PATH": "/usr/bin:/bin",
                                                  "HOME": str(kubectl.kubeconfig.parent)})
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "Starting to serve on 127.0.0.1:43121"
        found = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert found, f"kubectl proxy said: {line!r}"
        yield f"http://127.0.0.1:{found.group(1)}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    workdir = tmp_path_factory.mktemp("dashboard")
    node = unique("dash-node")
    with docker_cluster(workdir, (node,)) as (apiserver, kubectl), \
            kubectl_proxy(kubectl) as origin, \
            sync_playwright() as playwright:
        # a fresh profile, never the user's; Playwright's own browser download is not used
        browser = playwright.chromium.launch_persistent_context(
            str(workdir / "chromium-profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS,
            headless=True, viewport={"width": 1400, "height": 1000})
        try:
            page = browser.new_page()
            requests: list[str] = []
            errors: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("response", lambda r: errors.append(f"{r.status} {r.url}")
                    if r.status >= 400 else None)
            page.goto(f"{origin}/dashboard/")
            page.evaluate("window.loadedOnce = true")  # gone if the page ever reloads
            yield Dashboard(kubectl, apiserver, node, origin, page, workdir, requests, errors)
        finally:
            browser.close()


def test_the_node_is_shown_ready_with_its_labels_and_allocatable(dashboard: Dashboard) -> None:
    page = dashboard.page
    expect(page.locator("#connection")).to_have_text("live", timeout=WAIT)
    row = page.locator(f'#nodes tr[data-node="{dashboard.node}"]')
    expect(row.locator("td.ready")).to_have_text("True", timeout=WAIT)
    expect(row.locator("td.labels")).to_contain_text(f"kubernetes.io/hostname={dashboard.node}")
    expect(row.locator("td.allocatable")).to_contain_text("pods: ")
    expect(row.locator("td.allocatable")).to_contain_text("cpu: ")
    expect(row.locator("td.taints")).to_have_text("none")


def test_a_scheduled_pods_diagram_fills_in_live(dashboard: Dashboard) -> None:
    page = dashboard.page
    name = unique("dash-web")
    # watch its flow before it exists (a link to #pod=...), then every caption it shows
    page.evaluate("""key => {
        window.captions = [];
        new MutationObserver(() => window.captions.push(
            document.getElementById('flow-caption').textContent)).observe(
            document.getElementById('flow-caption'), {childList: true, characterData: true,
                                                      subtree: true});
        location.hash = 'pod=' + encodeURIComponent(key);
    }""", f"default/{name}")
    expect(page.locator("#flow-caption")).to_contain_text("not found", timeout=WAIT)
    dashboard.create(name, sleeping())
    row = dashboard.row(name)
    expect(row.locator("td.phase")).to_have_text("Running", timeout=WAIT)
    expect(row.locator("td.node")).to_have_text(dashboard.node)
    expect(row.locator("td.restarts")).to_have_text("0")
    expect(row).to_have_attribute("aria-current", "true")
    caption = page.locator("#flow-caption")
    expect(caption).to_contain_text(f"pod default/{name} on {dashboard.node}: Ready after",
                                    timeout=WAIT)
    # it was drawn while the pod was on its way, before it was Ready
    captions: list[str] = page.evaluate("window.captions")
    drawn = [c for c in captions if c.startswith(f"pod default/{name}") and "not found" not in c]
    assert "stopped: Pending" in drawn[0] and "Ready after" in drawn[-1], captions
    texts = dashboard.diagram_texts()
    for label in ("create pod", "watch: new unbound pod", f"filter, score: {dashboard.node}",
                  f"bind to {dashboard.node}", f"watch: pod on {dashboard.node}",
                  "run pod sandbox", "start container app", "status: Ready"):
        assert label in texts, (label, texts)
    # the same lanes as `kubectl timeline`
    assert [t for t in texts if t in ("client", "apiserver", "etcd", "scheduler", "kubelet",
                                      "docker")][:6] == [
        "client", "apiserver", "etcd", "scheduler", "kubelet", "docker"]
    expect(page.locator("#events tr", has_text=f"pod/{name}").filter(
        has_text="Scheduled")).to_have_count(1, timeout=WAIT)


def test_a_node_name_pod_skips_the_scheduler_chosen_by_keyboard(dashboard: Dashboard) -> None:
    page = dashboard.page
    name = dashboard.create(unique("dash-pinned"), sleeping(nodeName=dashboard.node))
    row = dashboard.row(name)
    expect(row.locator("td.phase")).to_have_text("Running", timeout=WAIT)
    button = row.get_by_role("button", name=name)
    button.focus()
    page.keyboard.press("Enter")
    expect(button).to_have_attribute("aria-pressed", "true")
    caption = page.locator("#flow-caption")
    expect(caption).to_contain_text(f"pod default/{name} on {dashboard.node}: Ready after",
                                    timeout=WAIT)
    expect(dashboard.diagram()).to_contain_text(
        "scheduler skipped: spec.nodeName was set at create", timeout=WAIT)
    texts = dashboard.diagram_texts()
    assert f"watch: pod on {dashboard.node}" in texts, texts
    assert not any(t.startswith(("bind to", "filter")) for t in texts), texts
    # deleted: its row goes, live
    dashboard.kubectl("delete", "pod", name, "--grace-period=1", "--wait=false")
    expect(row).to_have_count(0, timeout=WAIT)
    expect(caption).to_contain_text("not found", timeout=WAIT)


def test_an_unschedulable_pods_diagram_stops_at_the_scheduler(dashboard: Dashboard) -> None:
    page = dashboard.page
    name = dashboard.create(unique("dash-nowhere"), sleeping(nodeSelector={"dash": "nowhere"}))
    row = dashboard.row(name)
    expect(row.locator("td.phase")).to_have_text("Pending (Unschedulable)", timeout=WAIT)
    expect(row.locator("td.node")).to_have_text("—")
    row.get_by_role("button", name=name).click()
    caption = page.locator("#flow-caption")
    expect(caption).to_contain_text(f"pod default/{name}: stopped: Unschedulable",
                                    timeout=WAIT)
    diagram = dashboard.diagram()
    expect(diagram).to_contain_text("✗ filter: 0/1 nodes are available", timeout=WAIT)
    expect(diagram).to_contain_text(f"{dashboard.node}: didn't match Pod's node "
                                    "affinity/selector")
    texts = dashboard.diagram_texts()
    assert not any(t.startswith(("bind to", "watch: pod on", "run pod")) for t in texts), texts
    expect(page.locator("#events tr", has_text=f"pod/{name}").filter(
        has_text="FailedScheduling").first).to_be_visible(timeout=WAIT)


def test_the_plots_show_the_pods_started_and_scheduled(dashboard: Dashboard) -> None:
    """The startup histogram counts every Running pod listed, the rate plot the pods
    bound in the last 5 minutes; both as bars, as a caption and as a data table."""
    page = dashboard.page
    startup, rate = page.locator("#startup-plot"), page.locator("#rate-plot")
    scheduled_before = int(rate.get_attribute("data-count") or "0")
    names = [dashboard.create(unique("dash-plot"), sleeping()) for _ in range(2)]
    for name in names:
        expect(dashboard.row(name).locator("td.phase")).to_have_text("Running", timeout=WAIT)
    running = page.locator("#pods td.phase").filter(has_text=re.compile("^Running$")).count()
    assert running >= 2  # the two above (and dash-web, when the tests before ran)
    expect(startup).to_have_attribute("data-count", str(running), timeout=WAIT)
    expect(page.locator("#startup-caption")).to_contain_text(
        f"Pod startup latency: {running} pods started, median ")
    bars = [float(v) for v in page.locator("#startup-svg rect.bar").evaluate_all(
        "bars => bars.map(b => b.dataset.value)")]
    assert len(bars) == 8 and sum(bars) == running, bars
    table = page.locator("#startup-data tbody td.num").all_text_contents()
    assert sum(int(n) for n in table) == running, table

    def scheduled() -> int:
        return int(rate.get_attribute("data-count") or "0")
    expect(rate).not_to_have_attribute("data-count", str(scheduled_before), timeout=WAIT)
    page.wait_for_function(
        f"document.getElementById('rate-plot').dataset.count >= {scheduled_before + 2}",
        timeout=WAIT)
    total = scheduled()
    expect(page.locator("#rate-caption")).to_contain_text(
        f"Scheduling rate: {total} pods scheduled in the last 5 minutes, peak ")
    rates = [float(v) for v in page.locator("#rate-svg rect.bar").evaluate_all(
        "bars => bars.map(b => b.dataset.value)")]
    assert len(rates) == 30 and round(sum(rates) * 10) == total, rates
    # a text alternative for each: the svg is an image named by its caption and description
    for plot in ("startup", "rate"):
        svg = page.locator(f"#{plot}-svg")
        expect(svg).to_have_attribute("role", "img")
        expect(svg).to_have_attribute("aria-labelledby", f"{plot}-caption {plot}-desc")
    expect(page.get_by_role("img", name=re.compile("^Scheduling rate: "))).to_have_count(1)


def test_the_page_only_talks_to_its_own_origin_and_never_reloaded(
        dashboard: Dashboard, tmp_path: Path) -> None:
    """Runs last: over everything the tests above made the page do."""
    page = dashboard.page
    assert page.evaluate("window.loadedOnce") is True
    assert dashboard.requests and all(
        url.startswith(f"{dashboard.origin}/") for url in dashboard.requests), \
        dashboard.requests
    assert any("watch=true" in url for url in dashboard.requests)
    assert dashboard.errors == []
    # the README's picture: the scheduled pod's flow
    web = page.locator("#pods button.pod", has_text="dash-web").first
    web.click()
    expect(page.locator("#flow-caption")).to_contain_text("Ready after", timeout=WAIT)
    screenshot = (README_SCREENSHOT if os.environ.get("KUBELITE_UPDATE_SCREENSHOT") == "1"
                  else tmp_path / "dashboard.png")
    page.screenshot(path=str(screenshot))
    assert screenshot.stat().st_size > 10_000


def test_a_user_without_rbac_sees_the_page_but_no_pods(dashboard: Dashboard) -> None:
    """Jane is signed in but has no role: the page loads (system:kubelite-dashboard), its
    lists are refused, and it says so, for each of them."""
    kubeconfig = dashboard.apiserver.kubeconfig_for(dashboard.workdir / "jane.kubeconfig",
                                                    "jane")
    with kubectl_proxy(dashboard.kubectl, kubeconfig) as origin:
        page = dashboard.page.context.new_page()
        try:
            page.goto(f"{origin}/dashboard/")
            status = page.locator("#connection")
            for kind in ("nodes", "pods", "events"):
                expect(status).to_contain_text(
                    f'{kind}: 403 Forbidden: {kind} is forbidden: User "jane" cannot list '
                    f'resource "{kind}"', timeout=WAIT)
            expect(status).to_have_class(re.compile(r"\berror\b"))
            expect(page.locator("#pods tbody tr")).to_have_count(0)
            expect(page.locator("#nodes tbody tr")).to_have_count(0)
        finally:
            page.close()


def test_readme_dashboard_section(dashboard: Dashboard) -> None:
    """The README's commands, on this cluster, through this test's `kubectl proxy`."""
    port = dashboard.origin.rsplit(":", 1)[1]
    names = {"127.0.0.1:8001": f"127.0.0.1:{port}"}
    env = {"PATH": f"{REPO / '.venv' / 'bin'}:/usr/bin:/bin", "HOME": str(dashboard.workdir),
           "KUBECONFIG": str(dashboard.kubectl.kubeconfig)}
    examples = readme.examples("dashboard")
    assert len(examples) == 5
    drifted = []
    for example in examples:
        output = readme.drift(example, example.expected, replacements=names, cwd=REPO, env=env)
        if output is not None:
            drifted.append(f"$ {example.command}\n--- README says:\n"
                           + "\n".join(example.expected) + f"\n--- actual:\n{output}")
    assert not drifted, "README examples drifted:\n" + "\n\n".join(drifted)
