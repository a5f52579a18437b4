"""The metrics the dmkv services expose, in one place: exposed-metrics.json, written by
this module from the running binaries' /metrics and read by the tests of the chart's
PrometheusRule and Grafana dashboard (test_observability.py), which check that every
expression names metrics, labels and label values that exist. A test compares the file
with what the built binaries serve, so it cannot drift from the code.

Regenerate it after a service gains or loses a metric (from the repository root, with
the binaries built: cargo build -p memnode -p metadata -p accel-p4):

    python3 helm/tests/exposed_metrics.py
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import binary  # noqa: E402

SNAPSHOT = Path(__file__).resolve().with_name("exposed-metrics.json")

# Labels whose values depend on the cluster (ids, names, routes taken, statuses answered)
# or on the build (version, commit and compiler of *_build_info): recorded without values.
# Every other label's values are recorded and checked.
DYNAMIC_LABELS = {"memnode", "name", "route", "method", "status", "version", "commit", "rustc"}
# Labels Prometheus adds to every scraped series (the ServiceMonitors' targets).
TARGET_LABELS = {"job", "namespace", "pod", "instance", "service", "endpoint", "container"}
# Series Prometheus makes itself.
PROMETHEUS_SERIES = {"up"}
SERVICES = ("metadata", "memnode", "accel-p4")

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text: str) -> dict[str, dict[str, Any]]:
    """family -> {"type", "labels": {label: sorted values, or None when dynamic}}.
    Histogram samples (_bucket, _sum, _count) count for their family; `le` is left out."""
    families: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            families[name] = {"type": kind.strip(), "labels": {}}
            continue
        if not line.strip() or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        family = family_of(m.group(1), families)
        if family is None:
            raise ValueError(f"sample without a TYPE: {line}")
        labels = families[family]["labels"]
        for key, value in _LABEL.findall(m.group(2) or ""):
            if key == "le":
                continue
            if key in DYNAMIC_LABELS:
                labels[key] = None
            else:
                labels.setdefault(key, [])
                if value not in labels[key]:
                    labels[key].append(value)
    for f in families.values():
        for key, values in f["labels"].items():
            if values is not None:
                values.sort()
    return families


def family_of(name: str, families: dict[str, Any]) -> str | None:
    """The family a sample or series name belongs to (histogram suffixes stripped)."""
    if name in families:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        base = name.removesuffix(suffix)
        if base != name and families.get(base, {}).get("type") in ("histogram", "summary"):
            return base
    return None


def load() -> dict[str, dict[str, Any]]:
    """service -> families, from exposed-metrics.json."""
    return json.loads(SNAPSHOT.read_text())["services"]


def all_families(snapshot: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for families in (snapshot or load()).values():
        out.update(families)
    return out


# --- scraping the running services ------------------------------------------------------


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except OSError:
        return 0, ""


def _wait(what: str, check, procs, deadline_s: float = 20.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{p.args[0]} exited with {p.returncode} while waiting for {what}")
        if check():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def scrape_services() -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Start a metadata service, a memnode registered with it and (when built) a soft
    switch on loopback, and parse each one's /metrics. Returns (service -> families,
    services not built)."""
    paths = {s: binary(s) for s in SERVICES}
    missing = [s for s, p in paths.items() if p is None]
    meta_port, admin_port, switch_admin = (_free_port(socket.SOCK_STREAM) for _ in range(3))
    data_port, client_side, memnode_side = (_free_port(socket.SOCK_DGRAM) for _ in range(3))
    urls = {
        "metadata": f"http://127.0.0.1:{meta_port}",
        "memnode": f"http://127.0.0.1:{admin_port}",
        "accel-p4": f"http://127.0.0.1:{switch_admin}",
    }
    commands = {
        "metadata": ["--listen", f"127.0.0.1:{meta_port}", "--data-dir", "DATA"],
        "memnode": [
            "--listen", f"127.0.0.1:{data_port}", "--admin", f"127.0.0.1:{admin_port}",
            "--capacity", "16MiB", "--metadata", urls["metadata"], "--name", "metrics-0",
        ],
        "accel-p4": [
            "serve", "--client-side", f"127.0.0.1:{client_side}",
            "--memnode-side", f"127.0.0.1:{memnode_side}", "--admin", f"127.0.0.1:{switch_admin}",
        ],
    }
    procs: list[subprocess.Popen] = []
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "RUST_LOG": "warn",
            # The memnode's admin API needs a token; the metadata service and the
            # switch present the same one.
            "DMKV_MEMNODE_ADMIN_TOKEN": "exposed-metrics-memnode-admin-token",
        }
        try:
            for service in SERVICES:
                if paths[service] is None:
                    continue
                args = [tmp + "/data" if a == "DATA" else a for a in commands[service]]
                procs.append(
                    subprocess.Popen(
                        [str(paths[service]), *args],
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=open(Path(tmp) / f"{service}.log", "w"),
                    )
                )
                _wait(f"{service} /healthz", lambda s=service: _get(urls[s] + "/healthz")[0] == 200, procs)
            if paths["metadata"] and paths["memnode"]:
                # Families labelled per memnode have samples once one is registered.
                _wait(
                    "the memnode's registration",
                    lambda: 'name="metrics-0"' in _get(urls["metadata"] + "/metrics")[1],
                    procs,
                )
            for service in SERVICES:
                if paths[service] is not None:
                    status, text = _get(urls[service] + "/metrics")
                    assert status == 200, f"{service} /metrics answered {status}"
                    out[service] = parse_exposition(text)
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
    return out, missing


def main() -> int:
    scraped, missing = scrape_services()
    if missing:
        print(f"not built: {', '.join(missing)} (cargo build -p {' -p '.join(missing)})", file=sys.stderr)
        return 1
    doc = {
        "comment": "Written by helm/tests/exposed_metrics.py from the services' /metrics; "
        "labels listed as null have cluster-dependent values.",
        "services": scraped,
    }
    SNAPSHOT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
