#!/usr/bin/python3
"""Checks the log table of docs/operations.md ("| component | message | level | when | fields |")
against the code: every message it lists must be written by chgate, so a renamed log line fails
here instead of leaving operators grepping for a line that never comes. A message is each
backticked text of the message column; text after `...` or a placeholder (`X`, `Y`) is left out,
and what remains must begin a string literal in server/ (or client/).

  /usr/bin/python3 tests/ops/check_log_table.py [--root DIR] [--self-test]

--self-test checks the checker: the table as it is passes, and a table with a message no code
writes fails.
"""

import argparse
import re
import sys
from pathlib import Path


def documented_messages(doc):
    """[(line number, message fragment)] of the log table's message column."""
    out = []
    in_table = False
    for number, line in enumerate(doc.splitlines(), 1):
        if line.startswith("| component | message |"):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            in_table = False
        if not in_table or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        for text in re.findall(r"`([^`]+)`", cells[1]):
            # The literal part: up to an elision or a placeholder word.
            fragment = re.split(r"\.\.\.| X\b| Y\b|<", text)[0].rstrip(" :;,")
            if fragment:
                out.append((number, fragment))
    return out


def literals(root):
    """Every string literal of the product code (adjacent literals concatenated)."""
    chunks = []
    for top in ("server", "client"):
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in (".cc", ".h"):
                continue
            text = path.read_text()
            # Adjacent literals ("a" "b") are one string to the compiler.
            text = re.sub(r'"\s*\n\s*"', "", text)
            chunks.extend(re.findall(r'"((?:[^"\\\n]|\\.)*)"', text))
    return chunks


def check(doc, code):
    return [f"docs/operations.md:{n}: no code writes the log message `{m}`"
            for n, m in documented_messages(doc) if not any(c.startswith(m) for c in code)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=Path(__file__).resolve().parent.parent.parent, type=Path)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    doc = (args.root / "docs" / "operations.md").read_text()
    code = literals(args.root)
    if args.self_test:
        found = documented_messages(doc)
        bad = doc.replace("| `api` | `call refused` |", "| `api` | `call refused politely` |")
        failure = None
        if len(found) < 20:
            failure = f"only {len(found)} messages found in the table"
        elif check(doc, code):
            failure = "the table as it is was refused"
        elif bad == doc or not check(bad, code):
            failure = "a message no code writes was accepted"
        print(f"check_log_table self-test: {failure or 'ok'}")
        return 1 if failure else 0
    problems = check(doc, code)
    for p in problems:
        print(p)
    print(f"log table: {len(documented_messages(doc))} messages, {len(problems)} not in the code")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
