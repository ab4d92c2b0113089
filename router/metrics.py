"""Prometheus metrics, one registry per app (no module-level state tests cannot replace)."""

from __future__ import annotations

from typing import Any

__all__ = ["EventMetrics", "KeyMetrics", "Metrics"]


class Metrics:
    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter("complement_requests_total", "Requests by route, model, status",
                                ["route", "model", "status"], registry=self.registry)
        self.latency = Histogram("complement_request_latency_seconds",
                                 "End-to-end latency by route and model", ["route", "model"],
                                 buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30,
                                          60, 120), registry=self.registry)
        self.cost = Counter("complement_cost_usd_total", "Spend in USD by route and model",
                            ["route", "model"], registry=self.registry)
        self.fallbacks = Counter("complement_escalations_total",
                                 "Targets left for the next one, by route and outcome",
                                 ["route", "target", "outcome"], registry=self.registry)

    def observe(self, route: str, model: str, status: int, latency_s: float,
                cost_usd: float | None, trace: list[Any] | None = None) -> None:
        self.requests.labels(route, model, str(status)).inc()
        self.latency.labels(route, model).observe(latency_s)
        if cost_usd:
            self.cost.labels(route, model).inc(cost_usd)
        for attempt in trace or []:
            if attempt.outcome != "ok":
                self.fallbacks.labels(route, attempt.target, attempt.outcome).inc()

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class EventMetrics:
    """Tab and loop gauges read from the event store at scrape time (a custom collector)."""

    def __init__(self, events: Any) -> None:
        self.events = events

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        labels = ["version"]
        show = GaugeMetricFamily("complement_tab_show_rate", "Share of requests shown",
                                 labels=labels)
        accept = GaugeMetricFamily("complement_tab_accept_rate", "Share of shown accepted",
                                   labels=labels)
        reward = GaugeMetricFamily("complement_tab_reward_per_request",
                                   "Mean reward per labelled request", labels=labels)
        for row in self.events.version_stats():
            show.add_metric([row["version"]], row["show_rate"])
            accept.add_metric([row["version"]], row["accept_rate"])
            reward.add_metric([row["version"]], row["reward_per_request"])
        yield from (show, accept, reward)
        by_kind = ["kind", "by"]
        kind_shown = GaugeMetricFamily("complement_tab_shown_by_kind",
                                       "Suggestions shown that have their outcome, per kind and "
                                       "chooser (policy or a rule)", labels=by_kind)
        kind_accepted = GaugeMetricFamily("complement_tab_accepted_by_kind",
                                          "Of those, accepted", labels=by_kind)
        for row in self.events.kind_stats():
            kind_shown.add_metric([row["kind"], row["by"]], row["shown"])
            kind_accepted.add_metric([row["kind"], row["by"]], row["accepted"])
        yield from (kind_shown, kind_accepted)
        yield GaugeMetricFamily("complement_tab_events_pending_feedback",
                                "Shown suggestions waiting for feedback",
                                value=self.events.pending())
        turnaround = next((d["turnaround_s"] for d in self.events.deploy_log(20)
                           if "turnaround_s" in d), None)
        if turnaround is not None:
            yield GaugeMetricFamily("complement_loop_last_turnaround_seconds",
                                    "The last loop turn, collect to swap", value=turnaround)


class KeyMetrics:
    """Each virtual key's spend and limits, read from the database at scrape time, and the
    requests this process admitted with it (issue 37). Labelled by the key's alias and
    name, never the key."""

    def __init__(self, gate: Any) -> None:
        self.gate = gate

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        store = self.gate.store
        if store is None or not self.gate.admin_keys:
            return
        labels = ["key", "name"]
        spend = GaugeMetricFamily("complement_key_spend_usd", "Spend per virtual key (USD)",
                                  labels=labels)
        budget = GaugeMetricFamily("complement_key_max_budget_usd",
                                   "max_budget per virtual key (absent: none)", labels=labels)
        rpm = GaugeMetricFamily("complement_key_rpm_limit", "rpm_limit per virtual key",
                                labels=labels)
        tpm = GaugeMetricFamily("complement_key_tpm_limit", "tpm_limit per virtual key",
                                labels=labels)
        revoked = GaugeMetricFamily("complement_key_revoked", "1 when the key is revoked",
                                    labels=labels)
        served = CounterMetricFamily("complement_key_requests",
                                     "Requests admitted per virtual key by this process",
                                     labels=labels)
        for key in store.all():
            names = [key.key_alias, key.key_name or ""]
            spend.add_metric(names, key.spend)
            revoked.add_metric(names, 1.0 if key.revoked_at is not None else 0.0)
            served.add_metric(names, self.gate.served.get(key.key_hash, 0))
            for family, value in ((budget, key.max_budget), (rpm, key.rpm_limit),
                                  (tpm, key.tpm_limit)):
                if value is not None:
                    family.add_metric(names, float(value))
        yield from (spend, budget, rpm, tpm, revoked, served)
