"""The chart's `lookup`s against a stored Secret. helm-python-sdk renders cluster-aware
with Config.render (lookup asks the API server; Chart.render answers every lookup with
nothing), so these tests point it at a stub Kubernetes API on loopback that serves the
discovery document of core/v1 and the Secrets they store, and check that a re-render or
an upgrade rolls no pod unless the token really changed."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import helm_python
from conftest import CHART, NAMESPACE, RELEASE, documents, find, one, render


class StubApiServer:
    """The two API calls behind `lookup "v1" "Secret" ns name`: GET /api/v1 (to map the
    kind to its resource) and GET /api/v1/namespaces/<ns>/secrets/<name>."""

    def __init__(self):
        self.secrets: dict[tuple[str, str], dict[str, str]] = {}
        self.requests: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                stub.requests.append(self.path)
                path = self.path.split("?")[0].strip("/").split("/")
                if path == ["api", "v1"]:
                    return self.answer(200, {
                        "kind": "APIResourceList",
                        "groupVersion": "v1",
                        "resources": [{"name": "secrets", "singularName": "secret", "namespaced": True, "kind": "Secret", "verbs": ["get", "list"]}],
                    })
                if len(path) == 6 and path[:3] == ["api", "v1", "namespaces"] and path[4] == "secrets":
                    data = stub.secrets.get((path[3], path[5]))
                    if data is not None:
                        return self.answer(200, {
                            "apiVersion": "v1",
                            "kind": "Secret",
                            "metadata": {"name": path[5], "namespace": path[3]},
                            "type": "Opaque",
                            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
                        })
                self.answer(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def cluster():
    stub = StubApiServer()
    try:
        yield stub
    finally:
        stub.close()


def render_against(stub: StubApiServer, values: dict, upgrade: bool = False) -> list[dict]:
    chart = helm_python.Chart.load(CHART)
    with helm_python.Config(kube_apiserver=stub.url, namespace=NAMESPACE) as cfg:
        rendered = cfg.render(
            chart, values, name=RELEASE, namespace=NAMESPACE, is_install=not upgrade, is_upgrade=upgrade
        )
    return documents(rendered)


def checksums(docs) -> dict[str, str]:
    return {
        s["metadata"]["labels"]["app.kubernetes.io/component"]: s["spec"]["template"]["metadata"]["annotations"]["checksum/auth"]
        for s in find(docs, "StatefulSet")
    }


def digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def test_lookup_reaches_the_stub(cluster):
    cluster.secrets[(NAMESPACE, "mine")] = {"token": "stored-token"}
    render_against(cluster, {"auth": {"existingSecret": "mine"}})
    assert any(r.split("?")[0] == f"/api/v1/namespaces/{NAMESPACE}/secrets/mine" for r in cluster.requests), cluster.requests


def test_existing_secret_checksum_follows_the_stored_token(cluster):
    values = {"auth": {"existingSecret": "mine"}}
    cluster.secrets[(NAMESPACE, "mine")] = {"token": "stored-token"}
    first, second = checksums(render_against(cluster, values)), checksums(render_against(cluster, values, upgrade=True))
    # Stable across renders, the same on every workload, a quoted string, and the token's.
    assert first == second and set(first) == {"metadata", "memnode"}
    assert set(first.values()) == {digest("token:stored-token")}
    # Rotating the stored token rolls the pods on the next upgrade, and only then.
    cluster.secrets[(NAMESPACE, "mine")] = {"token": "rotated-token"}
    rotated = checksums(render_against(cluster, values, upgrade=True))
    assert set(rotated.values()) == {digest("token:rotated-token")}
    assert rotated == checksums(render_against(cluster, values, upgrade=True))


def test_existing_secret_without_the_key_or_offline(cluster):
    """A Secret without the key (or no cluster to ask) hashes the Secret's name and key,
    the same online and offline."""
    values = {"auth": {"existingSecret": "mine", "secretKey": "bearer"}}
    cluster.secrets[(NAMESPACE, "mine")] = {"token": "in-another-key"}
    online = checksums(render_against(cluster, values))
    offline = checksums(documents(render(values)))
    assert online == offline and set(online.values()) == {digest("secret:mine/bearer")}


def test_generated_token_is_kept_and_rolls_nothing_on_upgrade(cluster):
    """On upgrade the chart's Secret keeps the stored token (no new random one), and the
    checksum is the same as on install: an upgrade that changes nothing rolls nothing."""
    install = render_against(cluster, {})
    token = base64.b64decode(one(install, "Secret")["data"]["token"]).decode()
    cluster.secrets[(NAMESPACE, f"{RELEASE}-dmkv-auth")] = {"token": token}
    upgrades = [render_against(cluster, {}, upgrade=True) for _ in range(2)]
    for docs in upgrades:
        assert base64.b64decode(one(docs, "Secret")["data"]["token"]).decode() == token
        assert checksums(docs) == checksums(install)
    assert set(checksums(install).values()) == {digest(f"generated:{RELEASE}-dmkv-auth/token")}


def test_given_token_ignores_the_stored_one(cluster):
    cluster.secrets[(NAMESPACE, f"{RELEASE}-dmkv-auth")] = {"token": "old"}
    docs = render_against(cluster, {"auth": {"token": "new-token"}}, upgrade=True)
    assert base64.b64decode(one(docs, "Secret")["data"]["token"]) == b"new-token"
    assert set(checksums(docs).values()) == {digest("token:new-token")}
    assert all(isinstance(v, str) for v in checksums(docs).values())
