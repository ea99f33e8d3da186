#!/usr/bin/python3
"""Checks chgate's module graph: every `#include "..."` of a chgate header in server/, client/,
text/ and columnar/, and every chgate library named in a `target_link_libraries` of those
folders, must be an edge the ```layers block of ARCHITECTURE.md allows. Prints each forbidden
edge with the file and line that makes it and exits 1; exits 0 when the tree keeps to the graph.

  /usr/bin/python3 tests/layers/check_layers.py [--root DIR] [--compile-commands FILE] [--self-test]

--compile-commands (a build's compile_commands.json) also checks how the build compiles each
product source: never with the source tree's root as an include folder (a library sees other
modules' headers only through their include roots, build/include/<library>/, made by
cmake/include_root.cmake), and only with the include roots of libraries its module may use.

--self-test checks the checker: it must accept the tree as it is and refuse the same tree with
one forbidden include and one forbidden link added (text including server code; the SDK linking
the ingest library), and refuse a compile command of text with the source root and the ingest
library's include root.
"""

import json
import shlex

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


def include_folders(command):
    """The -I / -isystem folders of one compile_commands.json entry, in order."""
    args = command["arguments"] if "arguments" in command else shlex.split(command["command"])
    folders = []
    for i, arg in enumerate(args):
        for flag in ("-I", "-isystem"):
            if arg == flag and i + 1 < len(args):
                folders.append(args[i + 1])
            elif arg.startswith(flag) and len(arg) > len(flag):
                folders.append(arg[len(flag):])
    return folders


def reachable(graph, module):
    """The modules `module` uses, directly or through the modules it uses: a library's headers
    include those of what it uses, so its users see their include roots too."""
    seen, todo = set(), [module]
    while todo:
        for dep in graph.get(todo.pop(), (set(), set()))[0]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def compile_violations(root, graph, commands):
    """How each product source is compiled: not with the source root as an include folder, and
    with only the include roots (build/include/<library>) of libraries its module may reach in
    the graph (directly or through what it uses; what it includes itself is checked against
    its direct edges by `violations`)."""
    found = []
    source_root = root.resolve()
    for command in commands:
        path = Path(command["directory"], command["file"]).resolve()
        try:
            rel = path.relative_to(source_root).as_posix()
        except ValueError:
            continue  # generated code in the build tree
        if not rel.startswith(tuple(f"{top}/" for top in SOURCE_ROOTS)):
            continue
        module = module_of(rel, graph)
        if module is None:
            continue  # reported by the include check
        modules = reachable(graph, module)
        for folder in include_folders(command):
            resolved = Path(command["directory"], folder).resolve()
            if resolved == source_root:
                found.append(f"{rel}: compiled with the source root {folder} as an include folder")
                continue
            if resolved.parent.name != "include" or resolved.name not in LIBRARIES:
                continue  # system and generated folders
            dest = LIBRARIES[resolved.name]
            if dest != module and dest not in modules:
                found.append(f"{rel}: sees {resolved.name}'s include root ({dest}), outside the graph")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    parser.add_argument("--compile-commands", default=None)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    root = Path(args.root)
    graph = read_graph((root / "ARCHITECTURE.md").read_text())
    for module in graph:
        if module != "proto" and not (root / module).is_dir():
            print(f"layers: the graph names {module}, which is not a folder")
            return 1
    found = violations(root, graph)
    commands = []
    if args.compile_commands:
        commands = json.loads(Path(args.compile_commands).read_text())
        if not commands:
            print(f"layers: {args.compile_commands} lists no compile commands")
            return 1
        found += compile_violations(root, graph, commands)
    if args.self_test:
        planted = violations(root, graph,
                             extra_includes=[("text/planted.cc", 1, "server/ingest/ingestor.h")],
                             extra_links=[("client/CMakeLists.txt", "chgate_client", "chgate_ingest")])
        planted_command = {"directory": str(root), "file": "text/planted.cc",
                           "arguments": ["c++", f"-I{root}", "-I", "build/include/chgate_ingest",
                                         "-c", "text/planted.cc"]}
        planted += compile_violations(root, graph, [planted_command])
        caught = [v for v in planted if v not in found]
        if found or len(caught) != 4:
            print("layers self-test: FAILED", *found, *caught, sep="\n  ")
            return 1
        print("layers self-test: the tree passes; the planted edges and include folders are caught:",
              *caught, sep="\n  ")
        return 0
    if found:
        print("layers: dependency edges outside ARCHITECTURE.md's graph:", *found, sep="\n  ")
        return 1
    print(f"layers: {sum(1 for _ in include_edges(root))} includes and "
          f"{sum(1 for _ in link_edges(root))} links keep to the graph of {len(graph)} modules"
          + (f"; {len(commands)} compile commands use only allowed include roots" if commands else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
