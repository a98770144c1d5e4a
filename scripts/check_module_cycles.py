#!/usr/bin/env python3
"""Fails when modules of one crate depend on each other in a cycle.

    scripts/check_module_cycles.py [REPO_ROOT]

An edge is a `crate::a::b`, `super::x` or `self::y` path named in a module's source (its
`#[cfg(test)] mod tests` excluded), resolved to the longest module prefix. A module naming
its own ancestor or descendant is not an edge (children use their parent's helpers).
Grouped paths (`crate::{a, b}`) are not followed. Prints each cycle and the count.
"""
import os
import re
import sys

PATH = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
TESTS = re.compile(r"#\[cfg\(test\)\]\s*mod tests\s*\{.*", re.S)


def module_of(src, file):
    parts = os.path.relpath(file, src)[: -len(".rs")].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def target(modules, here, path):
    parts = path.split("::")
    if parts[0] == "crate":
        base, rest = (), parts[1:]
    else:
        base = here
        if parts[0] == "self":
            parts = parts[1:]
        while parts and parts[0] == "super":
            base, parts = base[:-1], parts[1:]
        rest = parts
    for i in range(len(rest), -1, -1):
        candidate = base + tuple(rest[:i])
        if candidate in modules:
            return candidate
    return None


def edges_of(src):
    files = [os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith(".rs")]
    modules = {module_of(src, f): f for f in files}
    edges = {m: set() for m in modules}
    for here, file in modules.items():
        with open(file) as f:
            text = TESTS.sub("", f.read())
        for path in PATH.findall(text):
            to = target(modules, here, path)
            if to is None or here[: len(to)] == to or to[: len(here)] == here:
                continue
            edges[here].add(to)
    return edges


def cycles(edges):
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(component)
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    found = 0
    crates = os.path.join(root, "crates")
    for crate in sorted(os.listdir(crates)):
        for component in cycles(edges_of(os.path.join(crates, crate, "src"))):
            found += 1
            names = " <-> ".join("/".join(m) or "lib" for m in sorted(component))
            print(f"module cycle in crates/{crate}: {names}")
    print(f"module cycles: {found}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
