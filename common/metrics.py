"""Prometheus metrics for every component: plain counters and histograms on the event loop,
turned into `prometheus_client` metric families only when /metrics is read.

prometheus_client's own Counter and Histogram take a lock on every `inc()`/`observe()`
and resolve `labels(...)` under another; a component here runs on one event loop, so the
hot path needs neither. `Counter` and `Histogram` below keep a dict from label values to
numbers (a histogram keeps its per-bucket counts, cumulated at scrape time), and a
`Metrics` collector, registered in a `CollectorRegistry` of the component's own (never
the process-wide default: tests run several components in one process), yields them with
the gauges it reads from live state at scrape time.

    metrics = Metrics()
    requests = metrics.counter("apiserver_request_total", "...", ("verb", "code"))
    requests.inc(("GET", "200"))
    metrics.gauge("kubelet_running_pods", "...", (), lambda: [((), len(pods))])
    text = metrics.render()
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from decimal import Decimal
from typing import TypeVar

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

__all__ = ["CONTENT_TYPE", "DEFAULT_BUCKETS", "Counter", "Gauge", "Histogram", "Labels",
           "Merged", "Metrics", "exponential_buckets", "exposition", "go_float"]

# what kube's components answer /metrics with (the classic text format)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[str, ...]
GaugeSamples = Callable[[], Iterable[tuple[Labels, float]]]

# prometheus' DefBuckets, which kube's metrics use when they name no buckets of their own
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """prometheus.ExponentialBuckets: `count` upper bounds from `start`, each `factor` times
    the one before (multiplied as Go does, so that the `le` labels are kube's digits)."""
    buckets = []
    for _ in range(count):
        buckets.append(start)
        start *= factor
    return tuple(buckets)


class Counter:
    """A monotonically increasing number per combination of label values."""

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str]) -> None:
        self.name = name
        self.help = help_text
        self.labelnames = tuple(labelnames)
        self.values: dict[Labels, float] = {}

    def inc(self, labels: Labels = (), amount: float = 1) -> None:
        values = self.values
        values[labels] = values.get(labels, 0) + amount

    def get(self, labels: Labels = ()) -> float:
        return self.values.get(labels, 0)

    def family(self) -> Metric:
        # prometheus_client appends `_total` to a counter family's samples itself
        family = CounterMetricFamily(self.name.removesuffix("_total"), self.help,
                                     labels=self.labelnames)
        for labels, value in self.values.items():
            family.add_metric(labels, value)
        return family


class Histogram:
    """Observations counted in buckets (upper bounds, +Inf implied) per label values."""

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str],
                 buckets: Sequence[float] = DEFAULT_BUCKETS) -> None:
        self.name = name
        self.help = help_text
        self.labelnames = tuple(labelnames)
        self.buckets = tuple(sorted(buckets))
        # label values -> [count in each bucket (not cumulated; the last one is +Inf), sum]
        self.series: dict[Labels, tuple[list[int], list[float]]] = {}

    def observe(self, value: float, labels: Labels = ()) -> None:
        series = self.series.get(labels)
        if series is None:
            series = self.series[labels] = ([0] * (len(self.buckets) + 1), [0.0])
        # bisect_left: a value equal to a bound belongs to that bucket (le = less or equal)
        series[0][bisect.bisect_left(self.buckets, value)] += 1
        series[1][0] += value

    def count(self, labels: Labels = ()) -> int:
        series = self.series.get(labels)
        return 0 if series is None else sum(series[0])

    def family(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.help, labels=self.labelnames)
        bounds = [go_float(b) for b in self.buckets] + ["+Inf"]
        for labels, (counts, total) in self.series.items():
            cumulated, running = [], 0
            for bound, count in zip(bounds, counts, strict=True):
                running += count
                cumulated.append((bound, float(running)))
            family.add_metric(labels, cumulated, total[0])
        return family


class Gauge:
    """A value read from the component's state when /metrics is read (`kind` "counter":
    a count the component keeps anyway, exposed as a counter)."""

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str],
                 samples: GaugeSamples, kind: str = "gauge") -> None:
        self.name = name
        self.help = help_text
        self.labelnames = tuple(labelnames)
        self.samples = samples
        self.kind = kind

    def family(self) -> Metric:
        family: GaugeMetricFamily | CounterMetricFamily
        if self.kind == "counter":
            family = CounterMetricFamily(self.name.removesuffix("_total"), self.help,
                                         labels=self.labelnames)
        else:
            family = GaugeMetricFamily(self.name, self.help, labels=self.labelnames)
        for labels, value in self.samples():
            family.add_metric(labels, value)
        return family


class Merged:
    """One family of a metric that several owners keep apart (each work queue its own
    histograms): `template` names it, `parts` are read at scrape time."""

    def __init__(self, template: Histogram, parts: Callable[[], Iterable[Histogram]]) -> None:
        self.name = template.name
        self.template = template
        self.parts = parts

    def family(self) -> Metric:
        merged = Histogram(self.name, self.template.help, self.template.labelnames,
                           self.template.buckets)
        for part in self.parts():
            merged.series.update(part.series)
        return merged.family()


M = TypeVar("M", Counter, Histogram, Gauge, Merged)


class Metrics:
    """One component's metrics, in a `CollectorRegistry` of its own."""

    def __init__(self) -> None:
        self.metrics: list[Counter | Histogram | Gauge | Merged] = []
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def counter(self, name: str, help_text: str, labelnames: Sequence[str] = ()) -> Counter:
        return self.add(Counter(name, help_text, labelnames))

    def histogram(self, name: str, help_text: str, labelnames: Sequence[str] = (),
                  buckets: Sequence[float] = DEFAULT_BUCKETS) -> Histogram:
        return self.add(Histogram(name, help_text, labelnames, buckets))

    def gauge(self, name: str, help_text: str, labelnames: Sequence[str],
              samples: GaugeSamples) -> Gauge:
        return self.add(Gauge(name, help_text, labelnames, samples))

    def counter_func(self, name: str, help_text: str, labelnames: Sequence[str],
                     samples: GaugeSamples) -> Gauge:
        return self.add(Gauge(name, help_text, labelnames, samples, kind="counter"))

    def add(self, metric: M) -> M:
        if any(m.name == metric.name for m in self.metrics):
            raise ValueError(f"metric {metric.name} registered twice")
        self.metrics.append(metric)
        return metric

    def collect(self) -> Iterator[Metric]:
        for metric in self.metrics:
            yield metric.family()

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return exposition(self.registry)


# -- the text format, written as kube's (Go) components write it -------------------------------


def go_float(value: float) -> str:
    """A sample value as Go's strconv.FormatFloat(v, 'g', -1, 64) writes it: the shortest
    digits that read back the same, positional from 1e-4 up to 1e6 (`2`, not
    prometheus_client's `2.0`), else with an exponent (`1e+06`, `2.5e-05`)."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if value == 0:
        return "0"
    shortest = Decimal(repr(float(value)))  # Python's repr is the shortest round trip too
    exponent = shortest.adjusted()
    if -4 <= exponent < 6:
        return format(shortest.normalize(), "f")
    _, digits, _ = shortest.normalize().as_tuple()
    text = "".join(map(str, digits))
    mantissa = text[0] + (f".{text[1:]}" if len(text) > 1 else "")
    return f"{'-' if value < 0 else ''}{mantissa}e{'+' if exponent >= 0 else '-'}" \
           f"{abs(exponent):02d}"


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def exposition(registry: CollectorRegistry) -> bytes:
    """Text format 0.0.4, as client_golang writes it: labels sorted by name (a histogram's
    `le` last), each family's samples sorted by their label values, Go's numbers."""
    out: list[str] = []
    for family in registry.collect():
        kind = family.type
        name = family.name + "_total" if kind == "counter" else family.name
        doc = family.documentation.replace("\\", "\\\\").replace("\n", "\\n")
        out.append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n")
        rows = []
        for sample in family.samples:
            labels = sorted((k, v) for k, v in sample.labels.items() if k != "le")
            if "le" in sample.labels:
                labels.append(("le", sample.labels["le"]))
            rows.append((tuple(v for k, v in labels if k != "le"), sample, labels))
        rows.sort(key=lambda row: row[0])  # stable: a histogram's series keep their order
        for _, sample, labels in rows:
            rendered = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels)
            body = f"{{{rendered}}}" if rendered else ""
            out.append(f"{sample.name}{body} {go_float(sample.value)}\n")
    return "".join(out).encode()
