"""Shared fixtures of the Helm chart tests: the chart rendered through the real Helm
library (helm-python-sdk) with each values file under helm/dmkv/ci/, and the dmkv
binaries whose --help the rendered container arguments are checked against.

Run from the repository root: python3 -m pytest helm/tests -q
(`cargo test -p deploy-tests` does that, and finds or builds the binaries first).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

import helm_python

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "dmkv"
CI_VALUES = CHART / "ci"
# The newest Kubernetes whose schemas kubernetes-validate bundles (and Helm lints for).
KUBE_VERSION = "1.37.0"
RELEASE = "rel"
NAMESPACE = "dmkv-test"

SCENARIOS = sorted(p.name.removesuffix("-values.yaml") for p in CI_VALUES.glob("*-values.yaml"))


def interop_required() -> bool:
    return os.environ.get("DMKV_REQUIRE_INTEROP") == "1"


def scenario_values(scenario: str) -> dict[str, Any]:
    text = (CI_VALUES / f"{scenario}-values.yaml").read_text()
    return yaml.safe_load(text) or {}


@functools.cache
def _chart() -> helm_python.Chart:
    return helm_python.Chart.load(CHART)


def render(values: dict[str, Any], name: str = RELEASE, namespace: str = NAMESPACE) -> dict[str, str]:
    """Template path → rendered text, as `helm template` would produce it."""
    return _chart().render(values, name=name, namespace=namespace, is_install=True)


def documents(rendered: dict[str, str]) -> list[dict[str, Any]]:
    """Every Kubernetes object in a render (NOTES.txt left out)."""
    docs: list[dict[str, Any]] = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append(doc)
    return docs


@functools.cache
def _render_scenario(scenario: str) -> tuple[dict[str, str], tuple[Any, ...]]:
    rendered = render(scenario_values(scenario))
    return rendered, tuple(documents(rendered))


def scenario_docs(scenario: str) -> list[dict[str, Any]]:
    return list(_render_scenario(scenario)[1])


def scenario_rendered(scenario: str) -> dict[str, str]:
    return _render_scenario(scenario)[0]


def find(docs: list[dict[str, Any]], kind: str, component: str | None = None) -> list[dict[str, Any]]:
    out = []
    for d in docs:
        if d["kind"] != kind:
            continue
        labels = d["metadata"].get("labels", {})
        if component is None or labels.get("app.kubernetes.io/component") == component:
            out.append(d)
    return out


def one(docs: list[dict[str, Any]], kind: str, component: str | None = None) -> dict[str, Any]:
    found = find(docs, kind, component)
    assert len(found) == 1, f"expected one {kind} {component or ''}, found {len(found)}"
    return found[0]


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]


WORKLOAD_KINDS = ("StatefulSet", "Deployment", "Job", "DaemonSet", "CronJob")


def workloads(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in WORKLOAD_KINDS]


def containers(docs: list[dict[str, Any]]):
    """(workload, container) for every container and init container."""
    for w in workloads(docs):
        spec = pod_spec(w)
        for c in spec.get("initContainers", []) + spec["containers"]:
            yield w, c


# --- the dmkv binaries -------------------------------------------------------------


def _target_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("CARGO_TARGET_DIR"):
        dirs.append(Path(os.environ["CARGO_TARGET_DIR"]))
    dirs.append(ROOT / "target")
    return dirs


@functools.cache
def binary(name: str) -> Path | None:
    """The built binary `name`: $DMKV_BIN_<NAME>, else $DMKV_BIN_DIR/<name> (the Rust test
    wrapper sets these), else the newest of target/{debug,release}/<name> under
    $CARGO_TARGET_DIR or ./target."""
    env = "DMKV_BIN_" + re.sub(r"[^A-Z0-9]", "_", name.upper())
    if os.environ.get(env):
        return Path(os.environ[env])
    if os.environ.get("DMKV_BIN_DIR") and (Path(os.environ["DMKV_BIN_DIR"]) / name).is_file():
        return Path(os.environ["DMKV_BIN_DIR"]) / name
    found = [
        d / profile / name
        for d in _target_dirs()
        for profile in ("debug", "release")
        if (d / profile / name).is_file()
    ]
    if not found:
        return None
    return max(found, key=lambda p: p.stat().st_mtime)


def workspace_binaries() -> set[str]:
    """Names of the [[bin]] targets (and src/main.rs packages) of the workspace members."""
    manifest = tomllib.loads((ROOT / "Cargo.toml").read_text())
    names: set[str] = set()
    for member in manifest["workspace"]["members"]:
        path = ROOT / member / "Cargo.toml"
        if not path.is_file():
            continue
        pkg = tomllib.loads(path.read_text())
        bins = pkg.get("bin", [])
        names.update(b["name"] for b in bins)
        if not bins and (ROOT / member / "src" / "main.rs").is_file():
            names.add(pkg["package"]["name"])
        for extra in sorted((ROOT / member / "src" / "bin").glob("*.rs")):
            names.add(extra.stem)
    return names


@functools.cache
def help_text(name: str, *subcommand: str) -> str | None:
    """`<name> [subcommand] --help`, or None when the binary is not built or prints no
    usage."""
    path = binary(name)
    if path is None:
        return None
    out = subprocess.run([str(path), *subcommand, "--help"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0 or "Usage:" not in out.stdout:
        return None
    return out.stdout


def help_commands(text: str) -> set[str]:
    """Subcommands listed in a clap `Commands:` section."""
    commands, inside = set(), False
    for line in text.splitlines():
        if line.strip() == "Commands:":
            inside = True
        elif inside and re.match(r"^\s{2}(\S+)", line):
            commands.add(line.split()[0])
        elif inside and not line.strip():
            inside = False
    return commands


def help_flags(text: str) -> set[str]:
    """Options the help declares at the start of a line: clap's `--listen <ADDR>` and
    `-h, --help`, and single-dash ones such as YCSB's `-P FILE`, `-threads N`."""
    flags = set()
    for line in text.splitlines():
        m = re.match(r"^\s+((?:-{1,2}[A-Za-z][\w-]*)(?:,\s*-{1,2}[A-Za-z][\w-]*)*)", line)
        if m:
            flags.update(f.strip() for f in m.group(1).split(","))
    return flags


def help_envs(text: str) -> set[str]:
    """Environment variables the options read (`[env: DMKV_MEMNODE_LISTEN=]`)."""
    return set(re.findall(r"\[env: ([A-Z0-9_]+)", text))


def flag_args(args: list[str]) -> list[str]:
    """The options among a container's args (`--x`, `--x=v`, `-P`), values left out."""
    return [a.split("=", 1)[0] for a in args if re.match(r"^-{1,2}[A-Za-z]", a)]


@pytest.fixture(params=SCENARIOS)
def scenario(request) -> str:
    return request.param
