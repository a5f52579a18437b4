"""The rendered containers really start: run the metadata service and a memnode with the
exact args and env the chart renders (only the in-cluster addresses are swapped for
loopback ones, the volume for a temporary directory, the Secret for a literal token), and
check that the memnode registers under its pod name at its data address, that the
token from the Secret guards the API and that the memory node admin token mounted from
the Secret guards the memnode's. Then the YCSB Job's container runs against them
(its record and operation counts scaled down): the dmkv binding reaches the release's
metadata service with the Secret's token and loads and runs its table."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import NAMESPACE, ROOT, binary, documents, one, pod_spec, render

TOKEN = "rendered-args-token"
# Where the chart mounts the token from the Secret, and a local file standing in for it.
TOKEN_FILE = "/var/run/secrets/dmkv/token"


def local_token_file() -> str:
    path = Path(tempfile.gettempdir()) / f"dmkv-rendered-token-{os.getpid()}"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return str(path)

MEMNODE_TOKEN = "rendered-args-memnode-admin-token"
GRANT_KEY = "rendered-args-grant-key-0123456789"
DEADLINE_S = 20.0


def free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body: dict | None = None, token: str | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else {}
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw else {}


def wait_for(what: str, check, procs):
    deadline = time.monotonic() + DEADLINE_S
    last = None
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"{p.args[0]} exited with {p.returncode} while waiting for {what}")
        try:
            got = check()
            if got:
                return got
        except (OSError, urllib.error.URLError) as e:
            last = e
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what} (last error: {last})")


def container_env(c: dict, fields: dict[str, str]) -> dict[str, str]:
    """The container's env with fieldRefs, secretKeyRefs and the token file resolved
    locally."""
    env = {}
    for e in c.get("env", []):
        if e.get("value") == TOKEN_FILE:
            env[e["name"]] = local_token_file()
        elif "value" in e:
            env[e["name"]] = e["value"]
        elif "secretKeyRef" in e.get("valueFrom", {}):
            env[e["name"]] = TOKEN
        else:
            env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def expand(arg: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of container args."""
    for name, value in env.items():
        arg = arg.replace(f"$({name})", value)
    return arg


def start(path: Path, args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
    return subprocess.Popen(
        [str(path), *args],
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )


def test_rendered_containers_start_and_register(tmp_path):
    metadata_bin, memnode_bin = binary("metadata"), binary("memnode")
    if metadata_bin is None or memnode_bin is None:
        pytest.fail("memnode and metadata must be built (cargo build -p memnode -p metadata)")
    docs = documents(render({"memnode": {"replicas": 1, "capacity": "16Mi"}, "ycsb": {"enabled": True}}))
    meta_c = pod_spec(one(docs, "StatefulSet", "metadata"))["containers"][0]
    mem_c = pod_spec(one(docs, "StatefulSet", "memnode"))["containers"][0]
    meta_svc = one(docs, "Service", "metadata")

    meta_port = free_port(socket.SOCK_STREAM)
    admin_port = free_port(socket.SOCK_STREAM)
    data_port = free_port(socket.SOCK_DGRAM)
    cluster_url = f"http://{meta_svc['metadata']['name']}.{NAMESPACE}.svc:{meta_svc['spec']['ports'][0]['port']}"
    local_url = f"http://127.0.0.1:{meta_port}"
    pod_name = "rel-dmkv-memnode-0"

    # Only these in-cluster specifics change; every flag and value is the rendered one.
    data_dir = tmp_path / "data"
    # The Secret's files, as the pods see them under /etc/dmkv/auth.
    auth_dir = tmp_path / "auth"
    auth_dir.mkdir()
    (auth_dir / "memnode-admin-token").write_text(MEMNODE_TOKEN + "\n")
    (auth_dir / "grant-key").write_text(GRANT_KEY + "\n")
    swaps = {
        "/etc/dmkv/auth/memnode-admin-token": str(auth_dir / "memnode-admin-token"),
        "/etc/dmkv/auth/grant-key": str(auth_dir / "grant-key"),
        "0.0.0.0:9700": f"127.0.0.1:{meta_port}",
        "/data": str(data_dir),
        cluster_url: local_url,
        "127.0.0.1:4791": f"127.0.0.1:{data_port}",
        "127.0.0.1:9791": f"127.0.0.1:{admin_port}",
    }
    fields = {"metadata.name": pod_name, "status.podIP": "127.0.0.1"}

    meta_env = container_env(meta_c, fields)
    meta_args = [swaps.get(a, a) for a in (expand(a, meta_env) for a in meta_c["args"])]
    assert cluster_url in mem_c["args"], "the memnode does not point at the metadata Service"
    mem_env = container_env(mem_c, fields)
    mem_args = [swaps.get(a, a) for a in (expand(a, mem_env) for a in mem_c["args"])]
    # The token reaches both as a file from the Secret, never as a value.
    assert "DMKV_METADATA_TOKEN_FILE" in meta_env and "DMKV_MEMNODE_METADATA_TOKEN_FILE" in mem_env
    assert TOKEN not in str(meta_c) + str(mem_c)
    assert "--admin-token-file" in mem_args and "--memnode-token-file" in meta_args

    procs = []
    try:
        procs.append(start(metadata_bin, meta_args, meta_env, tmp_path / "metadata.log"))
        wait_for("metadata /healthz", lambda: http("GET", f"{local_url}/healthz")[0] == 200, procs)
        procs.append(start(memnode_bin, mem_args, mem_env, tmp_path / "memnode.log"))
        wait_for(
            "memnode /healthz",
            lambda: http("GET", f"http://127.0.0.1:{admin_port}/healthz")[0] == 200,
            procs,
        )

        def registered():
            status, body = http("GET", f"{local_url}/v1/memnodes", token=TOKEN)
            return status == 200 and [m for m in body["memnodes"] if m["name"] == pod_name]

        (node,) = wait_for("the memnode's registration", registered, procs)
        assert node["data_addr"] == f"127.0.0.1:{data_port}"
        assert node["admin_url"] == f"http://127.0.0.1:{admin_port}"
        assert node["capacity"] == 16 << 20
        assert node["healthy"] is True
        # The memory node's admin API takes the admin token from the mounted file.
        assert http("GET", f"http://127.0.0.1:{admin_port}/v1/regions")[0] == 401
        assert http("GET", f"http://127.0.0.1:{admin_port}/v1/regions", token=MEMNODE_TOKEN)[0] == 200

        table = {"name": "smoke", "index": "clover", "value_limit": 1024}
        assert http("POST", f"{local_url}/v1/tables", table)[0] == 401
        assert http("POST", f"{local_url}/v1/tables", table, token=TOKEN)[0] == 201

        run_ycsb_job(docs, {**swaps, f"dmkv.metadata={cluster_url}": f"dmkv.metadata={local_url}"}, fields, tmp_path)
        status, body = http("GET", f"{local_url}/v1/tables/ycsb-1", token=TOKEN)
        assert status == 200 and body["name"] == "ycsb-1", body
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    logs = {p.name: p.read_text() for p in tmp_path.glob("*.log")}
    assert all(p.returncode == 0 for p in procs), logs


def run_ycsb_job(docs, swaps, fields, tmp_path):
    ycsb = binary("ycsb")
    if ycsb is None:
        print("note: ycsb is not built (cargo build -p ycsb): the YCSB Job was not run", file=sys.stderr)
        return
    job_c = pod_spec(one(docs, "Job", "ycsb"))["containers"][0]
    env = container_env(job_c, fields)
    workload = "/usr/local/share/dmkv/workloads/workloada"
    swaps = {**swaps, workload: str(ROOT / "ycsb" / "workloads" / "workloada")}
    credential = f"dmkv.credential_file={TOKEN_FILE}"
    swaps = {**swaps, credential: f"dmkv.credential_file={local_token_file()}"}
    # The token reaches the binding as a file from the Secret, whose path is in the
    # arguments; the token itself never is (`ps` shows them).
    assert credential in job_c["args"], "the Job does not pass the token file"
    assert "DMKV_TOKEN" not in env
    args = [swaps.get(a, a) for a in (expand(a, env) for a in job_c["args"])]
    assert not any(TOKEN in a for a in args), "the token is in the Job's arguments"
    # Smaller than the Job's defaults: the later -p wins.
    args += ["-p", "recordcount=300", "-p", "operationcount=1500", "--no-progress"]
    log = tmp_path / "ycsb.log"
    out = subprocess.run(
        [str(ycsb), *args],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log.write_text(out.stdout + out.stderr)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "[OVERALL], Throughput(ops/sec)" in out.stdout
    assert "[INSERT], Return=OK, 300" in out.stdout, out.stdout
    assert "[READ], Return=OK" in out.stdout and "[UPDATE], Return=OK" in out.stdout
