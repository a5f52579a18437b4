"""A minimal lint of the Dockerfile and .dockerignore (no container engine or hadolint
is available where these tests run; the image itself is built in the user's CI):
multi-stage, pinned base tags, cargo --locked, a numeric non-root USER matching the
chart's runAsUser, the chart's binaries copied in, and a build context that keeps every
workspace member."""

from __future__ import annotations

import fnmatch
import re
import tomllib

import yaml

from conftest import CHART, ROOT, workspace_binaries


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out, buf = [], ""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    assert not buf, "a continuation runs off the end of the Dockerfile"
    return out


def stages():
    """[(FROM image with global ARGs substituted, stage name, [instructions])]."""
    args, result = {}, []
    for word, rest in instructions():
        if word == "ARG" and not result:
            name, _, default = rest.partition("=")
            args[name] = default
        elif word == "FROM":
            m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", rest, re.IGNORECASE)
            assert m, rest
            image = re.sub(r"\$\{(\w+)\}", lambda v: args[v.group(1)], m.group(1))
            result.append((image, m.group(2), []))
        else:
            assert result, f"{word} before the first FROM"
            result[-1][2].append((word, rest))
    return result


def test_multi_stage_with_pinned_slim_bases():
    st = stages()
    assert len(st) >= 2
    names = [name for _, name, _ in st]
    for image, _, _ in st:
        if image in names:
            continue
        repo, _, tag = image.partition(":")
        assert tag and tag != "latest" and "$" not in tag, f"unpinned base image {image}"
    final_image = st[-1][0]
    assert "slim" in final_image or "distroless" in final_image, final_image


def test_rust_version_matches_the_workspace():
    manifest = tomllib.loads((ROOT / "Cargo.toml").read_text())
    want = manifest["workspace"]["package"]["rust-version"]
    builder = stages()[0][0]
    assert builder.startswith(f"rust:{want}"), f"{builder} is not rust {want}"


def test_cargo_builds_locked_release():
    runs = [rest for _, _, ins in stages()[:-1] for word, rest in ins if word == "RUN"]
    builds = [r for r in runs if "cargo build" in r]
    assert builds, "no cargo build"
    for r in builds:
        assert "--locked" in r and "--release" in r, r


def test_runs_as_numeric_non_root_user_matching_the_chart():
    _, _, final = stages()[-1]
    users = [rest for word, rest in final if word == "USER"]
    assert users, "the final stage sets no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0, "USER must be numeric (runAsNonRoot checks it) and not 0"
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert int(uid) == values["podSecurityContext"]["runAsUser"]
    if gid:
        assert int(gid) == values["podSecurityContext"]["runAsGroup"]
    assert not any(word == "RUN" for word, _ in final[[w for w, _ in final].index("USER"):])


def test_copies_the_binaries_the_chart_runs():
    st = stages()
    build_name = st[0][1]
    _, _, final = st[-1]
    copies = [rest for word, rest in final if word == "COPY"]
    assert any(f"--from={build_name}" in c and "/usr/local/bin" in c for c in copies), copies
    build_runs = " ".join(rest for word, rest in st[0][2] if word == "RUN")
    loop = re.search(r"for bin in ([^;]+); do cp \"target/release/\$bin\" /out/", build_runs)
    assert loop, "the build stage copies no list of binaries"
    copied = set(loop.group(1).split())
    commands = set()
    for template in ("memnode-statefulset.yaml", "metadata-statefulset.yaml"):
        text = (CHART / "templates" / template).read_text()
        commands.add(re.search(r"command:\s*\n\s*- (\S+)", text).group(1))
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for part in ("accel", "ycsb"):
        commands.add(values[part]["command"][0])
    assert commands <= copied, f"the chart runs {commands - copied}, which the image lacks"
    unknown = copied - workspace_binaries()
    assert not unknown, f"the Dockerfile copies {unknown}, which no workspace member builds"


def ignored(path: str, patterns: list[str]) -> bool:
    result = False
    for p in patterns:
        negate = p.startswith("!")
        pat = p[1:] if negate else p
        pat = pat.strip("/")
        if fnmatch.fnmatch(path, pat) or fnmatch.fnmatch(path, pat + "/*") or path.startswith(pat + "/"):
            result = not negate
    return result


def test_dockerignore_keeps_the_workspace_and_drops_build_output():
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for heavy in ("target", ".git"):
        assert ignored(heavy, patterns), f"{heavy} is sent to the build context"
    manifest = tomllib.loads((ROOT / "Cargo.toml").read_text())
    for needed in ["Cargo.toml", "Cargo.lock"] + [f"{m}/Cargo.toml" for m in manifest["workspace"]["members"]]:
        assert not ignored(needed, patterns), f".dockerignore drops {needed}, which the build needs"
    for member in manifest["workspace"]["members"]:
        assert not ignored(f"{member}/src/lib.rs", patterns), member
