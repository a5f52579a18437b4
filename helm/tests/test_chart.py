"""The Helm chart: strict lint, Kubernetes schema validation of every rendered manifest,
and what the manifests must say (flags the binaries really have, security contexts,
storage, probes, network policy, opt-in parts)."""

from __future__ import annotations

import base64
import ipaddress
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import helm_python
from conftest import (
    CHART,
    KUBE_VERSION,
    NAMESPACE,
    RELEASE,
    containers,
    documents,
    find,
    flag_args,
    help_commands,
    help_envs,
    help_flags,
    help_text,
    interop_required,
    one,
    pod_spec,
    render,
    scenario_docs,
    scenario_rendered,
    scenario_values,
    workloads,
    workspace_binaries,
)

WARNING = 2  # helm lint severities: 1 info, 2 warning, 3 error


def lint(values):
    return helm_python.lint(CHART, values, strict=True, kube_version=f"v{KUBE_VERSION}", namespace=NAMESPACE)


# --- lint and schema ------------------------------------------------------------------


def test_lint_strict_has_no_warnings(scenario):
    report = lint(scenario_values(scenario))
    assert report["total_charts_linted"] == 1
    assert report["errors"] == [], report
    bad = [m for m in report["messages"] if m["severity"] >= WARNING]
    assert bad == [], bad


@pytest.mark.parametrize(
    "values, complaint",
    [
        ({"memnode": {"capacity": "1GB"}}, "/memnode/capacity"),
        ({"metadata": {"placement": "most-free"}}, "/metadata/placement"),
        ({"metadata": {"chunkSize": "3MiB"}}, "/metadata/chunkSize"),
        ({"memnode": {"dataPort": 0}}, "/memnode/dataPort"),
        ({"memnode": {"bindAddress": "eth0"}}, "/memnode/bindAddress"),
        ({"memnode": {"hugepages": {"enabled": "yes"}}}, "/memnode/hugepages/enabled"),
        ({"memnode": {"prefault": "yes"}}, "/memnode/prefault"),
        ({"networkPolicy": {"from": "world"}}, "/networkPolicy/from"),
        ({"memnode": {"capcity": "1Gi"}}, "capcity"),
        ({"memnode": {"startupProbe": {"periodSeconds": 2, "failureThreshold": 0}}}, "/memnode/startupProbe/failureThreshold"),
        ({"prometheusRule": {"memoryFullRatio": 90}}, "/prometheusRule/memoryFullRatio"),
        ({"grafanaDashboard": {"labels": {"grafana_dashboard": 1}}}, "/grafanaDashboard/labels/grafana_dashboard"),
        ({"replication": 4}, "/replication"),
        ({"replication": 0}, "/replication"),
        ({"memnode": {"updateStrategy": "Recreate"}}, "/memnode/updateStrategy"),
        ({"memnode": {"persistence": {"enabled": True, "size": "1GB"}}}, "/memnode/persistence/size"),
        ({"memnode": {"persistence": {"enabled": True, "accessModes": ["ReadOnlyMany"]}}}, "/memnode/persistence/accessModes"),
        ({"memnode": {"zone": "eu west"}}, "/memnode/zone"),
        ({"memnode": {"podDisruptionBudget": {"maxUnavailable": -1}}}, "/memnode/podDisruptionBudget/maxUnavailable"),
        ({"memnode": {"minReadySeconds": -1}}, "/memnode/minReadySeconds"),
    ],
)
def test_schema_rejects_bad_values(values, complaint):
    report = lint(values)
    assert report["errors"], f"{values} passed the schema"
    assert any(complaint in e for e in report["errors"]), report["errors"]
    with pytest.raises(helm_python.HelmError):
        render(values)


def test_every_value_is_in_the_schema():
    """values.yaml and values.schema.json describe the same keys."""
    schema = helm_python.Chart.load(CHART).schema
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(values, node, path):
        props = node.get("properties")
        if props is None:
            return
        for key, value in values.items():
            assert key in props, f"{path}{key} is not in values.schema.json"
            sub = props[key]
            if "$ref" in sub:
                continue
            if isinstance(value, dict):
                walk(value, sub, f"{path}{key}.")

    walk(defaults, schema, "")
    for key in schema["properties"]:
        assert key in defaults or key == "global", f"schema key {key} has no default"


# --- Kubernetes validation ------------------------------------------------------------


def validate(tmp_path: Path, rendered: dict[str, str]) -> subprocess.CompletedProcess:
    files = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt") or not text.strip():
            continue
        f = tmp_path / path.replace("/", "__")
        f.write_text(text)
        files.append(str(f))
    return subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "-k", KUBE_VERSION, "--quiet", *files],
        capture_output=True,
        text=True,
        timeout=300,
    )


CUSTOM_RESOURCE_WARNING = re.compile(
    r"Couldn't find schema for kind (ServiceMonitor|PrometheusRule) with api version monitoring\.coreos\.com/v1"
)


def test_manifests_validate_strictly(scenario, tmp_path):
    out = validate(tmp_path, scenario_rendered(scenario))
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    # Custom resources have no bundled schema: kubernetes-validate warns and they are
    # checked below (and in test_observability.py) instead. Anything else is a failure.
    unexpected = [line for line in lines if not CUSTOM_RESOURCE_WARNING.search(line)]
    assert out.returncode == 0 and unexpected == [], "\n".join(lines)


def test_validation_catches_a_broken_manifest(tmp_path):
    """The validator really rejects what the API server would."""
    bad = {"x/bad.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  portz: []\n"}
    out = validate(tmp_path, bad)
    assert out.returncode != 0 and "portz" in out.stdout, out.stdout


def test_servicemonitors_are_well_formed():
    docs = scenario_docs("full")
    monitors = find(docs, "ServiceMonitor")
    # The soft switch is enabled in "full": it is scraped like the others.
    assert {m["metadata"]["labels"]["app.kubernetes.io/component"] for m in monitors} == {"metadata", "memnode", "accel"}
    services = find(docs, "Service")
    for m in monitors:
        assert m["apiVersion"] == "monitoring.coreos.com/v1"
        assert set(m["spec"]) <= {"selector", "namespaceSelector", "endpoints"}
        sel = m["spec"]["selector"]["matchLabels"]
        matched = [s for s in services if sel.items() <= s["metadata"]["labels"].items()]
        assert len(matched) == 1, f"{m['metadata']['name']} selects {len(matched)} services"
        port_names = {p["name"] for p in matched[0]["spec"]["ports"]}
        for ep in m["spec"]["endpoints"]:
            assert set(ep) <= {"port", "path", "interval", "scrapeTimeout"}
            assert ep["port"] in port_names and ep["path"] == "/metrics"
    assert not find(scenario_docs("default"), "ServiceMonitor")
    # Without the switch, no monitor for it.
    quiet = find(documents(render({"serviceMonitor": {"enabled": True}})), "ServiceMonitor")
    assert {m["metadata"]["labels"]["app.kubernetes.io/component"] for m in quiet} == {"metadata", "memnode"}


# --- flags and env against the real binaries ------------------------------------------


def test_container_args_are_real_flags(scenario):
    """Every option in a container's args (of its subcommand, when the binary has
    subcommands) and every DMKV_* env var it sets appear in that binary's --help.
    Binaries that are not built are reported and skipped, except memnode and metadata."""
    checked, skipped = [], []
    in_workspace = workspace_binaries()
    for w, c in containers(scenario_docs(scenario)):
        program = Path(c["command"][0]).name
        args = list(c.get("args", []))
        where = f"{w['metadata']['name']}/{c['name']}"
        text = help_text(program)
        if text is None:
            if program in {"memnode", "metadata"}:
                pytest.fail(f"{program} is not built (cargo build -p {program}), or its --help failed")
            why = "not built" if program in in_workspace else "not in this workspace"
            skipped.append(f"{program} ({why})")
            continue
        commands = help_commands(text)
        if commands:
            assert args and args[0] in commands, f"{where}: {program} wants one of {sorted(commands)}, got {args[:1]}"
            text = help_text(program, args[0])
            assert text is not None, f"{program} {args[0]} --help failed"
            args = args[1:]
        elif args and not args[0].startswith("-"):
            # A positional word (ycsb's load|run|loadrun, its binding) must be one the help names.
            assert re.search(rf"\b{re.escape(args[0])}\b", text), f"{where}: {program} knows no {args[0]!r}"
        flags = help_flags(text)
        unknown = [a for a in flag_args(args) if a not in flags]
        assert unknown == [], f"{where}: {program} has no {unknown}"
        envs = help_envs(text)
        dmkv_env = [e["name"] for e in c.get("env", []) if e["name"].startswith("DMKV_")]
        unknown_env = [e for e in dmkv_env if e not in envs]
        assert unknown_env == [], f"{where}: {program} reads no {unknown_env}"
        checked.append(program)
    assert "memnode" in checked and "metadata" in checked
    if skipped:
        print(f"note: flags not checked for {sorted(set(skipped))}", file=sys.stderr)


def test_help_parsing_sees_the_documented_flags():
    text = help_text("memnode")
    assert text is not None
    assert {"--listen", "--admin", "--capacity", "--hugepages", "--prefault", "--metadata", "--metadata-token-file", "--name"} <= help_flags(text)
    assert "DMKV_MEMNODE_METADATA_TOKEN_FILE" in help_envs(text)
    assert {"--listen", "--data-dir", "--token-file"} <= help_flags(help_text("metadata"))
    assert "--token" not in help_flags(help_text("metadata"))


# --- the metadata service -------------------------------------------------------------


def arg_after(args, flag):
    return args[args.index(flag) + 1]


def test_metadata_statefulset_with_storage_and_token():
    docs = scenario_docs("default")
    sts = one(docs, "StatefulSet", "metadata")
    assert sts["spec"]["replicas"] == 1
    c = pod_spec(sts)["containers"][0]
    assert arg_after(c["args"], "--listen") == "0.0.0.0:9700"
    assert arg_after(c["args"], "--data-dir") == "/data"
    assert {"name": "data", "mountPath": "/data"} in c["volumeMounts"]
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert "storageClassName" not in claim["spec"]
    svc = one(docs, "Service", "metadata")
    assert sts["spec"]["serviceName"] == svc["metadata"]["name"]
    assert svc["spec"]["ports"][0]["port"] == 9700
    # The token reaches the pod as a file from the Secret, not in its env or args.
    env = {e["name"]: e for e in c["env"]}
    assert env["DMKV_METADATA_TOKEN_FILE"]["value"] == TOKEN_FILE
    assert "DMKV_METADATA_TOKEN" not in env
    secret = one(docs, "Secret")
    assert token_volume(sts) == {"secretName": secret["metadata"]["name"], "defaultMode": 0o440,
                                 "items": [{"key": "token", "path": "token"}]}
    assert TOKEN_MOUNT in c["volumeMounts"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": "http"}


TOKEN_FILE = "/var/run/secrets/dmkv/token"
TOKEN_MOUNT = {"name": "token", "mountPath": "/var/run/secrets/dmkv", "readOnly": True}


def token_volume(workload):
    return next(v for v in pod_spec(workload)["volumes"] if v["name"] == "token")["secret"]


def test_generated_token_is_random_and_long():
    a = base64.b64decode(one(scenario_docs("default"), "Secret")["data"]["token"])
    b = base64.b64decode(one(documents(render({})), "Secret")["data"]["token"])
    assert len(a) == 40 and a.isalnum() and a != b


# Tokens whose checksum/auth reads as a YAML number unless quoted: all digits, digits
# around one "e", and digits with a leading zero (sha256("token:" + token)[:16]).
NUMERIC_CHECKSUM_TOKENS = {
    "fixed-token-16": "1718e15309430621",
    "fixed-token-272": "8887988613688000",
    "fixed-token-1617": "0931600406485288",
}


def auth_checksums(docs):
    """component -> checksum/auth annotation of each dmkv StatefulSet."""
    out = {}
    for sts in find(docs, "StatefulSet"):
        component = sts["metadata"]["labels"]["app.kubernetes.io/component"]
        out[component] = sts["spec"]["template"]["metadata"]["annotations"]["checksum/auth"]
    return out


@pytest.mark.parametrize("token", sorted(NUMERIC_CHECKSUM_TOKENS))
def test_auth_checksum_is_a_string_even_when_it_looks_like_a_number(token, tmp_path):
    rendered = render({"auth": {"token": token}})
    sums = auth_checksums(documents(rendered))
    assert set(sums) == {"memnode", "metadata"}
    for value in sums.values():
        assert isinstance(value, str), f"{value!r} rendered as {type(value).__name__}"
        assert value == NUMERIC_CHECKSUM_TOKENS[token]
    out = validate(tmp_path, rendered)
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    unexpected = [line for line in lines if not CUSTOM_RESOURCE_WARNING.search(line)]
    assert out.returncode == 0 and unexpected == [], "\n".join(lines)


def test_auth_checksum_is_stable_and_follows_the_token():
    # A generated token: both workloads agree, and a second render (the token is
    # regenerated there, or kept from the stored Secret on a real upgrade) rolls nothing.
    first, second = auth_checksums(documents(render({}))), auth_checksums(documents(render({})))
    assert len(set(first.values())) == 1 and first == second
    # An explicit token: the checksum is the token's, stable, and changes with it.
    a1 = auth_checksums(documents(render({"auth": {"token": "token-a"}})))
    a2 = auth_checksums(documents(render({"auth": {"token": "token-a"}})))
    b = auth_checksums(documents(render({"auth": {"token": "token-b"}})))
    assert a1 == a2 and len(set(a1.values())) == 1
    assert set(a1.values()).isdisjoint(b.values()) and set(a1.values()).isdisjoint(first.values())
    # An existing Secret: still annotated, as a string.
    existing = auth_checksums(documents(render({"auth": {"existingSecret": "mine"}})))
    assert len(set(existing.values())) == 1
    assert all(isinstance(v, str) for v in existing.values())


def test_given_token_and_existing_secret():
    given = one(documents(render({"auth": {"token": "given-token-change-me"}})), "Secret")
    assert base64.b64decode(given["data"]["token"]) == b"given-token-change-me"
    docs = scenario_docs("full")
    assert not find(docs, "Secret")
    for w, c in containers(docs):
        for e in c.get("env", []):
            if "TOKEN" in e["name"]:
                assert e["name"].endswith("_TOKEN_FILE") and e["value"] == TOKEN_FILE
        if any(m["name"] == "token" for m in c.get("volumeMounts", [])):
            assert token_volume(w)["secretName"] == "dmkv-token"
            assert token_volume(w)["items"] == [{"key": "bearer", "path": "token"}]


def test_persistence_off_uses_emptydir_and_storage_class_choices():
    sts = one(scenario_docs("full"), "StatefulSet", "metadata")
    assert "volumeClaimTemplates" not in sts["spec"]
    assert {"name": "data", "emptyDir": {}} in pod_spec(sts)["volumes"]
    assert "catalog is lost" in scenario_rendered("full")["dmkv/templates/NOTES.txt"]
    prod = one(scenario_docs("production"), "StatefulSet", "metadata")
    assert prod["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] == "fast-ssd"
    none = one(documents(render({"metadata": {"persistence": {"storageClass": "-"}}})), "StatefulSet", "metadata")
    assert none["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] == ""


# --- memnodes ---------------------------------------------------------------------------


def memnode(docs):
    sts = one(docs, "StatefulSet", "memnode")
    return sts, pod_spec(sts)["containers"][0]


def test_memnode_defaults():
    docs = scenario_docs("default")
    sts, c = memnode(docs)
    assert sts["spec"]["replicas"] == 2
    args = c["args"]
    assert arg_after(args, "--listen") == "$(POD_IP):4791"
    assert arg_after(args, "--admin") == "$(POD_IP):9791"
    assert arg_after(args, "--capacity") == "256MiB"
    assert "--hugepages" not in args
    # The capacity is in the pod's memory request and limit: it is made resident at start.
    assert "--prefault" in args
    meta_svc = one(docs, "Service", "metadata")
    assert arg_after(args, "--metadata") == f"http://{meta_svc['metadata']['name']}.{NAMESPACE}.svc:9700"
    assert arg_after(args, "--name") == "$(POD_NAME)"
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["DMKV_MEMNODE_METADATA_TOKEN_FILE"]["value"] == TOKEN_FILE
    assert TOKEN_MOUNT in c["volumeMounts"]
    ports = {(p["name"], p["containerPort"], p["protocol"]) for p in c["ports"]}
    assert ports == {("roce", 4791, "UDP"), ("admin", 9791, "TCP")}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    # Ready once registered at the metadata service (test_readiness_probe.py runs it).
    assert c["readinessProbe"]["exec"]["command"][:2] == ["bash", "-c"]
    res = c["resources"]
    assert res["requests"]["memory"] == res["limits"]["memory"] == "384Mi"  # 256Mi + 128Mi
    assert not any(k.startswith("hugepages") or "/" in k for k in res["requests"])
    spec = pod_spec(sts)
    assert not spec.get("hostNetwork")
    svc = one(docs, "Service", "memnode")
    assert svc["spec"]["clusterIP"] == "None" and sts["spec"]["serviceName"] == svc["metadata"]["name"]
    assert {(p["port"], p["protocol"]) for p in svc["spec"]["ports"]} == {(4791, "UDP"), (9791, "TCP")}


def test_memnode_prefault_can_be_turned_off():
    values = scenario_values("default")
    values.setdefault("memnode", {})["prefault"] = False
    _, c = memnode(documents(render(values)))
    assert "--prefault" not in c["args"]


def test_a_persistent_memnode_does_not_prefault_its_region_file():
    # Reading a whole region file back from its volume could outlast the startup probe.
    _, c = memnode(scenario_docs("production"))
    assert "--region-file" in c["args"]
    assert "--prefault" not in c["args"]


def test_memnode_hugepages_hostnetwork_rdma_are_opt_in():
    with_rdma = scenario_values("production")
    with_rdma["memnode"]["rdma"] = {"enabled": True, "resourceName": "rdma/rdma_shared_device_a"}
    with_rdma["memnode"]["hugepages"] = {"enabled": True}
    with_rdma["memnode"]["persistence"] = {"enabled": False}
    sts, c = memnode(documents(render(with_rdma)))
    assert "--hugepages" in c["args"] and arg_after(c["args"], "--capacity") == "8GiB"
    res = c["resources"]
    for side in ("requests", "limits"):
        assert res[side]["hugepages-2Mi"] == "8Gi"
        assert res[side]["memory"] == "512Mi"
        assert res[side]["rdma/rdma_shared_device_a"] == 1
    assert res["requests"]["cpu"] == "250m"
    spec = pod_spec(sts)
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert c["securityContext"]["capabilities"] == {"add": ["IPC_LOCK"], "drop": ["ALL"]}
    # The memnode serves through the device the plugin hands it.
    assert arg_after(c["args"], "--transport") == "rdma"
    assert arg_after(c["args"], "--rdma-device") == "mlx5_0"
    assert "--gid-index" not in c["args"]
    with_rdma["memnode"]["rdma"].update({"device": "mlx5_1", "gidIndex": 3})
    _, named = memnode(documents(render(with_rdma)))
    assert arg_after(named["args"], "--rdma-device") == "mlx5_1"
    assert arg_after(named["args"], "--gid-index") == "3"
    assert {"name": "hugepages", "emptyDir": {"medium": "HugePages-2Mi"}} in spec["volumes"]
    assert c["image"].endswith("@sha256:" + "0123456789abcdef" * 4)
    # Off by default.
    _, d = memnode(scenario_docs("default"))
    assert d["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "--transport" not in d["args"] and "--rdma-device" not in d["args"]


def test_memnode_capacity_in_gibibytes_adds_up():
    _, c = memnode(documents(render({"memnode": {"capacity": "2Gi", "memoryOverhead": "64Mi"}})))
    assert arg_after(c["args"], "--capacity") == "2GiB"
    assert c["resources"]["limits"]["memory"] == "2112Mi"


def test_memnode_bind_any():
    _, c = memnode(scenario_docs("full"))
    assert arg_after(c["args"], "--listen") == "0.0.0.0:4791"
    assert arg_after(c["args"], "--admin") == "0.0.0.0:9791"
    assert "port-forward" in scenario_rendered("full")["dmkv/templates/NOTES.txt"]


def test_pdb_selects_the_memnodes():
    docs = scenario_docs("default")
    pdb = one(docs, "PodDisruptionBudget")
    sts, _ = memnode(docs)
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # replication 1: no memnode may be evicted (test_upgrades.py covers 2 and 3).
    assert pdb["spec"]["maxUnavailable"] == 0
    assert one(scenario_docs("production"), "PodDisruptionBudget")["spec"]["maxUnavailable"] == 0
    assert one(scenario_docs("full"), "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    assert not find(scenario_docs("minimal"), "PodDisruptionBudget")


# --- production values ------------------------------------------------------------------


def test_production_values_are_production_values():
    """No experiment models, no debug logging, no token in values, no RDMA devices for
    binaries built without RDMA, persistent metadata, startup probes."""
    values = scenario_values("production")
    assert not values.get("auth", {}).get("token") and values["auth"]["existingSecret"]
    assert values["metadata"]["persistence"]["enabled"] is True
    assert not values["memnode"].get("rdma", {}).get("enabled")
    assert "rdma:" in (CHART / "ci" / "production-values.yaml").read_text(), "the commented RDMA example is gone"
    docs = scenario_docs("production")
    assert not find(docs, "Secret")
    for w, c in containers(docs):
        where = f"{w['metadata']['name']}/{c['name']}"
        args = c.get("args", [])
        assert not {"--lock-table", "--lock-table-hold-ns"} & set(flag_args(args)), where
        assert "random" not in [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--read-order"], where
        env = {e["name"]: e.get("value", "") for e in c.get("env", [])}
        assert not re.search(r"debug|trace", env.get("RUST_LOG", ""), re.IGNORECASE), where
        for side in ("requests", "limits"):
            assert not any(k.startswith("rdma/") for k in c["resources"].get(side, {})), where
        assert "IPC_LOCK" not in c["securityContext"]["capabilities"].get("add", []), where
    sts = one(docs, "StatefulSet", "metadata")
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "10Gi"
    # The memnodes keep their regions in files on claims and are rolled one at a time.
    mem = one(docs, "StatefulSet", "memnode")
    assert values["memnode"]["persistence"]["enabled"] is True
    assert [t["metadata"]["name"] for t in mem["spec"]["volumeClaimTemplates"]] == ["data"]
    assert mem["spec"]["updateStrategy"]["type"] == "RollingUpdate"


def test_services_have_startup_probes(scenario):
    """metadata, memnode and the switch get a startup probe on their health path, so a slow
    start (a big sled directory, gigabytes of huge pages) is not killed by liveness."""
    docs = scenario_docs(scenario)
    probed = {}
    for w, c in containers(docs):
        component = w["metadata"]["labels"]["app.kubernetes.io/component"]
        if component == "ycsb":
            assert "startupProbe" not in c
            continue
        probe = c["startupProbe"]
        assert probe["httpGet"] == c["livenessProbe"]["httpGet"], component
        budget = probe["periodSeconds"] * probe["failureThreshold"]
        assert 30 <= budget <= 600, f"{component}: {budget}s to start"
        assert probe["timeoutSeconds"] >= 1
        probed[component] = budget
    assert {"metadata", "memnode"} <= set(probed)
    tuned = one(documents(render({"memnode": {"startupProbe": {"periodSeconds": 5, "failureThreshold": 100}}})), "StatefulSet", "memnode")
    assert pod_spec(tuned)["containers"][0]["startupProbe"]["failureThreshold"] == 100


# --- every workload ---------------------------------------------------------------------


def test_security_contexts(scenario):
    for w, c in containers(scenario_docs(scenario)):
        pod = pod_spec(w)["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
        sc = c["securityContext"]
        where = f"{w['metadata']['name']}/{c['name']}"
        assert sc["readOnlyRootFilesystem"] is True, where
        assert sc["allowPrivilegeEscalation"] is False, where
        assert sc["capabilities"]["drop"] == ["ALL"], where
        assert set(sc["capabilities"].get("add", [])) <= {"IPC_LOCK"}, where
        assert not sc.get("privileged"), where
        assert pod_spec(w)["automountServiceAccountToken"] is False
        assert "resources" in c and c["resources"].get("requests"), where
        assert c["image"] and not c["image"].endswith(":latest"), where


def test_selectors_and_names_hold_together(scenario):
    docs = scenario_docs(scenario)
    pods = [w["spec"]["template"]["metadata"]["labels"] for w in workloads(docs)]
    for svc in find(docs, "Service"):
        sel = svc["spec"]["selector"]
        assert any(sel.items() <= p.items() for p in pods), svc["metadata"]["name"]
    for w in workloads(docs):
        if "selector" in w["spec"]:
            sel = w["spec"]["selector"]["matchLabels"]
            assert sel.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        assert w["metadata"]["namespace"] == NAMESPACE
        spec = pod_spec(w)
        sa = spec["serviceAccountName"]
        values = scenario_values(scenario)
        if values.get("serviceAccount", {}).get("create", True):
            assert sa in {d["metadata"]["name"] for d in find(docs, "ServiceAccount")}
        volumes = {v["name"] for v in spec.get("volumes", [])} | {
            t["metadata"]["name"] for t in w["spec"].get("volumeClaimTemplates", [])
        }
        for c in spec["containers"]:
            for m in c.get("volumeMounts", []):
                assert m["name"] in volumes, f"{w['metadata']['name']}: no volume {m['name']}"
            for probe in ("readinessProbe", "livenessProbe"):
                if probe in c and "httpGet" in c[probe]:
                    port = c[probe]["httpGet"]["port"]
                    assert port in {p["name"] for p in c["ports"]}
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert len(names) == len(set(names)), names
    for _, name in names:
        assert len(name) <= 63


def test_network_policies_admit_only_cluster_traffic(scenario):
    docs = scenario_docs(scenario)
    policies = find(docs, "NetworkPolicy")
    values = scenario_values(scenario)
    if values.get("networkPolicy", {}).get("enabled") is False:
        assert policies == []
        return
    for w in workloads(docs):
        labels = w["spec"]["template"]["metadata"]["labels"]
        mine = [p for p in policies if p["spec"]["podSelector"]["matchLabels"].items() <= labels.items()]
        assert len(mine) == 1, f"{w['metadata']['name']} is selected by {len(mine)} policies"
        policy = mine[0]["spec"]
        assert policy["policyTypes"] == ["Ingress"]
        admitted = {
            (p["protocol"], p["port"]) for rule in policy.get("ingress", []) for p in rule["ports"]
        }
        for c in pod_spec(w)["containers"]:
            for p in c.get("ports", []):
                assert (p["protocol"], p["containerPort"]) in admitted, f"{w['metadata']['name']} {p}"
        for rule in policy.get("ingress", []):
            for peer in rule["from"]:
                if "ipBlock" in peer:
                    net = ipaddress.ip_network(peer["ipBlock"]["cidr"])
                    assert net.prefixlen > 0 and net.is_private, peer
                else:
                    assert peer in ({"namespaceSelector": {}}, {"podSelector": {}}), peer
    want = {"podSelector": {}} if values.get("networkPolicy", {}).get("from") == "namespace" else {"namespaceSelector": {}}
    assert want in one(docs, "NetworkPolicy", "memnode")["spec"]["ingress"][0]["from"]


# --- optional components ------------------------------------------------------------------


def test_optional_components_off_by_default():
    docs = scenario_docs("default")
    assert not find(docs, "Deployment") and not find(docs, "Job")
    assert not find(docs, "ServiceMonitor")


def test_accelerator_and_ycsb_when_enabled():
    docs = scenario_docs("full")
    dep = one(docs, "Deployment", "accel")
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    c = pod_spec(dep)["containers"][0]
    assert c["image"] == "dmkv-accel:dev"
    assert c["command"] == ["accel-p4"]
    assert c["args"][0] == "serve"
    assert arg_after(c["args"], "--client-side") == "$(POD_IP):4791"
    assert arg_after(c["args"], "--memnode-side") == "$(POD_IP):4792"
    assert arg_after(c["args"], "--admin") == "0.0.0.0:9400"
    assert arg_after(c["args"], "--mode") == "switch_atomics"
    assert {"name": "state", "mountPath": "/state"} in c["volumeMounts"]
    svc = one(docs, "Service", "accel")
    assert svc["spec"]["clusterIP"] == "None"
    assert {(p["port"], p["protocol"]) for p in svc["spec"]["ports"]} == {(4791, "UDP"), (9400, "TCP")}
    job = one(docs, "Job", "ycsb")
    jc = pod_spec(job)["containers"][0]
    assert pod_spec(job)["restartPolicy"] == "Never"
    assert jc["command"] == ["ycsb"] and jc["args"][:2] == ["loadrun", "dmkv"]
    assert arg_after(jc["args"], "-P") == "/usr/local/share/dmkv/workloads/workloada"
    assert jc["image"] == "dmkv:0.1.0"
    assert job["metadata"]["name"].endswith("-ycsb-1")
    # The YCSB job exercises this release: the dmkv binding, the release's metadata
    # service, the token from the Secret in a file whose path is in the args (the token
    # itself never is: `ps` shows them).
    props = dict(a.split("=", 1) for a in jc["args"] if "=" in a)
    meta_svc = one(docs, "Service", "metadata")
    assert props["dmkv.metadata"] == f"http://{meta_svc['metadata']['name']}.{NAMESPACE}.svc:9700"
    assert "dmkv.token" not in props
    assert props["dmkv.table"] == "ycsb-1"
    assert props["dmkv.credential_file"] == TOKEN_FILE
    env = {e["name"]: e for e in jc["env"]}
    assert "DMKV_TOKEN" not in env
    assert token_volume(job)["secretName"] == "dmkv-token"
    assert token_volume(job)["items"] == [{"key": "bearer", "path": "token"}]
    assert TOKEN_MOUNT in jc["volumeMounts"]
    # The metadata service advertises the switch to clients (and scrapes it).
    meta = pod_spec(one(docs, "StatefulSet", "metadata"))["containers"][0]
    assert arg_after(meta["args"], "--accelerator") == f"http://{svc['metadata']['name']}.{NAMESPACE}.svc:9400"
    assert "--accelerator" not in pod_spec(one(scenario_docs("default"), "StatefulSet", "metadata"))["containers"][0]["args"]


def test_help_parsing_of_subcommands_and_java_style_options():
    text = "Usage: x <COMMAND>\n\nCommands:\n  serve     Run\n  help      Help\n\nOptions:\n  -h, --help  Print help\n"
    assert help_commands(text) == {"serve", "help"}
    assert help_flags(text) == {"-h", "--help"}
    ycsb = "Options:\n  -P FILE           workload file\n  -threads N        OS threads\n  --json FILE       append\n"
    assert help_flags(ycsb) == {"-P", "-threads", "--json"}
    assert flag_args(["loadrun", "-P", "f", "-p", "a=b", "--x=1", "-1"]) == ["-P", "-p", "--x"]


# --- NOTES ------------------------------------------------------------------------------


def test_notes_tell_how_to_reach_the_admin_api():
    notes = scenario_rendered("default")["dmkv/templates/NOTES.txt"]
    assert f"kubectl port-forward -n {NAMESPACE} svc/{RELEASE}-dmkv-metadata 9700:9700" in notes
    assert f"kubectl get secret -n {NAMESPACE} {RELEASE}-dmkv-auth" in notes
    assert "Authorization: Bearer $DMKV_TOKEN" in notes
    assert "/v1/openapi.json" in notes
    assert f"{RELEASE}-dmkv-memnode-0.{RELEASE}-dmkv-memnode.{NAMESPACE}.svc:9791" in notes


def test_notes_link_the_dashboard_and_the_monitoring_parts():
    notes = scenario_rendered("default")["dmkv/templates/NOTES.txt"]
    forward = f"kubectl port-forward -n {NAMESPACE} svc/{RELEASE}-dmkv-metadata 9700:9700"
    assert forward in notes and "Dashboard: http://127.0.0.1:9700/ " in notes
    assert notes.index(forward) < notes.index("Dashboard: http://127.0.0.1:9700/")
    assert "PrometheusRule" not in notes and "Grafana" not in notes
    prod = scenario_rendered("production")["dmkv/templates/NOTES.txt"]
    assert f"PrometheusRule {RELEASE}-dmkv " in prod and f"ConfigMap {RELEASE}-dmkv-dashboard" in prod
    full = scenario_rendered("full")["dmkv/templates/NOTES.txt"]
    assert "the memnodes and the soft switch" in full and "the soft switch's counters" in full
    assert "WARNING: prometheusRule.enabled without serviceMonitor" not in prod
    alone = render({"prometheusRule": {"enabled": True}})["dmkv/templates/NOTES.txt"]
    assert "WARNING: prometheusRule.enabled without serviceMonitor.enabled" in alone
