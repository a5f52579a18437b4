"""The memnode's readiness probe, run for real: the rendered exec command (bash, as in the
image) against the metadata service started with its rendered arguments. It fails while
the pod's memnode is not registered, passes once it is registered and heartbeating,
fails for another pod's name, and fails again once the memnode stops heartbeating. A
rolling update moves on only when the probe passes, so this is what keeps it from
taking down the next memnode before the previous one has rejoined."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import NAMESPACE, RELEASE, binary, documents, one, pod_spec, render
from test_rendered_args_run import TOKEN, container_env, expand, free_port, http, start, wait_for

POD_NAME = f"{RELEASE}-dmkv-memnode-0"
METADATA_HOST = f"{RELEASE}-dmkv-metadata.{NAMESPACE}.svc"


def run_probe(command: list[str], env: dict[str, str], meta_port: int) -> int:
    """Exit status of the probe's command, the in-cluster address swapped for loopback."""
    script = command[2].replace(f"{METADATA_HOST}/9700", f"127.0.0.1/{meta_port}")
    script = script.replace(f"{METADATA_HOST}:9700", f"127.0.0.1:{meta_port}")
    out = subprocess.run(
        [command[0], command[1], script],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=10,
    )
    return out.returncode


def test_readiness_probe_passes_only_while_registered(tmp_path):
    metadata_bin, memnode_bin = binary("metadata"), binary("memnode")
    if metadata_bin is None or memnode_bin is None:
        pytest.fail("memnode and metadata must be built (cargo build -p memnode -p metadata)")
    docs = documents(render({"memnode": {"replicas": 1, "capacity": "16Mi"}}))
    meta_c = pod_spec(one(docs, "StatefulSet", "metadata"))["containers"][0]
    mem_c = pod_spec(one(docs, "StatefulSet", "memnode"))["containers"][0]
    probe = mem_c["readinessProbe"]["exec"]["command"]

    meta_port = free_port(socket.SOCK_STREAM)
    admin_port = free_port(socket.SOCK_STREAM)
    data_port = free_port(socket.SOCK_DGRAM)
    local_url = f"http://127.0.0.1:{meta_port}"
    # The Secret's files, as the pods see them under /etc/dmkv/auth.
    auth_dir = tmp_path / "auth"
    auth_dir.mkdir()
    (auth_dir / "memnode-admin-token").write_text("readiness-probe-memnode-admin-token\n")
    (auth_dir / "grant-key").write_text("readiness-probe-grant-key-0123456789\n")
    swaps = {
        "/etc/dmkv/auth/memnode-admin-token": str(auth_dir / "memnode-admin-token"),
        "/etc/dmkv/auth/grant-key": str(auth_dir / "grant-key"),
        "0.0.0.0:9700": f"127.0.0.1:{meta_port}",
        "/data": str(tmp_path / "data"),
        f"http://{METADATA_HOST}:9700": local_url,
        "127.0.0.1:4791": f"127.0.0.1:{data_port}",
        "127.0.0.1:9791": f"127.0.0.1:{admin_port}",
    }
    fields = {"metadata.name": POD_NAME, "status.podIP": "127.0.0.1"}
    meta_env = container_env(meta_c, fields)
    meta_args = [swaps.get(a, a) for a in (expand(a, meta_env) for a in meta_c["args"])]
    mem_env = container_env(mem_c, fields)
    mem_args = [swaps.get(a, a) for a in (expand(a, mem_env) for a in mem_c["args"])]
    # The heartbeat timeout the chart gives the metadata service bounds how long a
    # silent memnode stays ready.
    heartbeat_s = int(meta_args[meta_args.index("--heartbeat-timeout-ms") + 1]) / 1000

    # No metadata service to ask: not ready.
    assert run_probe(probe, mem_env, meta_port) != 0

    procs = []
    try:
        procs.append(start(metadata_bin, meta_args, meta_env, tmp_path / "metadata.log"))
        wait_for("metadata /healthz", lambda: http("GET", f"{local_url}/healthz")[0] == 200, procs)
        # The service answers but knows no such memnode: not ready.
        assert run_probe(probe, mem_env, meta_port) != 0

        procs.append(start(memnode_bin, mem_args, mem_env, tmp_path / "memnode.log"))
        wait_for("the probe to pass", lambda: run_probe(probe, mem_env, meta_port) == 0, procs)
        status, body = http("GET", f"{local_url}/v1/memnodes", token=TOKEN)
        assert status == 200 and [m["name"] for m in body["memnodes"] if m["healthy"]] == [POD_NAME]
        # Another pod's probe does not pass on this pod's registration.
        other = {**mem_env, "POD_NAME": f"{RELEASE}-dmkv-memnode-1"}
        assert run_probe(probe, other, meta_port) != 0

        # The memnode dies without a word: the probe fails once the metadata service
        # stops counting it healthy (the heartbeat timeout).
        memnode = procs.pop()
        memnode.kill()
        memnode.wait(timeout=10)
        stopped = time.monotonic()
        wait_for("the probe to fail", lambda: run_probe(probe, mem_env, meta_port) != 0, procs)
        assert time.monotonic() - stopped < heartbeat_s + 5
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
