#!/usr/bin/env python3
"""ctest deploy_dashboard_metrics: the Grafana dashboard JSON parses, has the panels the issue
asks for, and every metric named by a panel query, a template variable or an alert rule is one
a live banditd exports (its /metrics after some traffic), or one of the persistence metrics the
storage layer adds. Starts banditd on port 0 and bandit-traffic against it; for the cluster panels,
a second banditd in cluster mode on a real PostgreSQL (Debian's, started here in a temp dir)."""
import pwd
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml  # python3-yaml (scripts/deps.sh)

SRC = os.environ.get("BANDIT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BANDITD = os.environ.get("BANDITD", "build/bin/banditd")
TRAFFIC = os.environ.get("BANDIT_TRAFFIC", "build/bin/bandit-traffic")

# Persistence metrics (the storage layer's): name -> type.
PERSISTENCE = {
    "bandit_snapshot_duration_seconds": "histogram",
    "bandit_journal_fsync_duration_seconds": "histogram",
    "bandit_last_snapshot_age_seconds": "gauge",
    "bandit_storage_errors_total": "counter",
}
REQUIRED_PANELS = [  # (regex on the title, why)
    (r"latency p50 by method", "latency p50 by method"),
    (r"latency p99 by method", "latency p99 by method"),
    (r"requests per second", "requests per second"),
    (r"error ratio", "error ratio"),
    (r"pseudo-regret per instance", "regret curves per instance"),
    (r"estimated regret per instance", "regret curves per instance"),
    (r"pending decisions", "pending decisions"),
    (r"snapshot age", "snapshot age"),
    (r"instances per node", "instances per node (cluster)"),
    (r"lease takeovers", "lease takeovers (cluster)"),
    (r"forwarded calls", "forwarded calls (cluster)"),
]
PG_BIN = os.environ.get("BANDIT_PG_BIN", "/usr/lib/postgresql/15/bin")
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "bool", "offset", "inf", "nan", "sum", "min", "max", "avg", "count", "stddev", "stdvar",
    "topk", "bottomk", "quantile", "count_values", "group",
}


def start_postgres(tmp):
    """A throwaway PostgreSQL with its socket in tmp/pg (run as `postgres` when we are root: it
    refuses root). Returns (dsn, stop)."""
    pg = os.path.join(tmp, "pg")
    os.mkdir(pg, 0o700)
    prefix = []
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")  # KeyError: scripts/deps.sh installs the postgresql package
        os.chown(pg, pw.pw_uid, pw.pw_gid)
        os.chmod(tmp, 0o755)
        prefix = ["/usr/sbin/runuser", "-u", "postgres", "--"]
    data = os.path.join(pg, "data")
    subprocess.run(prefix + [f"{PG_BIN}/initdb", "-D", data, "-U", "bandit", "--auth=trust",
                             "--no-sync", "--no-instructions"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(prefix + [f"{PG_BIN}/pg_ctl", "-D", data, "-l", os.path.join(pg, "log"), "-w",
                             "-o", f"-c listen_addresses='' -k {pg} -c fsync=off", "start"],
                   check=True, stdout=subprocess.DEVNULL)

    def stop():
        subprocess.run(prefix + [f"{PG_BIN}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
                       stdout=subprocess.DEVNULL)
    return f"host={pg} port=5432 user=bandit dbname=postgres", stop


def live_metrics(cluster=False):
    tmp = tempfile.mkdtemp(prefix="deploy-dash-")
    port_file = os.path.join(tmp, "ports")
    log = open(os.path.join(tmp, "banditd.log"), "w")
    args = [BANDITD, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
            f"--data_dir={tmp}/data", f"--port_file={port_file}"]
    stop_postgres = None
    if cluster:
        dsn, stop_postgres = start_postgres(tmp)
        args += ["--storage=postgres", f"--postgres_dsn={dsn}", "--durability=always",
                 "--cluster", "--node_id=dash"]
    proc = subprocess.Popen(args, stderr=log, stdout=log)
    try:
        for _ in range(1000):
            if os.path.exists(port_file):
                break
            if proc.poll() is not None:
                log.flush()
                sys.exit(f"banditd exited with {proc.returncode}:\n"
                         + open(os.path.join(tmp, "banditd.log")).read())
            time.sleep(0.01)
        grpc_port, metrics_port = open(port_file).read().split()
        # Traffic on a finite-arm and a contextual instance, so every per-instance family has series.
        for inst, policy in (("dash-ucb1", "ucb1"), ("dash-linucb", "linucb")):
            subprocess.run([TRAFFIC, f"--target=127.0.0.1:{grpc_port}", f"--instance={inst}",
                            f"--policy={policy}", "--rate=0", "--rounds=30", "--drop=0.2",
                            "--quiet", "--wait_for_server=10"], check=True,
                           stdout=subprocess.DEVNULL)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            return r.read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
        if stop_postgres:
            stop_postgres()
        shutil.rmtree(tmp, ignore_errors=True)


def exported_names(text):
    """Metric names a PromQL query may use: every sample name, and for each histogram family its
    _bucket/_sum/_count. Also the label names seen per metric."""
    names, labels = {}, {}
    for ln in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", ln)
        if m:
            fam, typ = m.groups()
            if typ == "histogram":
                for suf in ("_bucket", "_sum", "_count"):
                    names[fam + suf] = typ
            else:
                names[fam] = typ
            continue
        if ln.startswith("#") or not ln.strip():
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?", ln)
        if m:
            labels.setdefault(m.group(1), set()).update(
                re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"", m.group(3) or ""))
    return names, labels


def metric_names_in(expr):
    """Identifiers of a PromQL expression that are metric names (not functions, keywords, label
    names in by/without/on/ignoring lists or matchers, or durations)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (also $instance, $method)
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # range selectors, incl. $__rate_interval
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    found = []
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word = m.group(0)
        rest = e[m.end():].lstrip()
        if rest.startswith("(") or word.lower() in PROMQL_WORDS:
            continue  # a function call or keyword
        if e[max(0, m.start() - 1)].isdigit():
            continue  # a number such as 1e3
        found.append(word)
    return found


def main():
    names, labels = exported_names(live_metrics())
    cluster_names, _ = exported_names(live_metrics(cluster=True))
    if not any(n.startswith("bandit_cluster_") for n in cluster_names):
        print("FAILED: a --cluster banditd exports no bandit_cluster_* metric")
        return 1
    for n, typ in cluster_names.items():
        names.setdefault(n, typ + " (cluster)")
    for n, typ in PERSISTENCE.items():
        if typ == "histogram":
            for suf in ("_bucket", "_sum", "_count"):
                names.setdefault(n + suf, "histogram (persistence)")
        else:
            names.setdefault(n, typ + " (persistence)")
    errors = []

    path = os.path.join(SRC, "deploy", "grafana", "dashboards", "bandit.json")
    dash = json.load(open(path))  # raises on invalid JSON
    panels = []

    def walk(ps):
        for p in ps:
            panels.append(p)
            walk(p.get("panels", []))
    walk(dash.get("panels", []))
    titles = [p.get("title", "") for p in panels]
    for rx, why in REQUIRED_PANELS:
        if not any(re.search(rx, t, re.I) for t in titles):
            errors.append(f"dashboard has no panel for {why} (title matching /{rx}/)")
    ids = [p.get("id") for p in panels]
    if len(ids) != len(set(ids)):
        errors.append("panel ids are not unique")

    checked = 0
    for p in panels:
        if p.get("type") == "row":
            continue
        targets = p.get("targets", [])
        if not targets:
            errors.append(f"panel '{p.get('title')}' has no query")
        for t in targets:
            expr = t.get("expr", "")
            used = metric_names_in(expr)
            if not used:
                errors.append(f"panel '{p['title']}': query names no metric: {expr}")
            for n in used:
                checked += 1
                if n not in names:
                    errors.append(f"panel '{p['title']}': {n} is not exported by banditd")
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query", {})
        q = q.get("query", "") if isinstance(q, dict) else q
        m = re.match(r"label_values\((\w+),\s*(\w+)\)", q)
        if not m:
            errors.append(f"template variable {v.get('name')}: unexpected query {q}")
            continue
        metric, label = m.groups()
        if metric not in names:
            errors.append(f"template variable {v['name']}: {metric} is not exported")
        elif label not in labels.get(metric, set()):
            errors.append(f"template variable {v['name']}: {metric} has no label {label}")

    rules = yaml.safe_load(open(os.path.join(SRC, "deploy", "prometheus", "alerts.yml")))
    alerts = 0
    for g in rules["groups"]:
        for r in g["rules"]:
            alerts += 1
            used = metric_names_in(r["expr"])
            if not used:
                errors.append(f"alert {r.get('alert')}: names no metric")
            for n in used:
                checked += 1
                if n not in names:
                    errors.append(f"alert {r.get('alert')}: {n} is not exported by banditd")

    print(f"banditd exports {len([n for n, t in names.items() if '(' not in t])} "
          f"metric names; {len(panels)} panels, {alerts} alert rules, {checked} metric references")
    if errors:
        print("FAILED:\n  " + "\n  ".join(errors))
        return 1
    print("OK: every dashboard and alert query names an exported metric")
    return 0


if __name__ == "__main__":
    sys.exit(main())
