#!/usr/bin/python3
"""Checks chgate's module graph: every `#include "..."` of a chgate header in server/, client/,
text/ and columnar/, and every chgate library named in a `target_link_libraries` of those
folders, must be an edge the ```layers block of ARCHITECTURE.md allows. Prints each forbidden
edge with the file and line that makes it and exits 1; exits 0 when the tree keeps to the graph.

  /usr/bin/python3 tests/layers/check_layers.py [--root DIR] [--self-test]

--self-test checks the checker: it must accept the tree as it is and refuse the same tree with
one forbidden include and one forbidden link added (text including server code; the SDK linking
the ingest library).
"""

import argparse
import re
import sys
from pathlib import Path

SOURCE_ROOTS = ("server", "client", "text", "columnar")
# Libraries by module; targets not listed (third-party wrappers, generated info) are not chgate's.
LIBRARIES = {
    "chgate_text": "text", "chgate_proto": "proto", "chgate_columnar": "columnar", "chgate_common": "server/common",
    "chgate_log": "server/log", "chgate_sql": "server/sql", "chgate_spool": "server/spool",
    "chgate_clickhouse": "server/clickhouse", "chgate_client_reader": "server/clickhouse",
    "chgate_config": "server/config", "chgate_auth": "server/auth", "chgate_ingest": "server/ingest",
    "chgate_proto_convert": "server/proto_convert", "chgate_service": "server/service",
    "chgate_metrics": "server/metrics",
    "chgate_wiring": "server", "chgate": "server", "chgate_client": "client/sdk",
    "chgate_cli_lib": "client/cli", "chgate-cli": "client/cli", "chgate_sdk_example": "client/examples",
}


def read_graph(architecture_text):
    """{module: (allowed modules, allowed single headers)} from the ```layers block."""
    block = re.search(r"```layers\n(.*?)```", architecture_text, re.S)
    if block is None:
        raise SystemExit("ARCHITECTURE.md has no ```layers block")
    graph = {}
    for line in block.group(1).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        module, _, deps = line.partition(":")
        modules, headers = set(), set()
        for dep in deps.split():
            (headers if dep.endswith(".h") else modules).add(dep)
        graph[module.strip()] = (modules, headers)
    return graph


def module_of(path, graph):
    """The module a repository path belongs to: the longest module folder that contains it."""
    if path.startswith("chgate/v1/"):
        return "proto"  # generated API headers
    best = None
    for module in graph:
        if (path == module or path.startswith(module + "/")) and (best is None or len(module) > len(best)):
            best = module
    return best


def sources(root):
    for top in SOURCE_ROOTS:
        for f in sorted((root / top).rglob("*")):
            if f.suffix in (".h", ".cc") and "node_modules" not in f.parts:
                yield f


def cmake_files(root):
    for top in SOURCE_ROOTS:
        yield from sorted((root / top).rglob("CMakeLists.txt"))


def include_edges(root):
    """(file, line number, including module path, included header) for every chgate include."""
    for f in sources(root):
        rel = f.relative_to(root).as_posix()
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m:
                yield rel, n, m.group(1)


def unknown_libraries(root):
    """Product libraries and executables (add_library/add_executable of a chgate target) that
    LIBRARIES does not place in a module: their links would go unchecked."""
    for f in cmake_files(root):
        rel = f.relative_to(root).as_posix()
        text = re.sub(r"#[^\n]*", "", f.read_text())
        for m in re.finditer(r"add_(?:library|executable)\(\s*(chgate[\w-]*)", text):
            if m.group(1) not in LIBRARIES:
                yield f"{rel}: {m.group(1)} is in no module of check_layers.py's LIBRARIES"


def link_edges(root):
    """(file, target, linked chgate library) for every target_link_libraries of a chgate target."""
    for f in cmake_files(root):
        rel = f.relative_to(root).as_posix()
        text = re.sub(r"#[^\n]*", "", f.read_text())
        for m in re.finditer(r"target_link_libraries\(\s*([\w-]+)([^)]*)\)", text):
            target, args = m.group(1), m.group(2).split()
            for lib in args:
                if lib in LIBRARIES:
                    yield rel, target, lib


def violations(root, graph, extra_includes=(), extra_links=()):
    found = list(unknown_libraries(root))
    for rel, n, header in list(include_edges(root)) + list(extra_includes):
        source = module_of(rel, graph)
        target = module_of(header, graph)
        if source is None:
            found.append(f"{rel}: in no module of the graph")
            continue
        if target is None or target == source:
            continue  # a system or third-party header, or the module's own
        modules, headers = graph[source]
        if target not in modules and header not in headers:
            found.append(f"{rel}:{n}: {source} includes {header} ({target}), outside the graph")
    for rel, target, lib in list(link_edges(root)) + list(extra_links):
        source = LIBRARIES.get(target)
        dest = LIBRARIES[lib]
        if source is None or source == dest:
            continue
        modules, _ = graph[source]
        if dest not in modules:
            found.append(f"{rel}: {target} ({source}) links {lib} ({dest}), outside the graph")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    root = Path(args.root)
    graph = read_graph((root / "ARCHITECTURE.md").read_text())
    for module in graph:
        if module != "proto" and not (root / module).is_dir():
            print(f"layers: the graph names {module}, which is not a folder")
            return 1
    found = violations(root, graph)
    if args.self_test:
        planted = violations(root, graph,
                             extra_includes=[("text/planted.cc", 1, "server/ingest/ingestor.h")],
                             extra_links=[("client/CMakeLists.txt", "chgate_client", "chgate_ingest")])
        caught = [v for v in planted if v not in found]
        if found or len(caught) != 2:
            print("layers self-test: FAILED", *found, *caught, sep="\n  ")
            return 1
        print("layers self-test: the tree passes; both planted edges are caught:", *caught, sep="\n  ")
        return 0
    if found:
        print("layers: dependency edges outside ARCHITECTURE.md's graph:", *found, sep="\n  ")
        return 1
    print(f"layers: {sum(1 for _ in include_edges(root))} includes and "
          f"{sum(1 for _ in link_edges(root))} links keep to the graph of {len(graph)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
