#!/usr/bin/env python3
"""Checks the workspace's cut between cores and shells (ARCHITECTURE.md, "Layers").

Every workspace crate declares `[package.metadata.tessera] layer = "core"` or `"shell"`.
A core must not reach an I/O crate through its normal dependencies (as `cargo tree -e normal
-p <core>` resolves them, features included), and its library source must not read the wall
clock, the host's randomness, files, the network, processes or the environment. Exits 1
with one line per finding; prints a summary of the layers otherwise.

Usage: tools/check-layers.py               check the workspace
       tools/check-layers.py --self-test   check the source patterns against a table first
"""

import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Crates that do I/O (sockets, files, processes, the GPU driver), run an async runtime, or
# draw randomness from the host. A core reaching any of them through normal dependencies
# fails the check.
IO_CRATES = {
    "tokio", "tokio-util", "tokio-stream", "tokio-rustls", "mio", "socket2",
    "hyper", "hyper-util", "h2", "axum", "tower-http", "tonic", "reqwest",
    "kube", "kube-client", "kube-runtime", "rustls", "native-tls", "openssl",
    "rusqlite", "libsqlite3-sys", "redb", "nvml-wrapper", "nvml-wrapper-sys",
    "libloading", "getrandom", "rand", "notify", "tempfile", "tracing-subscriber",
}

# What a core's library source may not call: the wall clock, the host's randomness, files,
# sockets, processes, the environment, threads. Seeded generators (`fastrand::Rng`) and
# compile-time includes are fine.
FORBIDDEN_SOURCE = [
    (re.compile(r"\bSystemTime::now\b|\bInstant::now\b"), "reads the wall clock"),
    (re.compile(r"\bfastrand::(?!Rng\b)[a-z_0-9]+\s*\("), "draws unseeded randomness"),
    (re.compile(r"\bstd::fs\b|\bFile::(open|create)\b"), "touches files"),
    (re.compile(r"\b(TcpStream|TcpListener|UdpSocket|UnixStream|UnixListener|ToSocketAddrs)\b"),
     "touches the network"),
    (re.compile(r"\bstd::process\b"), "runs processes"),
    (re.compile(r"\bstd::env::var|\benv::var\b"), "reads the environment"),
    (re.compile(r"\bthread::spawn\b"), "starts threads"),
]


def metadata():
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def normal_dependencies(package):
    out = subprocess.run(
        ["cargo", "tree", "-q", "-e", "normal", "-p", package, "--prefix", "none",
         "--format", "{p}"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def library_lines_of_text(text):
    """The non-test lines of one source file, with their numbers: the file's test module
    (from its first `#[cfg(test)]` on) and blank or comment lines are left out."""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#[cfg(test)]"):
            break
        if stripped and not stripped.startswith("//"):
            yield number, line


def library_lines(src):
    """Each non-test line of a crate's src/, with its file and number."""
    for path in sorted(src.rglob("*.rs")):
        for number, line in library_lines_of_text(path.read_text()):
            yield path, number, line


# (line of a core's source, whether the check must refuse it)
SELF_TEST = [
    ("let now = SystemTime::now();", True),
    ("let start = tokio::time::Instant::now();", True),
    ("let pick = fastrand::usize(..n);", True),
    ("let rng = fastrand::Rng::with_seed(seed);", False),
    ("let text = std::fs::read_to_string(path)?;", True),
    ("let file = File::open(path)?;", True),
    ("let stream = TcpStream::connect(address)?;", True),
    ("use std::net::Ipv4Addr;", False),
    ("let out = std::process::Command::new(\"ls\");", True),
    ("let home = std::env::var(\"HOME\");", True),
    ("std::thread::spawn(move || work());", True),
    ("let at = timestamp(now);", False),
    ("const GPUS: &str = include_str!(\"../data/gpus.yaml\");", False),
]


def self_test():
    failures = 0
    for line, refused in SELF_TEST:
        found = [what for pattern, what in FORBIDDEN_SOURCE if pattern.search(line)]
        if bool(found) != refused:
            failures += 1
            print(f"self-test: {line!r}: expected {'a finding' if refused else 'none'}, got {found}")
    test_lines = list(library_lines_of_text(
        "fn a() {}\n// SystemTime::now() in a comment\n#[cfg(test)]\nmod tests { fn b() {} }\n"))
    if test_lines != [(1, "fn a() {}")]:
        failures += 1
        print(f"self-test: library lines should stop at the test module, got {test_lines}")
    print(f"check-layers self-test: {len(SELF_TEST) + 1 - failures} passed, {failures} failed")
    return failures == 0


def main():
    if "--self-test" in sys.argv and not self_test():
        return 1
    findings = []
    layers = {}
    for package in metadata()["packages"]:
        name = package["name"]
        layer = ((package.get("metadata") or {}).get("tessera") or {}).get("layer")
        if layer not in ("core", "shell"):
            findings.append(
                f"{name}: Cargo.toml must declare [package.metadata.tessera] layer = "
                f'"core" or "shell" (found {layer!r})'
            )
            continue
        layers[name] = (layer, pathlib.Path(package["manifest_path"]).parent)

    cores = sorted(name for name, (layer, _) in layers.items() if layer == "core")
    for core in cores:
        reached = normal_dependencies(core)
        for crate in sorted(reached & IO_CRATES):
            findings.append(
                f"{core}: core crate reaches I/O crate `{crate}` "
                f"(cargo tree -e normal -p {core} -i {crate})"
            )
        for other in sorted(reached & set(layers)):
            if other != core and layers[other][0] == "shell":
                findings.append(f"{core}: core crate depends on shell crate `{other}`")
        for path, number, line in library_lines(layers[core][1] / "src"):
            for pattern, what in FORBIDDEN_SOURCE:
                if pattern.search(line):
                    rel = path.relative_to(ROOT)
                    findings.append(f"{rel}:{number}: core crate {core} {what}: {line.strip()}")

    if findings:
        for finding in findings:
            print(finding)
        print(f"check-layers: {len(findings)} finding(s)")
        return 1

    counts = {"core": 0, "shell": 0}
    for name, (layer, directory) in sorted(layers.items()):
        lines = sum(1 for _ in library_lines(directory / "src"))
        counts[layer] += lines
        print(f"{layer:5}  {name:22} {lines:6} non-test lines")
    total = counts["core"] + counts["shell"]
    share = 100 * counts["core"] / total if total else 0
    print(f"check-layers: {len(cores)} cores free of I/O; {share:.0f}% of non-test lines in cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
