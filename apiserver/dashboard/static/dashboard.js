// kubelite's dashboard: lists and watches nodes, pods and events through the API at this
// page's origin (open it through `kubectl proxy`, which adds your credentials), and draws
// the selected pod's flow with the apiserver's own `kubectl timeline` renderer
// (POST /dashboard/timeline). No framework, no build step; data reaches the DOM only as text.
"use strict";

const SHOWN_EVENTS = 200;
const state = { nodes: new Map(), pods: new Map(), events: new Map(), selected: null,
                problems: new Map() };

const keyOf = (o) => (o.metadata.namespace ? `${o.metadata.namespace}/` : "") + o.metadata.name;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-") || k.startsWith("aria-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c instanceof Node ? c : String(c));
  return node;
}

async function failure(response) {
  try {
    const s = await response.json();
    return `${response.status} ${s.reason || ""}: ${s.message || ""}`;
  } catch { return `${response.status} ${response.statusText}`; }
}

// --- list, then watch from the list's resourceVersion; relist on 410 Gone ---------------
async function follow(name, path, store, changed) {
  let rv = "";
  let pause = 500;  // ms before trying again, doubled up to 30 s while it keeps failing
  for (;;) {
    try {
      if (!rv) {
        const r = await fetch(path, { headers: { Accept: "application/json" } });
        if (!r.ok) throw new Error(await failure(r));
        const list = await r.json();
        store.clear();
        for (const item of list.items || []) store.set(keyOf(item), item);
        rv = list.metadata.resourceVersion;
        changed(null);
      }
      const r = await fetch(`${path}?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`,
                            { headers: { Accept: "application/json" } });
      if (r.status === 410) { rv = ""; continue; }
      if (!r.ok) throw new Error(await failure(r));
      problem(name, null);
      pause = 500;
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;  // the server ended the watch: resume from rv
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, end);
          buffer = buffer.slice(end + 1);
          if (!line.trim()) continue;
          const event = JSON.parse(line);
          if (event.type === "ERROR") {
            if (event.object.code === 410) rv = "";
            throw new Error(`watch: ${event.object.message}`);
          }
          rv = event.object.metadata.resourceVersion;
          if (event.type === "BOOKMARK") continue;
          if (event.type === "DELETED") store.delete(keyOf(event.object));
          else store.set(keyOf(event.object), event.object);
          changed(event.object);
        }
      }
    } catch (e) {
      problem(name, e.message);
      await sleep(pause);
      pause = Math.min(pause * 2, 30_000);
    }
  }
}

function problem(name, message) {
  if (message) state.problems.set(name, message); else state.problems.delete(name);
  const status = document.getElementById("connection");
  const all = [...state.problems].map(([n, m]) => `${n}: ${m}`);
  status.textContent = all.length ? all.join("; ") : "live";
  status.classList.toggle("error", all.length > 0);
}

// --- drawing, at most once a frame --------------------------------------------------------
const dirty = new Set();
function redraw(what) {
  if (!dirty.size) requestAnimationFrame(() => {
    for (const w of dirty) DRAW[w]();
    dirty.clear();
  });
  dirty.add(what);
}

function fill(id, rows) {
  document.querySelector(`#${id} tbody`).replaceChildren(...rows);
  document.getElementById(`${id}-count`).textContent = `(${rows.length})`;
}

const tags = (items) => items.map((t) => el("span", { class: "tag" }, t));
const condition = (o, type) => (o.status?.conditions || []).find((c) => c.type === type);

function drawNodes() {
  const nodes = [...state.nodes.values()].sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
  fill("nodes", nodes.map((n) => {
    const ready = condition(n, "Ready")?.status || "Unknown";
    const labels = Object.entries(n.metadata.labels || {}).map(([k, v]) => `${k}=${v}`);
    const taints = (n.spec?.taints || []).map((t) =>
      `${t.key}${t.value ? `=${t.value}` : ""}:${t.effect}`);
    const alloc = Object.entries(n.status?.allocatable || {}).map(([k, v]) => `${k}: ${v}`);
    return el("tr", { "data-node": n.metadata.name },
      el("th", { scope: "row" }, n.metadata.name),
      el("td", { class: `ready ${ready === "True" ? "ok" : "bad"}` }, ready),
      el("td", { class: "labels" }, ...tags(labels)),
      el("td", { class: "taints" }, ...(taints.length ? tags(taints) : ["none"])),
      el("td", { class: "allocatable" }, ...tags(alloc)));
  }));
}

function phaseOf(pod) {
  const phase = pod.status?.phase || "Pending";
  const scheduled = condition(pod, "PodScheduled");
  if (phase === "Pending" && scheduled?.status === "False") return `Pending (${scheduled.reason})`;
  const waiting = (pod.status?.containerStatuses || []).map((c) => c.state?.waiting?.reason)
    .find(Boolean);
  return waiting ? `${phase} (${waiting})` : phase;
}

function drawPods() {
  const pods = [...state.pods.values()].sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
  fill("pods", pods.map((p) => {
    const key = keyOf(p);
    const restarts = (p.status?.containerStatuses || [])
      .reduce((n, c) => n + (c.restartCount || 0), 0);
    const phase = phaseOf(p);
    const chosen = key === state.selected;
    const button = el("button", { type: "button", class: "pod", "aria-pressed": String(chosen),
                                  "aria-controls": "flow" }, p.metadata.name);
    button.addEventListener("click", () => select(key));
    return el("tr", { "data-pod": key, "aria-current": String(chosen) },
      el("td", {}, p.metadata.namespace),
      el("th", { scope: "row" }, button),
      el("td", { class: `phase ${/Running|Succeeded/.test(phase) ? "ok"
                                 : /\(/.test(phase) ? "bad" : ""}` }, phase),
      el("td", { class: "node" }, p.spec?.nodeName || "—"),
      el("td", { class: "restarts num" }, restarts));
  }));
}

function eventTime(e) {
  return e.lastTimestamp || e.eventTime || e.series?.lastObservedTime
    || e.metadata.creationTimestamp || "";
}

function drawEvents() {
  const events = [...state.events.values()].sort((a, b) =>
    eventTime(b).localeCompare(eventTime(a)));
  const rows = events.slice(0, SHOWN_EVENTS).map((e) => {
    const io = e.involvedObject || {};
    return el("tr", { "data-event": keyOf(e) },
      el("td", {}, el("time", { dateTime: eventTime(e) }, eventTime(e).replace("T", " "))),
      el("td", { class: e.type === "Warning" ? "warn" : "" }, e.type || ""),
      el("td", { class: "reason" }, e.reason || ""),
      el("td", {}, `${(io.kind || "").toLowerCase()}/${io.name || ""}`),
      el("td", {}, e.source?.component || e.reportingComponent || ""),
      el("td", { class: "message" }, e.message || ""));
  });
  fill("events", rows);
  document.getElementById("events-count").textContent =
    events.length > SHOWN_EVENTS ? `(latest ${SHOWN_EVENTS} of ${events.length})`
                                 : `(${events.length})`;
}

// --- the selected pod's flow: the server draws the same SVG as `kubectl timeline` ---------
let asked = 0;
let drawnFor = "";
async function drawFlow() {
  const pod = state.pods.get(state.selected);
  const figure = document.getElementById("flow");
  document.getElementById("flow-hint").hidden = Boolean(state.selected);
  figure.hidden = !state.selected;
  if (!state.selected) return;
  const caption = document.getElementById("flow-caption");
  if (!pod) {
    caption.classList.remove("visually-hidden");
    caption.textContent = `pod ${state.selected}: not found (deleted, or not created yet)`;
    document.getElementById("diagram").replaceChildren();
    drawnFor = "";
    return;
  }
  const uid = pod.metadata.uid;
  const events = [...state.events.values()].filter((e) => e.involvedObject?.uid === uid);
  const body = JSON.stringify({ pod, events });
  if (body === drawnFor) return;
  const mine = ++asked;
  const r = await fetch("timeline", { method: "POST", body,
                                      headers: { "Content-Type": "application/json" } });
  if (mine !== asked) return;  // a newer drawing was asked for meanwhile
  if (!r.ok) {
    caption.classList.remove("visually-hidden");
    caption.textContent = `cannot draw: ${await failure(r)}`;
    return;
  }
  const parsed = new DOMParser().parseFromString(await r.text(), "image/svg+xml");
  const svg = document.importNode(parsed.documentElement, true);
  if (mine !== asked) return;
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-labelledby", "flow-caption");
  drawnFor = body;
  // the drawing shows the same headline: the caption names it for screen readers only
  caption.textContent = svg.querySelector("title")?.textContent || state.selected;
  caption.classList.add("visually-hidden");
  document.getElementById("diagram").replaceChildren(svg);
}

function select(key) {
  if (key === state.selected) return;
  state.selected = key;
  drawnFor = "";
  location.hash = `pod=${encodeURIComponent(key)}`;
  redraw("pods");
  redraw("flow");
}

// --- the plots --------------------------------------------------------------------------
// Drawn from the pods and Events this page already watches, not from /metrics: those cover
// every apiserver worker and every kubelet (an apiserver's /metrics is its own process's,
// and pod startup is measured by the kubelets), need no more RBAC than the tables above
// (no nonResourceURLs grant), and show exactly the pods listed. The price: a deleted pod
// leaves the plots, and once its Events expire (--event-ttl, 1 h) the instants come from
// its conditions, in whole seconds.
const SVG = document.getElementById("startup-svg").namespaceURI;  // the SVG namespace
const STARTUP_BINS = [0.5, 1, 2, 5, 10, 30, 60];  // upper bounds (s); the last bin is ≥ 60 s
const RATE_STEP = 10;  // seconds per bar
const RATE_BARS = 30;  // 5 minutes

function svgEl(tag, attrs = {}, text = "") {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text) node.textContent = text;
  return node;
}

const instant = (text) => (text ? Date.parse(text) : NaN);

function podEvents(pod, reason) {
  return [...state.events.values()].filter((e) =>
    e.involvedObject?.uid === pod.metadata.uid && e.reason === reason);
}

// create -> its last container started (the kubelet's Started Events, microseconds), for
// pods that got there; their Ready condition when the Events are gone
function startupSeconds(pod) {
  if (!/Running|Succeeded/.test(pod.status?.phase || "")) return null;
  const created = instant(pod.metadata.annotations?.["timeline.kubelite.io/created"]
                          || pod.metadata.creationTimestamp);
  const started = Math.max(...podEvents(pod, "Started").map((e) => instant(eventTime(e))));
  const at = Number.isFinite(started) ? started
    : instant(condition(pod, "Ready")?.lastTransitionTime);
  return Number.isFinite(created) && Number.isFinite(at) ? Math.max(0, at - created) / 1000
    : null;
}

// when the scheduler bound it: its Scheduled Event (microseconds), else PodScheduled
function scheduledAt(pod) {
  if (!pod.spec?.nodeName || condition(pod, "PodScheduled")?.status !== "True") return null;
  const scheduled = podEvents(pod, "Scheduled");
  if (!scheduled.length && !pod.metadata.annotations?.["timeline.kubelite.io/created"])
    return null;
  const at = scheduled.length ? instant(eventTime(scheduled[0]))
    : instant(condition(pod, "PodScheduled")?.lastTransitionTime);
  return Number.isFinite(at) ? at : null;
}

// a bar chart: bars [{label, value}], a y axis from 0 to the largest value
function barChart(svg, bars, unit) {
  const [width, height, left, bottom, top] = [420, 200, 34, 34, 12];
  const max = Math.max(1e-9, ...bars.map((b) => b.value));
  const step = (width - left - 4) / bars.length;
  const scale = (height - bottom - top) / max;
  const desc = svg.querySelector("desc");
  svg.replaceChildren(desc,
    svgEl("line", { class: "axis", x1: left, y1: height - bottom, x2: width, y2: height - bottom }),
    svgEl("line", { class: "axis", x1: left, y1: top, x2: left, y2: height - bottom }),
    svgEl("text", { x: left - 4, y: top + 4, "text-anchor": "end" },
          `${+max.toFixed(2)}`),
    svgEl("text", { x: left - 4, y: height - bottom, "text-anchor": "end" }, "0"),
    svgEl("text", { x: left + (width - left) / 2, y: height - 4, "text-anchor": "middle" },
          unit));
  bars.forEach((b, i) => {
    const h = b.value * scale;
    const bar = svgEl("rect", { class: "bar", x: left + i * step + 1, width: Math.max(1, step - 2),
                                y: height - bottom - h, height: h, "data-value": b.value });
    bar.append(svgEl("title", {}, `${b.label}: ${b.value}`));
    svg.append(bar);
    if (b.tick) svg.append(svgEl("text", { x: left + (i + 0.5) * step, y: height - bottom + 13,
                                           "text-anchor": "middle" }, b.tick));
  });
}

function dataRows(id, rows) {
  document.querySelector(`#${id} tbody`).replaceChildren(...rows.map(([a, b]) =>
    el("tr", {}, el("td", {}, a), el("td", { class: "num" }, b))));
}

function drawPlots() {
  const pods = [...state.pods.values()];
  const latencies = pods.map(startupSeconds).filter((s) => s !== null).sort((a, b) => a - b);
  const names = STARTUP_BINS.map((b, i) => `${i ? STARTUP_BINS[i - 1] : 0}–${b} s`)
    .concat([`≥ ${STARTUP_BINS.at(-1)} s`]);
  const counts = names.map(() => 0);
  for (const s of latencies) {
    const i = STARTUP_BINS.findIndex((b) => s < b);
    counts[i < 0 ? counts.length - 1 : i] += 1;
  }
  barChart(document.getElementById("startup-svg"),
           names.map((n, i) => ({ label: n, value: counts[i], tick: n.replace(" s", "") })),
           "seconds from create to started (pods per bin)");
  dataRows("startup-data", names.map((n, i) => [n, counts[i]]));
  const median = latencies.length ? latencies[Math.floor(latencies.length / 2)] : null;
  document.getElementById("startup-plot").dataset.count = latencies.length;
  document.getElementById("startup-caption").textContent =
    `Pod startup latency: ${latencies.length} pod${latencies.length === 1 ? "" : "s"} started` +
    (median === null ? "" : `, median ${median.toFixed(2)} s`);

  const now = Date.now();
  const scheduled = pods.map(scheduledAt).filter((t) => t !== null);
  const perBar = Array(RATE_BARS).fill(0);
  for (const t of scheduled) {
    const ago = Math.floor((now - t) / 1000 / RATE_STEP);
    if (ago >= 0 && ago < RATE_BARS) perBar[RATE_BARS - 1 - ago] += 1;
  }
  barChart(document.getElementById("rate-svg"), perBar.map((n, i) => {
    const ago = (RATE_BARS - i) * RATE_STEP;
    return { label: `${ago}–${ago - RATE_STEP} s ago`, value: n / RATE_STEP,
             tick: (RATE_BARS - i) % 6 === 0 ? `-${ago / 60}m` : "" };
  }), "pods scheduled per second, last 5 minutes");
  dataRows("rate-data", perBar.map((n, i) => {
    const ago = (RATE_BARS - i) * RATE_STEP;
    return [`${ago}–${ago - RATE_STEP}`, n];
  }).filter(([, n]) => n > 0));
  const total = perBar.reduce((a, b) => a + b, 0);
  document.getElementById("rate-plot").dataset.count = total;
  document.getElementById("rate-caption").textContent =
    `Scheduling rate: ${total} pod${total === 1 ? "" : "s"} scheduled in the last 5 minutes, ` +
    `peak ${(Math.max(...perBar) / RATE_STEP).toFixed(1)} pods/s`;
}

const DRAW = { nodes: drawNodes, pods: drawPods, events: drawEvents, flow: drawFlow,
               plots: drawPlots };

function selectedChanged(object) {
  if (!state.selected || !object) return true;
  if (object.kind === "Event" || object.involvedObject)
    return object.involvedObject?.uid === state.pods.get(state.selected)?.metadata.uid;
  return keyOf(object) === state.selected;
}

// `#pod=NAMESPACE/NAME` selects a pod (a link to its flow, even before it exists)
function fromHash() {
  const key = decodeURIComponent(location.hash.replace(/^#pod=/, ""));
  if (location.hash.startsWith("#pod=") && key) select(key);
}

function start() {
  fromHash();
  window.addEventListener("hashchange", fromHash);
  follow("nodes", "/api/v1/nodes", state.nodes, () => redraw("nodes"));
  follow("pods", "/api/v1/pods", state.pods, (o) => {
    redraw("pods");
    redraw("plots");
    if (selectedChanged(o)) redraw("flow");
  });
  follow("events", "/api/v1/events", state.events, (o) => {
    redraw("events");
    redraw("plots");
    if (selectedChanged(o)) redraw("flow");
  });
  redraw("flow");
  setInterval(() => redraw("plots"), 5000);  // the rate's time axis moves on
}

start();
