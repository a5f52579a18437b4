"""tls.enabled: the certificate Secret is mounted into the metadata, memnode and
accelerator pods, which get --tls-cert-file/--tls-key-file/--tls-ca-file (flags their
binaries really have), probe over HTTPS and reach each other by https:// URLs; the
YCSB job trusts the CA; the ServiceMonitors scrape over HTTPS; the schema insists on a
Secret name."""

from __future__ import annotations

import pytest

import helm_python
from conftest import (
    NAMESPACE,
    flag_args,
    help_flags,
    help_text,
    one,
    pod_spec,
    render,
    documents,
)
from test_chart import lint

TLS = {"tls": {"enabled": True, "secretName": "dmkv-tls"}}
WITH_EVERYTHING = {
    **TLS,
    "accel": {"enabled": True},
    "ycsb": {"enabled": True},
    "serviceMonitor": {"enabled": True},
}
TLS_DIR = "/etc/dmkv/tls"


def docs(values):
    return documents(render(values))


def container(d, kind, component):
    return pod_spec(one(d, kind, component))["containers"][0]


def probes(c):
    return [c[p] for p in ("startupProbe", "readinessProbe", "livenessProbe") if p in c]


def arg_after(args, flag):
    return args[args.index(flag) + 1]


@pytest.mark.parametrize(
    "kind,component",
    [("StatefulSet", "metadata"), ("StatefulSet", "memnode"), ("Deployment", "accel")],
)
def test_servers_mount_the_secret_pass_the_flags_and_probe_over_https(kind, component):
    d = docs(WITH_EVERYTHING)
    w = one(d, kind, component)
    c = pod_spec(w)["containers"][0]
    assert arg_after(c["args"], "--tls-cert-file") == f"{TLS_DIR}/tls.crt"
    assert arg_after(c["args"], "--tls-key-file") == f"{TLS_DIR}/tls.key"
    assert arg_after(c["args"], "--tls-ca-file") == f"{TLS_DIR}/ca.crt"
    assert {"name": "tls", "mountPath": TLS_DIR, "readOnly": True} in c["volumeMounts"]
    assert {"name": "tls", "secret": {"secretName": "dmkv-tls"}} in pod_spec(w)["volumes"]
    for p in probes(c):
        assert p["httpGet"]["scheme"] == "HTTPS", p


def test_services_reach_each_other_by_https_urls():
    d = docs(WITH_EVERYTHING)
    memnode = container(d, "StatefulSet", "memnode")
    assert arg_after(memnode["args"], "--metadata").startswith("https://")
    metadata = container(d, "StatefulSet", "metadata")
    assert arg_after(metadata["args"], "--accelerator").startswith("https://")
    job = container(d, "Job", "ycsb")
    props = dict(a.split("=", 1) for a in job["args"] if "=" in a)
    assert props["dmkv.metadata"].startswith("https://")
    assert props["dmkv.metadata"].endswith(f".{NAMESPACE}.svc:9700")
    env = {e["name"]: e.get("value") for e in job["env"]}
    assert env["DMKV_TLS_CA_FILE"] == f"{TLS_DIR}/ca.crt"
    assert {"name": "tls", "mountPath": TLS_DIR, "readOnly": True} in job["volumeMounts"]


def test_memnode_readiness_falls_back_to_the_https_health_check():
    # The registration check speaks plain HTTP from bash; with TLS the HTTPS health
    # check stands in for it.
    values = {**TLS, "memnode": {"readinessProbe": {"requireRegistration": True}}}
    c = container(docs(values), "StatefulSet", "memnode")
    assert "exec" not in c["readinessProbe"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin", "scheme": "HTTPS"}


def test_service_monitors_scrape_over_https_trusting_the_ca():
    d = docs(WITH_EVERYTHING)
    monitors = [x for x in d if x["kind"] == "ServiceMonitor"]
    assert len(monitors) == 3
    for m in monitors:
        (endpoint,) = m["spec"]["endpoints"]
        assert endpoint["scheme"] == "https"
        assert endpoint["tlsConfig"] == {"ca": {"secret": {"name": "dmkv-tls", "key": "ca.crt"}}}


def test_without_tls_nothing_changes():
    d = docs({"accel": {"enabled": True}})
    for kind, component in [("StatefulSet", "metadata"), ("StatefulSet", "memnode"), ("Deployment", "accel")]:
        c = container(d, kind, component)
        assert not [a for a in c["args"] if a.startswith("--tls")]
        assert all(m["name"] != "tls" for m in c["volumeMounts"])
        for p in probes(c):
            if "httpGet" in p:
                assert p["httpGet"].get("scheme", "HTTP") == "HTTP"
    assert arg_after(container(d, "StatefulSet", "memnode")["args"], "--metadata").startswith("http://")


def test_the_tls_flags_are_real_flags():
    d = docs(WITH_EVERYTHING)
    for kind, component, program in [
        ("StatefulSet", "metadata", "metadata"),
        ("StatefulSet", "memnode", "memnode"),
    ]:
        text = help_text(program)
        if text is None:
            pytest.fail(f"{program} is not built (cargo build -p {program})")
        c = container(d, kind, component)
        tls_flags = [a for a in flag_args(c["args"]) if a.startswith("--tls")]
        assert tls_flags == ["--tls-cert-file", "--tls-key-file", "--tls-ca-file"]
        assert set(tls_flags) <= help_flags(text), f"{program} lacks {tls_flags}"


def test_the_schema_wants_a_secret_name_with_tls():
    report = lint({"tls": {"enabled": True}})
    assert report["errors"], "tls.enabled without tls.secretName passed the schema"
    assert any("secretName" in e for e in report["errors"]), report["errors"]
    with pytest.raises(helm_python.HelmError):
        render({"tls": {"enabled": True}})
    assert not lint(TLS)["errors"]
    assert not lint({"tls": {"enabled": False}})["errors"]
