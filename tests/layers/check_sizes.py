#!/usr/bin/python3
"""Checks the size rules of chgate's product code (server/, client/, text/ and
columnar/): no source file over 800 lines, and no function body over 80 lines except the data
tables listed in DATA_TABLES below. Prints each file or function over its limit and exits 1; exits
0 when the tree keeps to the rules.

  /usr/bin/python3 tests/layers/check_sizes.py [--root DIR] [--self-test]

A function is a brace block at namespace or class scope (or a lambda at such a scope) whose
opening is not a class, struct, union, enum, namespace or braced initializer; its length is the
number of lines from its opening brace to its closing one. Comments, string and character
literals are blanked first, so braces in them do not count.

--self-test checks the checker: it must accept the tree as it is and refuse a file with one
81-line function, a class whose method is too long, and a file of 801 lines, while accepting a
long class body, a long braced initializer and a long function listed as a data table.
"""

import argparse
import re
import sys
from pathlib import Path

SOURCE_ROOTS = ("server", "client", "text", "columnar")
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 80
# (file, function) pairs that are tables of data written as a function: one entry per line.
DATA_TABLES = {
    ("server/config/config.cc", "Options"),                    # the option table
    ("server/clickhouse/protocol/error_codes.cc", "Table"),    # ClickHouse's error codes
}

_NOT_FUNCTION = re.compile(r"\b(class|struct|union|enum|namespace)\b|=\s*$|\[\]\s*$|^\s*$")


def blank(text):
    """`text` with comments and string/character literals replaced by blanks (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if m is None:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + re.sub(r"[^\n]", "", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(text):
    """[(first line, name, lines)] of the function bodies in `text` over MAX_FUNCTION_LINES."""
    code = blank(text)
    found = []
    stack = []  # (line, is_function, name)
    line = 1
    start = 0  # where the current statement's text begins
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            head = code[start:i]
            # A scope that can hold functions: namespace, class, or the file.
            function = _NOT_FUNCTION.search(head.strip()) is None and "(" in head
            in_scope = all(not f for _, f, _ in stack)
            name = ""
            if function:
                m = re.search(r"([~\w]+)\s*\((?:[^()]|\([^()]*\))*\)[^()]*$", head)
                name = m.group(1) if m else "lambda"
            stack.append((line, function and in_scope, name))
            start = i + 1
        elif c == "}":
            if stack:
                first, counted, name = stack.pop()
                if counted and line - first > MAX_FUNCTION_LINES:
                    found.append((first, name, line - first))
            start = i + 1
        elif c == ";":
            start = i + 1
        elif c == ":" and not code.startswith("::", i) and (i == 0 or code[i - 1] != ":"):
            # After an access specifier or a label the next declaration begins.
            if re.search(r"\b(public|private|protected)\s*$", code[start:i]):
                start = i + 1
    return found


def check(root, files=None):
    """Lines describing each breach of the size rules under `root` (or in `files`: {path: text})."""
    if files is None:
        files = {}
        for top in SOURCE_ROOTS:
            for path in sorted((root / top).rglob("*")):
                if path.suffix in (".cc", ".h"):
                    files[path.relative_to(root).as_posix()] = path.read_text()
    problems = []
    for rel, text in sorted(files.items()):
        lines = text.count("\n")
        if lines > MAX_FILE_LINES:
            problems.append(f"{rel}: {lines} lines (at most {MAX_FILE_LINES})")
        for first, name, length in long_functions(text):
            if (rel, name) in DATA_TABLES:
                continue
            problems.append(f"{rel}:{first}: {name} is {length} lines (at most "
                            f"{MAX_FUNCTION_LINES}; a data table goes in DATA_TABLES)")
    return problems


def self_test(root):
    if check(root):
        return "the tree as it is was refused"
    body = "".join(f"  x += {i};\n" for i in range(81))
    short = "".join(f"  x += {i};\n" for i in range(10))
    refused = {
        "server/a.cc": f"namespace n {{\nint F(int x) {{\n{body}  return x;\n}}\n}}\n",
        "server/b.h": f"class C {{\n public:\n  int G(int x) {{\n{body}    return x;\n  }}\n}};\n",
        "server/c.cc": "// line\n" * 801,
    }
    for rel, text in refused.items():
        if not check(root, {rel: text}):
            return f"{rel} was accepted"
    comment = "// a { brace in a comment and one in a string: \"}\"\n"
    accepted = {
        "server/d.h": "class D {\n" + "".join(f"  int f{i}() {{ return {i}; }}\n" for i in range(90))
                      + "};\n",
        "server/e.cc": "const int kTable[] = {\n" + "".join(f"  {i},\n" for i in range(90)) + "};\n",
        "server/config/config.cc": f"const std::vector<Option>& Options() {{\n{body}}}\n",
        "server/f.cc": f"int H(int x) {{\n{comment}{short}  return x;\n}}\n",
    }
    for rel, text in accepted.items():
        if check(root, {rel: text}):
            return f"{rel} was refused: {check(root, {rel: text})}"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=Path(__file__).resolve().parent.parent.parent, type=Path)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        failure = self_test(args.root)
        print(f"check_sizes self-test: {failure or 'ok'}")
        return 1 if failure else 0
    problems = check(args.root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} breach(es) of the size rules")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
