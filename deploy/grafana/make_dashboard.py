#!/usr/bin/env python3
"""Writes dashboards/bandit.json (the provisioned Grafana dashboard). Run after editing panels:
    /usr/bin/python3 deploy/grafana/make_dashboard.py
Every query names only metrics banditd exports (checked by ctest deploy_dashboard_metrics) and
is evaluated against a real Prometheus by ctest deploy_prometheus_integration."""
import json
import os

DS = {"type": "prometheus", "uid": "prometheus"}
INST = 'instance=~"$instance"'
RI = "$__rate_interval"

panels = []
_id = [0]


def panel(title, exprs, unit, x, y, w=12, h=8, kind="timeseries", desc="", legend=None, extra=None):
    _id[0] += 1
    targets = []
    for i, e in enumerate(exprs):
        expr, leg = e if isinstance(e, tuple) else (e, legend or "")
        targets.append({"refId": chr(ord("A") + i), "datasource": DS, "expr": expr,
                        "legendFormat": leg, "range": True})
    p = {"id": _id[0], "type": kind, "title": title, "description": desc, "datasource": DS,
         "gridPos": {"x": x, "y": y, "w": w, "h": h}, "targets": targets,
         "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
         "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                     "tooltip": {"mode": "multi", "sort": "desc"}}}
    if kind == "stat":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "none", "textMode": "auto"}
    if extra:
        p.update(extra)
    panels.append(p)


def row(title, y):
    _id[0] += 1
    panels.append({"id": _id[0], "type": "row", "title": title, "collapsed": False,
                   "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})


def quantile(q):
    return (f"histogram_quantile({q}, sum by (method, le) "
            f"(rate(bandit_rpc_duration_seconds_bucket{{method=~\"$method\"}}[{RI}])))")


y = 0
panel("Instances", ["bandit_instances"], "none", 0, y, w=4, h=4, kind="stat")
panel("Uptime", ["bandit_uptime_seconds"], "s", 4, y, w=4, h=4, kind="stat")
panel("Build", [("bandit_build_info", "{{version}} ({{git_sha}})")], "none", 8, y, w=8, h=4,
      kind="stat", extra={"options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "",
                                                         "values": False},
                                      "textMode": "name", "colorMode": "none", "graphMode": "none"}})
panel("Storage errors (1h)", ["sum(increase(bandit_storage_errors_total[1h]))"], "none", 16, y,
      w=8, h=4, kind="stat", desc="Snapshot, journal append and fsync failures. Any is an incident.")
y += 4
row("RPC", y); y += 1
panel("Latency p50 by method", [(quantile(0.5), "{{method}}")], "s", 0, y,
      desc="Median handling time per method (A66 buckets from 10 us).")
panel("Latency p99 by method", [(quantile(0.99), "{{method}}")], "s", 12, y,
      desc="p99 handling time per method. Alert BanditRpcLatencyP99High at 10 ms.")
y += 8
panel("Requests per second by method",
      [(f"sum by (method) (rate(bandit_rpc_duration_seconds_count[{RI}]))", "{{method}}")],
      "reqps", 0, y)
panel("Error ratio by code",
      [(f"sum by (code) (rate(bandit_rpc_duration_seconds_count{{code!=\"OK\"}}[{RI}])) "
        f"/ scalar(sum(rate(bandit_rpc_duration_seconds_count[{RI}])))", "{{code}}")],
      "percentunit", 12, y,
      desc="Share of all RPCs ending in each non-OK code. INVALID_ARGUMENT / NOT_FOUND / "
           "FAILED_PRECONDITION are caller errors; the alert counts only server-side codes.")
y += 8
row("Learning", y); y += 1
panel("Pseudo-regret per instance (reported optimum)",
      [(f"bandit_instance_pseudo_regret{{{INST}}}", "{{instance}}")], "none", 0, y,
      desc="Cumulative sum of best_expected_reward - expected_reward over updates that reported "
           "an optimum. A learning policy bends this curve (sqrt T or log T); a straight line "
           "is linear regret.")
panel("Estimated regret per instance (model's own)",
      [(f"bandit_instance_estimated_regret{{{INST}}}", "{{instance}}")], "none", 12, y,
      desc="Cumulative sum over decisions of (best estimated mean - chosen arm's estimated mean).")
y += 8
panel("Regret per round (last 5m)",
      [(f"delta(bandit_instance_pseudo_regret{{{INST}}}[5m]) / "
        f"clamp_min(increase(bandit_instance_updates_total{{{INST}}}[5m]), 1)", "{{instance}} pseudo"),
       (f"delta(bandit_instance_estimated_regret{{{INST}}}[5m]) / "
        f"clamp_min(increase(bandit_instance_decisions_total{{{INST}}}[5m]), 1)", "{{instance}} estimated")],
      "none", 0, y, desc="The slope of the regret curves; should fall towards 0 while learning.")
panel("Mean reward (last 5m)",
      [(f"delta(bandit_instance_reward_sum{{{INST}}}[5m]) / "
        f"clamp_min(increase(bandit_instance_updates_total{{{INST}}}[5m]), 1)", "{{instance}}")],
      "none", 12, y)
y += 8
panel("Decisions and rewards per second",
      [(f"rate(bandit_instance_decisions_total{{{INST}}}[{RI}])", "{{instance}} decisions"),
       (f"rate(bandit_instance_updates_total{{{INST}}}[{RI}])", "{{instance}} rewards")],
      "ops", 0, y)
panel("Mixture score and gap to best mixture",
      [(f"bandit_instance_summary{{{INST},key=~\"score|best_score|gap\"}}", "{{instance}} {{key}}")],
      "none", 12, y, desc="Mixture instances only: current score of the sampled mixture, the "
                          "score of the estimated best mixture, and the objective gap.")
y += 8
row("Decisions and state", y); y += 1
panel("Pending decisions", [(f"bandit_instance_pending_decisions{{{INST}}}", "{{instance}}")],
      "none", 0, y, desc="Decisions awaiting a reward. At the configured capacity Select answers "
                         "RESOURCE_EXHAUSTED.")
panel("Expired decisions and rejected rewards per second",
      [(f"rate(bandit_instance_expired_decisions_total{{{INST}}}[{RI}])", "{{instance}} expired"),
       (f"rate(bandit_instance_rejected_rewards_total{{{INST}}}[{RI}])", "{{instance}} rejected")],
      "ops", 12, y)
y += 8
panel("Policy state size", [(f"bandit_instance_state_bytes{{{INST}}}", "{{instance}}")], "bytes",
      0, y, desc="Must stay flat: no policy state grows with the number of rounds.")
panel("Policies", [(f"bandit_instance_info{{{INST}}}", "{{instance}}: {{policy}}")], "none", 12, y,
      kind="table", extra={"options": {"showHeader": True},
                           "transformations": [{"id": "labelsToFields", "options": {}}]})
y += 8
row("Persistence", y); y += 1
panel("Snapshot age per instance",
      [(f"bandit_last_snapshot_age_seconds{{{INST}}}", "{{instance}}")], "s", 0, y,
      desc="Seconds since the newest durable snapshot. Alert BanditSnapshotTooOld at 30 min.")
panel("Snapshot and fsync duration p99",
      [(f"histogram_quantile(0.99, sum by (le) (rate(bandit_snapshot_duration_seconds_bucket[{RI}])))",
        "snapshot p99"),
       (f"histogram_quantile(0.99, sum by (le) (rate(bandit_journal_fsync_duration_seconds_bucket[{RI}])))",
        "journal fsync p99")], "s", 12, y)
y += 8
row("Cluster (--cluster nodes only; empty on a single node)", y); y += 1
panel("Instances per node", [("sum by (replica) (bandit_cluster_owned_instances)", "{{replica}}")],
      "none", 0, y, desc="Instances whose lease each node holds. Placement is rendezvous hashing "
                         "over live nodes: each of N nodes should hold about 1/N.")
panel("Lease takeovers, losses and fencing refusals",
      [(f"sum by (replica) (increase(bandit_cluster_lease_acquisitions_total[{RI}]))",
        "{{replica}} acquired"),
       (f"sum by (replica) (increase(bandit_cluster_lease_losses_total[{RI}]))",
        "{{replica}} lost"),
       (f"sum by (replica) (increase(bandit_cluster_fencing_refusals_total[{RI}]))",
        "{{replica}} fenced")], "none", 12, y,
      desc="Acquisitions rise when a node starts, joins or takes over a dead node's instances; "
           "a loss or a fencing refusal means a node was paused or cut off past its lease.")
y += 8
panel("Forwarded calls per second",
      [(f"sum by (replica) (rate(bandit_cluster_forwarded_calls_total[{RI}]))", "{{replica}}")],
      "reqps", 0, y, desc="Calls a node received for an instance another node owns. Clients that "
                          "route on x-bandit-instance (HAProxy's hash) keep this near zero.")
panel("Takeover time p50 / p99",
      [(f"histogram_quantile(0.5, sum by (le) (rate(bandit_cluster_takeover_seconds_bucket[{RI}])))",
        "p50"),
       (f"histogram_quantile(0.99, sum by (le) (rate(bandit_cluster_takeover_seconds_bucket[{RI}])))",
        "p99")], "s", 12, y,
      desc="Claiming an instance's lease and loading it (snapshot + journal replay).")
y += 8

dashboard = {
    "uid": "bandit-overview",
    "title": "Bandit Decision Service",
    "tags": ["bandit"],
    "timezone": "browser",
    "schemaVersion": 38,
    "version": 1,
    "editable": True,
    "refresh": "10s",
    "time": {"from": "now-30m", "to": "now"},
    "templating": {"list": [
        {"name": "instance", "label": "instance", "type": "query", "datasource": DS,
         "query": {"query": "label_values(bandit_instance_info, instance)", "refId": "inst"},
         "definition": "label_values(bandit_instance_info, instance)",
         "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2,
         "current": {"text": "All", "value": "$__all"}},
        {"name": "method", "label": "method", "type": "query", "datasource": DS,
         "query": {"query": "label_values(bandit_rpc_duration_seconds_count, method)", "refId": "m"},
         "definition": "label_values(bandit_rpc_duration_seconds_count, method)",
         "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2,
         "current": {"text": "All", "value": "$__all"}},
    ]},
    "annotations": {"list": []},
    "panels": panels,
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboards", "bandit.json")
with open(out, "w") as f:
    json.dump(dashboard, f, indent=2)
    f.write("\n")
print("wrote", out, len(panels), "panels")
