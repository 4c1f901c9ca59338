#!/usr/bin/env python3
"""Regenerates fixtures.json from upstream's pod-security-admission test fixtures.

Usage: generate.py <checkout of k8s.io/pod-security-admission> > fixtures.json

Upstream's test/testdata/<level>/<version>/{pass,fail}/<case>.yaml are the pods its
TestFixtures expects each level and version to allow or refuse. The same pod recurs across
versions, so pods are stored once (`pods`) and each case names its pod by index.
"""
import json
import os
import sys

import yaml

root = os.path.join(sys.argv[1], "test", "testdata")
pods, index, cases = [], {}, {}
for level in sorted(os.listdir(root)):
    level_dir = os.path.join(root, level)
    if not os.path.isdir(level_dir):
        continue
    for version in sorted(os.listdir(level_dir), key=lambda v: int(v.split(".")[1])):
        entry = {}
        for outcome in ("pass", "fail"):
            folder = os.path.join(level_dir, version, outcome)
            if not os.path.isdir(folder):
                continue
            named = []
            for name in sorted(os.listdir(folder)):
                with open(os.path.join(folder, name)) as f:
                    pod = yaml.safe_load(f)
                key = json.dumps(pod, sort_keys=True)
                if key not in index:
                    index[key] = len(pods)
                    pods.append(pod)
                named.append([name[: -len(".yaml")], index[key]])
            entry[outcome] = named
        cases[f"{level}/{version}"] = entry
json.dump({"pods": pods, "cases": cases}, sys.stdout, separators=(",", ":"), sort_keys=True)
print()
