#!/usr/bin/env python3
"""Every `package` declaration of Strata and StrataEngine, with its users.

`package` access lets the package's other modules (StrataSync, the tool,
the test support, the tests) reach what users of the library cannot. This
lists each such declaration of `Sources/Strata` and `Sources/StrataEngine`
with the modules outside its own that name it, and writes the list to
`package-access.md`.

A module names a declaration when one of its files holds the name as a
word and, for a member, also its type's name or a member access
(`.name`): a textual census, not the compiler's, so a common member name
can count a module that uses another type's member of that name. A
declaration no other module names is listed with no users: it is either
reached through another declaration (a type's member used by inference)
or a candidate for `internal`.

Run from the package root: `python3 Tests/Census/package-access.py` (CI
runs it and fails when the checked-in output differs).
"""

import json
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DECLARING = ["Sources/Strata", "Sources/StrataEngine"]

DECL = re.compile(
    r"^(?P<indent>\s*)(?:@\w+(?:\([^)]*\))?\s+)*package\s+"
    r"(?:(?:static|final|mutating|nonisolated|override|lazy|indirect|convenience|required|private\(set\))\s+)*"
    r"(?P<kind>func|var|let|init|struct|class|enum|protocol|typealias|subscript|actor)\b\s*(?P<name>[A-Za-z_]\w*)?"
)
TYPE = re.compile(
    r"^(?P<indent>\s*)(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|private|fileprivate|internal|final|indirect)\s+)*"
    r"(?:struct|class|enum|protocol|extension|actor)\s+(?P<name>[A-Za-z_][\w.]*)"
)


def swift_files(directory):
    for base, _, names in os.walk(os.path.join(ROOT, directory)):
        for name in sorted(names):
            if name.endswith(".swift"):
                yield os.path.join(base, name)


def module_of(path):
    parts = os.path.relpath(path, ROOT).split(os.sep)
    return parts[1]


def declarations():
    for directory in DECLARING:
        for path in swift_files(directory):
            stack = []  # (indent, type name)
            for number, line in enumerate(open(path, encoding="utf-8"), 1):
                stripped = line.lstrip()
                if not stripped or stripped.startswith("//"):
                    continue
                indent = len(line) - len(stripped)
                while stack and stack[-1][0] >= indent:
                    stack.pop()
                match = DECL.match(line)
                if match:
                    kind = match.group("kind")
                    name = match.group("name") or kind
                    owner = stack[-1][1] if stack else None
                    yield {
                        "module": module_of(path),
                        "file": os.path.relpath(path, ROOT),
                        "line": number,
                        "kind": kind,
                        "name": name,
                        "owner": owner,
                    }
                type_match = TYPE.match(line)
                if type_match and line.rstrip().endswith("{"):
                    stack.append((indent, type_match.group("name").split(".")[-1]))


def dependents():
    """Module → the modules that depend on it, directly or not (from the
    manifest, with every test target in it)."""
    env = dict(os.environ)
    for name in ("STRATA_TEST_TARGETS", "STRATA_WITHOUT_TEST_TARGETS"):
        env.pop(name, None)
    manifest = json.loads(
        subprocess.run(["swift", "package", "dump-package"], cwd=ROOT, env=env, capture_output=True, check=True).stdout)
    depends = {}
    paths = {}
    for target in manifest["targets"]:
        names = set()
        for dependency in target["dependencies"]:
            for key in ("byName", "target"):
                if key in dependency:
                    names.add(dependency[key][0])
        depends[target["name"]] = names
        default = ("Tests/" if target["type"] == "test" else "Sources/") + target["name"]
        paths[target["name"]] = target.get("path") or default

    def closure(name, seen):
        for dependency in depends.get(name, ()):
            if dependency not in seen:
                seen.add(dependency)
                closure(dependency, seen)
        return seen

    users = {}
    for name in depends:
        for dependency in closure(name, set()):
            users.setdefault(dependency, set()).add(name)
    # Folder name (the census's module name) → target name.
    folders = {paths[name].rstrip("/").split("/")[-1]: name for name in paths}
    return users, folders


def main():
    dependent, folders = dependents()
    texts = {}
    for directory in ["Sources", "Tests", "Benchmarks/Sources", "Fuzz/Sources"]:
        for path in swift_files(directory):
            texts[path] = open(path, encoding="utf-8").read()
    found = list(declarations())
    lines = [
        "# `package` declarations of Strata and StrataEngine, with their users",
        "",
        "Written by `Tests/Census/package-access.py` (see its header for how a",
        "user is found). A user is a module other than the declaring one.",
        "",
    ]
    for module in ["Strata", "StrataEngine"]:
        rows = [d for d in found if d["module"] == module]
        lines += ["## " + module + " (" + str(len(rows)) + ")", "", "| declaration | file | users |", "|---|---|---|"]
        for d in rows:
            word = re.compile(r"\b" + re.escape(d["name"]) + r"\b")
            users = set()
            for path, text in texts.items():
                user = module_of(path) if path.startswith(os.path.join(ROOT, "Sources")) else os.path.relpath(
                    path, ROOT).split(os.sep)[1]
                if path.startswith(os.path.join(ROOT, "Benchmarks")):
                    user = "Benchmarks"
                if path.startswith(os.path.join(ROOT, "Fuzz")):
                    user = "Fuzz"
                if user == module or user in users:
                    continue
                if folders.get(user, user) not in dependent.get(module, ()) and user not in ("Benchmarks", "Fuzz"):
                    continue
                if d["kind"] == "init":
                    if d["owner"] and re.search(r"\b" + re.escape(d["owner"]) + r"\s*\(", text):
                        users.add(user)
                    continue
                if not word.search(text):
                    continue
                if d["owner"] and d["kind"] not in ("struct", "class", "enum", "protocol", "typealias", "actor"):
                    if not re.search(r"\b" + re.escape(d["owner"]) + r"\b", text):
                        continue
                    if not re.search(r"\." + re.escape(d["name"]) + r"\b", text) and d["kind"] != "func":
                        continue
                users.add(user)
            label = (d["owner"] + "." if d["owner"] else "") + d["name"]
            label += "()" if d["kind"] in ("func", "init", "subscript") else ""
            where = d["file"].split("/", 2)[2] + ":" + str(d["line"])
            lines.append("| `" + label + "` | " + where + " | " + (", ".join(sorted(users)) or "none") + " |")
        lines.append("")
    with open(os.path.join(HERE, "package-access.md"), "w", encoding="utf-8") as out:
        out.write("\n".join(lines))


if __name__ == "__main__":
    main()
