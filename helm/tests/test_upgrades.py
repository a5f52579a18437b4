"""Updates lose no data: the memnodes' region files on PersistentVolumeClaims
(memnode.persistence), the update strategy that follows from it (RollingUpdate one
memnode at a time with persistence, OnDelete without), the PodDisruptionBudget that
follows the tables' replication factor, the failure-domain (--zone) arguments, and the
checks that refuse configurations that cannot work. Every render here also passes
kubernetes-validate --strict and a strict lint."""

from __future__ import annotations

import pytest

import helm_python
from conftest import NAMESPACE, RELEASE, documents, one, pod_spec, render, scenario_docs
from test_chart import CUSTOM_RESOURCE_WARNING, WARNING, arg_after, lint, validate

PERSISTENT = {"memnode": {"persistence": {"enabled": True}}}


def memnode(values):
    sts = one(documents(render(values)), "StatefulSet", "memnode")
    return sts, pod_spec(sts)["containers"][0]


def assert_valid(values, tmp_path):
    """Strict Kubernetes validation of the render and a strict lint without warnings."""
    out = validate(tmp_path, render(values))
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    unexpected = [line for line in lines if not CUSTOM_RESOURCE_WARNING.search(line)]
    assert out.returncode == 0 and unexpected == [], "\n".join(lines)
    report = lint(values)
    assert report["errors"] == [], report
    assert [m for m in report["messages"] if m["severity"] >= WARNING] == []


def render_fails(values, complaint):
    with pytest.raises(helm_python.HelmError) as err:
        render(values)
    assert complaint in str(err.value), str(err.value)


# --- persistence ------------------------------------------------------------------------


def test_without_persistence_no_claim_and_no_region_file(tmp_path):
    sts, c = memnode({})
    assert "volumeClaimTemplates" not in sts["spec"]
    assert "persistentVolumeClaimRetentionPolicy" not in sts["spec"]
    assert "--region-file" not in c["args"]
    assert [m["mountPath"] for m in c["volumeMounts"]] == ["/tmp", "/var/run/secrets/dmkv", "/etc/dmkv/auth"]
    assert {v["name"] for v in pod_spec(sts)["volumes"]} == {"tmp", "token", "auth"}
    assert_valid({}, tmp_path)


def test_with_persistence_the_region_lives_in_a_file_on_the_claim(tmp_path):
    sts, c = memnode(PERSISTENT)
    assert arg_after(c["args"], "--region-file") == "/data/region"
    assert {"name": "data", "mountPath": "/data"} in c["volumeMounts"]
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["metadata"]["labels"]["app.kubernetes.io/component"] == "memnode"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert "storageClassName" not in claim["spec"]
    # 256Mi + 256Mi/8 + 128Mi: the filesystem's reserved blocks, inodes and journal.
    assert claim["spec"]["resources"]["requests"]["storage"] == "416Mi"
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    # The mapped file's pages are charged to the pod: the limit still covers the region.
    assert c["resources"]["limits"]["memory"] == c["resources"]["requests"]["memory"] == "384Mi"
    assert_valid(PERSISTENT, tmp_path)


@pytest.mark.parametrize(
    "capacity, size",
    [("64Mi", "200Mi"), ("1Gi", "1280Mi"), ("8Gi", "9344Mi")],
)
def test_claim_size_defaults_to_capacity_and_a_margin(capacity, size):
    sts, _ = memnode({"memnode": {"capacity": capacity, "persistence": {"enabled": True}}})
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == size


def test_claim_size_class_and_access_modes_are_values(tmp_path):
    values = {
        "memnode": {
            "persistence": {
                "enabled": True,
                "size": "20Gi",
                "storageClassName": "fast-ssd",
                "accessModes": ["ReadWriteOncePod"],
            }
        }
    }
    sts, _ = memnode(values)
    spec = sts["spec"]["volumeClaimTemplates"][0]["spec"]
    assert spec["resources"]["requests"]["storage"] == "20Gi"
    assert spec["storageClassName"] == "fast-ssd"
    assert spec["accessModes"] == ["ReadWriteOncePod"]
    assert_valid(values, tmp_path)
    none, _ = memnode({"memnode": {"persistence": {"enabled": True, "storageClassName": "-"}}})
    assert none["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] == ""


def test_persistence_and_hugepages_exclude_each_other():
    render_fails(
        {"memnode": {"persistence": {"enabled": True}, "hugepages": {"enabled": True}}},
        "memnode.persistence.enabled and memnode.hugepages.enabled exclude each other",
    )


# --- update strategy ----------------------------------------------------------------------


def test_without_persistence_memnodes_wait_for_the_operator(tmp_path):
    sts, _ = memnode({})
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert sts["spec"]["podManagementPolicy"] == "OrderedReady"
    assert sts["spec"]["minReadySeconds"] == 10
    notes = render({})["dmkv/templates/NOTES.txt"]
    assert "Memnode updates: OnDelete" in notes and "comes back empty" in notes
    assert f"kubectl delete pod -n {NAMESPACE} {RELEASE}-dmkv-memnode-0" in notes


def test_with_persistence_memnodes_roll_one_at_a_time(tmp_path):
    sts, _ = memnode(PERSISTENT)
    assert sts["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "partition": 0},
    }
    assert sts["spec"]["podManagementPolicy"] == "OrderedReady"
    assert sts["spec"]["minReadySeconds"] == 10
    notes = render(PERSISTENT)["dmkv/templates/NOTES.txt"]
    assert "Memnode updates: RollingUpdate, one memnode at a time" in notes
    assert "WARNING: memnode.updateStrategy" not in notes
    tuned, _ = memnode({"memnode": {"persistence": {"enabled": True}, "minReadySeconds": 30}})
    assert tuned["spec"]["minReadySeconds"] == 30


def test_update_strategy_override_both_ways(tmp_path):
    rolling = {"memnode": {"updateStrategy": "RollingUpdate"}}
    sts, _ = memnode(rolling)
    assert sts["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    # Not silent: the notes say what such an update does.
    notes = render(rolling)["dmkv/templates/NOTES.txt"]
    assert "WARNING: memnode.updateStrategy is RollingUpdate without memnode.persistence" in notes
    assert_valid(rolling, tmp_path)
    on_delete = {"memnode": {"updateStrategy": "OnDelete", "persistence": {"enabled": True}}}
    sts, _ = memnode(on_delete)
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
    notes = render(on_delete)["dmkv/templates/NOTES.txt"]
    assert "Memnode updates: OnDelete" in notes and "comes back empty" not in notes


def test_readiness_waits_for_registration_unless_told_otherwise():
    _, c = memnode({})
    probe = c["readinessProbe"]
    command = probe["exec"]["command"]
    assert command[:2] == ["bash", "-c"]
    assert f"/dev/tcp/{RELEASE}-dmkv-metadata.{NAMESPACE}.svc/9700" in command[2]
    assert "GET /v1/memnodes" in command[2] and "$POD_NAME" in command[2]
    assert (probe["periodSeconds"], probe["failureThreshold"], probe["timeoutSeconds"]) == (5, 3, 3)
    # Liveness stays on the memnode's own health.
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    _, plain = memnode({"memnode": {"readinessProbe": {"requireRegistration": False}}})
    assert plain["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert "exec" not in plain["readinessProbe"]


# --- the PodDisruptionBudget follows the replication factor --------------------------------


@pytest.mark.parametrize("replication, max_unavailable", [(1, 0), (2, 1), (3, 2)])
def test_pdb_follows_replication(replication, max_unavailable, tmp_path):
    values = {"replication": replication, "memnode": {"replicas": 3}}
    pdb = one(documents(render(values)), "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == max_unavailable
    assert_valid(values, tmp_path)


def test_pdb_override_and_notes():
    for given in (2, "50%"):
        values = {"replication": 2, "memnode": {"podDisruptionBudget": {"maxUnavailable": given}}}
        assert one(documents(render(values)), "PodDisruptionBudget")["spec"]["maxUnavailable"] == given
    assert "allows no memnode down (replication 1)" in render({})["dmkv/templates/NOTES.txt"]
    assert "allows no memnode down" not in render({"replication": 2})["dmkv/templates/NOTES.txt"]


def test_replication_needs_enough_memnodes():
    render_fails({"replication": 3}, "replication 3 needs at least 3 memnodes, memnode.replicas is 2")


def test_ycsb_creates_its_table_with_the_replication():
    job = one(documents(render({"replication": 2, "ycsb": {"enabled": True}})), "Job", "ycsb")
    args = pod_spec(job)["containers"][0]["args"]
    assert "dmkv.replication=2" in args
    default = one(scenario_docs("full"), "Job", "ycsb")
    assert "dmkv.replication=1" in pod_spec(default)["containers"][0]["args"]


# --- zones ----------------------------------------------------------------------------------


def test_no_zone_by_default():
    _, c = memnode({})
    assert "--zone" not in c["args"]
    assert "NODE_NAME" not in {e["name"] for e in c["env"]}


def test_zone_from_a_value(tmp_path):
    values = {"memnode": {"zone": "eu-west-1a"}}
    _, c = memnode(values)
    assert arg_after(c["args"], "--zone") == "eu-west-1a"
    assert "NODE_NAME" not in {e["name"] for e in c["env"]}
    assert_valid(values, tmp_path)


def test_zone_from_the_node_name(tmp_path):
    values = {"memnode": {"zoneFromNode": True}}
    _, c = memnode(values)
    assert arg_after(c["args"], "--zone") == "$(NODE_NAME)"
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert_valid(values, tmp_path)


def test_zone_and_zone_from_node_exclude_each_other():
    render_fails({"memnode": {"zone": "a", "zoneFromNode": True}}, "memnode.zone and memnode.zoneFromNode exclude each other")
