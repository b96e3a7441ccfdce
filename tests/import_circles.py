#!/usr/bin/env python3
"""Fails when the modules of a crate import each other in a circle.

For every crate of the workspace (the root package's src/ and each crates/*/src), the top-level
modules (a file or a folder below src/) are the nodes and each `crate::NAME` path written in a
module outside comments and tests is an edge; a strongly connected set of more than one module
is a circle: each of its names belongs in one place, below the other. Prints each circle with
its edges and exits 1; exits 0 when there is none.

    python3 tests/import_circles.py [REPO]
"""
import os
import re
import sys


def crates(root):
    yield "memq", os.path.join(root, "src")
    for c in sorted(os.listdir(os.path.join(root, "crates"))):
        src = os.path.join(root, "crates", c, "src")
        if os.path.isdir(src):
            yield c, src


def modules(src):
    mods = {}
    for folder, _, files in os.walk(src):
        for f in files:
            if f.endswith(".rs"):
                path = os.path.join(folder, f)
                top = os.path.relpath(path, src)[:-3].split(os.sep)[0]
                if top not in ("lib", "main"):
                    mods.setdefault(top, []).append(path)
    return mods


def code(path):
    text = open(path, encoding="utf-8").read()
    text = re.split(r"#\[cfg\(test\)\]", text)[0]
    return "\n".join(l for l in text.split("\n") if not l.strip().startswith("//"))


def edges(mods):
    graph = {m: set() for m in mods}
    for m, files in mods.items():
        for path in files:
            text = code(path)
            named = re.findall(r"crate::(\w+)", text)
            for block in re.findall(r"use crate::\{([^;]*)\}", text, re.S):
                named += re.findall(r"(?:^|[,{\s])(\w+)(?=::|\s*[,}])", block)
            graph[m].update(n for n in named if n in mods and n != m)
    return graph


def circles(graph):
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    bad = 0
    for name, src in crates(root):
        graph = edges(modules(src))
        for group in circles(graph):
            bad += 1
            print(f"{name}: modules {', '.join(group)} import each other:")
            for m in group:
                print(f"    {m} -> {', '.join(sorted(graph[m] & set(group)))}")
    if bad:
        sys.exit(1)
    print("no import circle in any crate")


main()
