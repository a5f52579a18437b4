"""What the chart ships for monitoring: the PrometheusRule (valid PromQL by promtool, alerts
that fire on series shaped like the services' own) and the Grafana dashboard ConfigMap,
both naming only metrics, labels and label values the services expose
(exposed-metrics.json, which a test here compares with the running binaries)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
import yaml

import exposed_metrics
from conftest import CHART, NAMESPACE, RELEASE, documents, find, interop_required, one, render, scenario_docs

RULES_ON = {"prometheusRule": {"enabled": True}, "accel": {"enabled": True}}
MEMNODE_JOB = f"{RELEASE}-dmkv-memnode"
METADATA_JOB = f"{RELEASE}-dmkv-metadata"
ACCEL_JOB = f"{RELEASE}-dmkv-accel"


# --- PromQL: the metrics an expression names --------------------------------------------

_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "by", "without", "on", "ignoring", "group_left", "group_right"}
_LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\{(?:"(?:[^"\\]|\\.)*"|[^}"])*\}|\[[^\]]*\]|[A-Za-z_:][A-Za-z0-9_:]*|\d[\w.]*|\S')
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


def selectors(expr: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """(metric name, [(label, op, value)]) for every series selector of a PromQL expression."""
    tokens = _TOKEN.findall(expr)
    out, i = [], 0
    while i < len(tokens):
        t = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if t in _LABEL_LISTS and nxt == "(":
            depth, i = 0, i + 1
            while i < len(tokens):
                depth += tokens[i] == "("
                depth -= tokens[i] == ")"
                i += 1
                if depth == 0:
                    break
            continue
        # A name followed by "(" is a function; by "by"/"without", an aggregation.
        if re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", t) and t.lower() not in _KEYWORDS and nxt not in ("(", "by", "without"):
            matchers = []
            if nxt.startswith("{"):
                body = nxt[1:-1]
                pos = 0
                while pos < len(body.strip()):
                    m = _MATCHER.match(body, pos)
                    assert m, f"cannot parse the matchers {nxt} in {expr}"
                    matchers.append(m.groups())
                    pos = m.end()
                i += 1
            out.append((t, matchers))
        i += 1
    return out


def unknown_names(expr: str, families: dict) -> list[str]:
    """What an expression names that the services do not expose."""
    problems = []
    for name, matchers in selectors(expr):
        if name in exposed_metrics.PROMETHEUS_SERIES:
            allowed, values = exposed_metrics.TARGET_LABELS, {}
        else:
            family = exposed_metrics.family_of(name, families)
            if family is None:
                problems.append(f"metric {name}")
                continue
            values = families[family]["labels"]
            allowed = set(values) | exposed_metrics.TARGET_LABELS
            if families[family]["type"] == "histogram" and name.endswith("_bucket"):
                allowed = allowed | {"le"}
        for label, op, value in matchers:
            if label not in allowed:
                problems.append(f"label {label} of {name}")
            elif op == "=" and values.get(label) is not None and value not in values[label]:
                problems.append(f'{name}{{{label}="{value}"}}: {label} is one of {values[label]}')
    return problems


def test_selector_parsing():
    expr = 'sum by (pod, reason) (rate(x_total{job="a",reason=~"b|c"}[5m])) / on(pod) y > 0.1 or absent(up{job="j"}) + max without (a) (z)'
    assert selectors(expr) == [
        ("x_total", [("job", "=", "a"), ("reason", "=~", "b|c")]),
        ("y", []),
        ("up", [("job", "=", "j")]),
        ("z", []),
    ]
    families = {"x_total": {"type": "counter", "labels": {"reason": ["b"]}}}
    assert unknown_names('x_total{reason="z"} + x_totl', families) == [
        "x_total{reason=\"z\"}: reason is one of ['b']",
        "metric x_totl",
    ]


# --- the list of exposed metrics ---------------------------------------------------------


def test_exposed_metrics_are_what_the_binaries_serve():
    """Everything exposed-metrics.json lists (families, their type, labels and label
    values) is served by the built binaries. Services that are not built are skipped
    with a note (memnode and metadata must be)."""
    scraped, missing = exposed_metrics.scrape_services()
    assert "memnode" not in missing and "metadata" not in missing, "cargo build -p memnode -p metadata"
    recorded = exposed_metrics.load()
    gone, added = [], []
    for service, families in scraped.items():
        for name, want in recorded[service].items():
            got = families.get(name)
            if got is None or got["type"] != want["type"]:
                gone.append(f"{service}: {name} ({want['type']})")
                continue
            for label, values in want["labels"].items():
                if label not in got["labels"]:
                    gone.append(f"{service}: {name}{{{label}}}")
                elif values is not None:
                    lost = set(values) - set(got["labels"][label] or [])
                    gone.extend(f'{service}: {name}{{{label}="{v}"}}' for v in sorted(lost))
        added.extend(f"{service}: {name}" for name in sorted(set(families) - set(recorded[service])))
    assert not gone, f"exposed-metrics.json lists what the services no longer serve: {gone}; " \
        "regenerate it (python3 helm/tests/exposed_metrics.py) and fix the rules and dashboard"
    if added:
        print(f"note: new metrics not in exposed-metrics.json yet: {added}", file=sys.stderr)
    if missing:
        print(f"note: not compared (not built): {missing}", file=sys.stderr)


def test_exposed_metrics_cover_every_service():
    recorded = exposed_metrics.load()
    assert set(recorded) == set(exposed_metrics.SERVICES)
    families = exposed_metrics.all_families(recorded)
    for name in ("dmkv_memnode_naks_total", "dmkv_metadata_memnode_leased_bytes", "dmkv_switch_packets_total"):
        assert name in families


# --- PrometheusRule ----------------------------------------------------------------------


def rule_spec(values=RULES_ON) -> dict:
    return one(documents(render(values)), "PrometheusRule")["spec"]


def alerts(spec: dict) -> dict[str, dict]:
    return {r["alert"]: r for g in spec["groups"] for r in g["rules"]}


def test_prometheus_rule_is_opt_in_and_labelled():
    assert not find(scenario_docs("default"), "PrometheusRule")
    rule = one(documents(render({"prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}}})), "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == NAMESPACE
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert set(rule["spec"]) == {"groups"}
    one(scenario_docs("production"), "PrometheusRule")


def test_alerts_cover_the_failure_modes():
    with_switch = alerts(rule_spec())
    for name in (
        "DmkvMetadataDown",
        "DmkvMemnodeDown",
        "DmkvMemnodeUnhealthy",
        "DmkvMemoryNearlyFull",
        "DmkvNakRateHigh",
        "DmkvRetransmissionRateHigh",
        "DmkvAcceleratorDown",
        "DmkvSwitchReplayRateHigh",
        "DmkvTableLost",
        "DmkvTableDegraded",
        "DmkvFileDescriptorsNearlyExhausted",
        "DmkvVersionSkew",
        "DmkvRereplicationStalled",
    ):
        assert name in with_switch, name
    for rule in with_switch.values():
        assert rule["labels"]["severity"] in {"critical", "warning"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    without = alerts(rule_spec({"prometheusRule": {"enabled": True}}))
    assert "DmkvAcceleratorDown" not in without and "DmkvSwitchReplayRateHigh" not in without
    assert "dmkv_switch_" not in without["DmkvVersionSkew"]["expr"]
    assert "process_open_fds" in without["DmkvFileDescriptorsNearlyExhausted"]["expr"]
    # Thresholds come from values.
    tuned = alerts(rule_spec({"prometheusRule": {"enabled": True, "memoryFullRatio": 0.75}}))
    assert tuned["DmkvMemoryNearlyFull"]["expr"].rstrip().endswith("> 0.75")
    tuned = alerts(rule_spec({"prometheusRule": {"enabled": True, "fdRatio": 0.5}}))
    assert tuned["DmkvFileDescriptorsNearlyExhausted"]["expr"].count("> 0.5") == 2


def test_alerts_name_metrics_the_services_expose():
    families = exposed_metrics.all_families()
    for name, rule in alerts(rule_spec()).items():
        assert unknown_names(rule["expr"], families) == [], name
        for sel, matchers in selectors(rule["expr"]):
            jobs = [v for label, op, v in matchers if label == "job"]
            assert jobs and set(jobs) <= {MEMNODE_JOB, METADATA_JOB, ACCEL_JOB}, f"{name}: {sel} {matchers}"
            assert ("namespace", "=", NAMESPACE) in matchers, f"{name}: {sel}"


def test_alerts_for_lost_and_degraded_tables_use_the_served_health():
    """Tables by health state are served by the metadata service: the rule alerts on lost
    (critical, at once) and degraded (warning) tables, and on re-replications that stalled
    (warning), from the metadata service's own gauge."""
    rules = alerts(rule_spec())
    assert 'state="lost"' in rules["DmkvTableLost"]["expr"]
    assert rules["DmkvTableLost"]["labels"]["severity"] == "critical"
    assert 'state="degraded"' in rules["DmkvTableDegraded"]["expr"]
    assert rules["DmkvTableDegraded"]["labels"]["severity"] == "warning"
    stalled = rules["DmkvRereplicationStalled"]
    assert "dmkv_metadata_rereplication_stalled" in stalled["expr"]
    assert stalled["labels"]["severity"] == "warning"
    replicating = [n for n, r in rules.items() if "replicat" in r["expr"]]
    assert replicating == ["DmkvRereplicationStalled"], replicating


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        why = "promtool is not installed (apt-get install prometheus)"
        assert not interop_required(), f"DMKV_REQUIRE_INTEROP=1 but {why}"
        print(f"SKIPPED: {why}", file=sys.stderr)
        pytest.skip(why)
    return path


def write_rules(tmp_path, spec, strip_annotations=False):
    spec = json.loads(json.dumps(spec))
    if strip_annotations:
        for g in spec["groups"]:
            for r in g["rules"]:
                r.pop("annotations", None)
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@pytest.mark.parametrize("values", [RULES_ON, {"prometheusRule": {"enabled": True}}], ids=["with-switch", "without-switch"])
def test_rules_pass_promtool_check(values, tmp_path):
    tool = promtool()
    path = write_rules(tmp_path, rule_spec(values))
    out = subprocess.run([tool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(alerts(rule_spec(values)))} rules found" in out.stdout, out.stdout


def series(metric: str, values: str, /, **labels) -> dict:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{inner}}}", "values": values}


def test_alerts_fire_on_series_shaped_like_the_services(tmp_path):
    """promtool's rule unit tests: each alert fires on series named and labelled as the
    services and the ServiceMonitors make them, and stays quiet on a healthy or idle
    cluster. (Annotations are checked by promtool check rules above.)"""
    tool = promtool()
    rules = write_rules(tmp_path, rule_spec(), strip_annotations=True)
    ns = NAMESPACE
    mem = dict(job=MEMNODE_JOB, namespace=ns)
    meta = dict(job=METADATA_JOB, namespace=ns, pod=f"{METADATA_JOB}-0")
    acc = dict(job=ACCEL_JOB, namespace=ns, pod=f"{ACCEL_JOB}-abc")
    m0, m1 = f"{MEMNODE_JOB}-0", f"{MEMNODE_JOB}-1"
    tests = [
        {
            "interval": "1m",
            "input_series": [
                series("up", "1 1 0x10", **mem, pod=m0),
                series("up", "1x12", **mem, pod=m1),
                series("up", "1x12", **meta),
                series("up", "1x12", **acc),
                series("dmkv_metadata_memnodes", "0 0 1x10", **meta, health="unhealthy"),
                series("dmkv_memnode_dataplane_up", "1x12", **mem, pod=m1),
                # A replicated table degraded from minute 2 on; none lost until minute 8.
                series("dmkv_metadata_tables", "0 0 1x10", **meta, state="degraded"),
                series("dmkv_metadata_tables", "0x7 1x4", **meta, state="lost"),
                # A re-replication stalled from minute 3 on.
                series("dmkv_metadata_rereplication_stalled", "0 0 0 1x9", **meta),
            ],
            "alert_rule_test": [
                {"eval_time": "5m", "alertname": "DmkvTableDegraded", "exp_alerts": []},
                {
                    "eval_time": "8m",
                    "alertname": "DmkvTableDegraded",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": ns}}],
                },
                {"eval_time": "6m", "alertname": "DmkvRereplicationStalled", "exp_alerts": []},
                {
                    "eval_time": "9m",
                    "alertname": "DmkvRereplicationStalled",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": ns}}],
                },
                {"eval_time": "7m", "alertname": "DmkvTableLost", "exp_alerts": []},
                {
                    "eval_time": "9m",
                    "alertname": "DmkvTableLost",
                    "exp_alerts": [{"exp_labels": {"severity": "critical", "namespace": ns}}],
                },
                {"eval_time": "3m", "alertname": "DmkvMemnodeDown", "exp_alerts": []},
                {
                    "eval_time": "5m",
                    "alertname": "DmkvMemnodeDown",
                    "exp_alerts": [{"exp_labels": {"severity": "critical", **mem, "pod": m0}}],
                },
                {
                    "eval_time": "5m",
                    "alertname": "DmkvMemnodeUnhealthy",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": ns}}],
                },
                {"eval_time": "10m", "alertname": "DmkvMetadataDown", "exp_alerts": []},
                {"eval_time": "10m", "alertname": "DmkvAcceleratorDown", "exp_alerts": []},
                {"eval_time": "10m", "alertname": "DmkvMemnodeDataPlaneStopped", "exp_alerts": []},
            ],
        },
        {
            # No metadata service scraped at all.
            "interval": "1m",
            "input_series": [series("up", "1x10", **mem, pod=m0)],
            "alert_rule_test": [
                {
                    "eval_time": "6m",
                    "alertname": "DmkvMetadataDown",
                    "exp_alerts": [{"exp_labels": {"severity": "critical", "job": METADATA_JOB, "namespace": ns}}],
                }
            ],
        },
        {
            "interval": "1m",
            "input_series": [
                # As the metadata service reports them: per memnode id and name.
                series("dmkv_metadata_memnode_capacity_bytes", "100x20", **meta, memnode="1", name=m0),
                series("dmkv_metadata_memnode_leased_bytes", "95x20", **meta, memnode="1", name=m0),
                series("dmkv_metadata_memnode_capacity_bytes", "100x20", **meta, memnode="2", name=m1),
                series("dmkv_metadata_memnode_leased_bytes", "50x20", **meta, memnode="2", name=m1),
                series("dmkv_metadata_requests_total", "0 0 0 1 1 1 1 1 1 1 1 1 1 1 1 1", **meta, route="/v1/leases", method="POST", status="507"),
            ],
            "alert_rule_test": [
                {
                    "eval_time": "15m",
                    "alertname": "DmkvMemoryNearlyFull",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", **meta, "memnode": "1", "name": m0}}],
                },
                {
                    "eval_time": "4m",
                    "alertname": "DmkvLeasesOutOfMemory",
                    "exp_alerts": [{"exp_labels": {"severity": "critical", "namespace": ns}}],
                },
                {"eval_time": "15m", "alertname": "DmkvLeasesOutOfMemory", "exp_alerts": []},
            ],
        },
        {
            "interval": "1m",
            "input_series": [
                # m0: 1000 messages a minute, 5% NAKed, 5% of its datagrams duplicates.
                series("dmkv_memnode_messages_total", "0+1000x30", **mem, pod=m0, verb="read"),
                series("dmkv_memnode_naks_total", "0+50x30", **mem, pod=m0, reason="psn_sequence"),
                series("dmkv_memnode_naks_total", "0x30", **mem, pod=m0, reason="remote_access"),
                series("dmkv_memnode_datagrams_received_total", "0+1000x30", **mem, pod=m0),
                series("dmkv_memnode_retransmitted_requests_total", "0+50x30", **mem, pod=m0),
                series("dmkv_memnode_datagrams_dropped_total", "0+10x30", **mem, pod=m0, reason="bad_icrc"),
                # m1: healthy traffic; m2: idle (0/0 must not alert).
                series("dmkv_memnode_messages_total", "0+1000x30", **mem, pod=m1, verb="read"),
                series("dmkv_memnode_naks_total", "0x30", **mem, pod=m1, reason="psn_sequence"),
                series("dmkv_memnode_datagrams_received_total", "0+1000x30", **mem, pod=m1),
                series("dmkv_memnode_retransmitted_requests_total", "0x30", **mem, pod=m1),
                series("dmkv_memnode_datagrams_dropped_total", "0x30", **mem, pod=m1, reason="bad_icrc"),
                series("dmkv_memnode_messages_total", "0x30", **mem, pod="idle", verb="read"),
                series("dmkv_memnode_naks_total", "0x30", **mem, pod="idle", reason="psn_sequence"),
                # The switch replays 10% of what it receives.
                series("dmkv_switch_datagrams_received_total", "0+1000x30", **acc),
                series("dmkv_switch_packets_total", "0+100x30", **acc, function="switch_atomics", counter="replayed"),
            ],
            "alert_rule_test": [
                {"eval_time": "8m", "alertname": "DmkvNakRateHigh", "exp_alerts": []},
                {
                    "eval_time": "20m",
                    "alertname": "DmkvNakRateHigh",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": ns, "pod": m0}}],
                },
                {
                    "eval_time": "20m",
                    "alertname": "DmkvRetransmissionRateHigh",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": ns, "pod": m0}}],
                },
                {
                    "eval_time": "20m",
                    "alertname": "DmkvMemnodeBadIcrc",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": ns, "pod": m0}}],
                },
                {
                    "eval_time": "20m",
                    "alertname": "DmkvSwitchReplayRateHigh",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": ns, "pod": acc["pod"]}}],
                },
            ],
        },
        {
            "interval": "1m",
            "input_series": [
                # m0 holds 900 of its 1000 descriptors; m1 and the metadata service few.
                series("process_open_fds", "900x20", **mem, pod=m0),
                series("process_max_fds", "1000x20", **mem, pod=m0),
                series("process_open_fds", "20x20", **mem, pod=m1),
                series("process_max_fds", "1000x20", **mem, pod=m1),
                series("process_open_fds", "30x20", **meta),
                series("process_max_fds", "1000x20", **meta),
                # m1 runs a new version from minute 5 on, and the rollout stalls.
                series("dmkv_metadata_build_info", "1x60", **meta, version="0.1.0"),
                series("dmkv_memnode_build_info", "1x60", **mem, pod=m0, version="0.1.0"),
                series("dmkv_memnode_build_info", "1x4", **mem, pod=m1, version="0.1.0"),
                series("dmkv_memnode_build_info", "_x4 1x55", **mem, pod=m1, version="0.2.0"),
                series("dmkv_switch_build_info", "1x60", **acc, version="0.1.0"),
            ],
            "alert_rule_test": [
                {"eval_time": "5m", "alertname": "DmkvFileDescriptorsNearlyExhausted", "exp_alerts": []},
                {
                    "eval_time": "15m",
                    "alertname": "DmkvFileDescriptorsNearlyExhausted",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", **mem, "pod": m0}}],
                },
                {"eval_time": "20m", "alertname": "DmkvVersionSkew", "exp_alerts": []},
                {
                    "eval_time": "40m",
                    "alertname": "DmkvVersionSkew",
                    "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": ns}}],
                },
            ],
        },
    ]
    unit = tmp_path / "rules_test.yaml"
    unit.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": tests}, sort_keys=False))
    out = subprocess.run([tool, "test", "rules", str(unit)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


# --- Grafana dashboard -------------------------------------------------------------------


def dashboard() -> dict:
    return json.loads((CHART / "files" / "grafana-dashboard.json").read_text())


def panels(dash: dict):
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


def test_dashboard_panels_name_metrics_the_services_expose():
    dash = dashboard()
    families = exposed_metrics.all_families()
    used = set()
    for p in panels(dash):
        if p["type"] == "row":
            continue
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert unknown_names(t["expr"], families) == [], (p["title"], t["expr"])
            used.update(exposed_metrics.family_of(n, families) for n, _ in selectors(t["expr"]))
    # Operations and throughput, latency, NAKs and retransmissions, memory per memnode.
    for needed in (
        "dmkv_memnode_messages_total",
        "dmkv_memnode_received_bytes_total",
        "dmkv_memnode_batch_duration_seconds",
        "dmkv_metadata_request_duration_seconds",
        "dmkv_memnode_naks_total",
        "dmkv_memnode_retransmitted_requests_total",
        "dmkv_metadata_memnode_leased_bytes",
        "dmkv_metadata_memnode_capacity_bytes",
    ):
        assert needed in used, needed
    ids = [p["id"] for p in panels(dash)]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "namespace"} <= variables
    for p in panels(dash):
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}", p["title"]


def test_dashboard_configmap_is_opt_in_and_carries_the_json():
    assert not find(scenario_docs("default"), "ConfigMap")
    (cm,) = find(documents(render({"grafanaDashboard": {"enabled": True}})), "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["dmkv.json"]) == dashboard()
    (prod,) = find(scenario_docs("production"), "ConfigMap")
    assert prod["metadata"]["labels"]["grafana_dashboard"] == "1"
