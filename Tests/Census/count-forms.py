#!/usr/bin/env python3
"""Census of SwiftData forms in real data-layer code.

Usage
  python3 Tests/Census/count-forms.py DIR              # plain table
  python3 Tests/Census/count-forms.py --markdown DIR   # markdown table
  python3 Tests/Census/count-forms.py --repos DIR      # owner/name commit file-count
  python3 Tests/Census/count-forms.py --extract MIRRORS DIR [owner/name ...]
      copies qualifying files of each bare git snapshot MIRRORS/<owner+name>/repo
      (HEAD) to DIR/<owner+name>/<path>, writes DIR/<owner+name>/_commit.txt and
      DIR/<owner+name>/_settings.txt (Swift language settings). Needs `git`.

DIR holds one directory per repository (<owner+name>), each with the .swift
files of that repository (any depth), a _commit.txt and a _settings.txt.
Directories whose name starts with "_" are ignored.

A file qualifies (at --extract) when it contains `import SwiftData` and is not
a SwiftUI view file. A view file is one matching `:\\s*View\\b`, `some View`
or `#Preview`; it still qualifies if it also contains `@Model`,
`@ModelActor`, `VersionedSchema` or `SchemaMigrationPlan`. Files under
.build/, Pods/, Carthage/, DerivedData/ and checkouts are skipped. Within one
repository, files with identical content are kept once.

Counting is by regular expressions over the source with comments removed and
the contents of string literals blanked (so code inside strings or comments
does not count). This is not a Swift parser; known limitations:
  * context calls (.insert/.delete/.save/.fetch ...) are counted only when the
    receiver's name contains "context"/"Context"/"ctx" (modelContext,
    context, mainContext, self.modelContext, ...); calls through other names
    (store.save(), db.fetch(...)) are missed, bare calls inside a
    ModelContext extension are missed;
  * @Model property forms look only at declarations directly in the class
    body of `@Model ... class Name ... { }` (not extensions); a declaration
    is split on newlines outside (), [] and {};
  * a property is a relationship when its type (without ?, [], Set<>) names a
    @Model class of the same repository; a "non-standard type" is any other
    type not in a fixed list of standard/Foundation types (approximates
    enums and Codable structs used as attributes);
  * "model subclass" means the first type after `:` is a @Model class of the
    same repository (exact within the repo, misses superclasses defined
    elsewhere); "first supertype not a known protocol" is the approximate
    form: not a known Swift protocol, not declared as `protocol X` or used
    as `any X`/`some X` in the repo, and not ending in -able/-ible/-ing/
    -Protocol/-Type;
  * predicate forms look inside `#Predicate ... { }` bodies only; relationship
    traversal is `param.a.b` where neither a nor b is a known value
    method/property (count, rawValue, lowercased, ...);
    ternary is ` ? x : y` with spaces; negation is `!` before a name or `(`;
  * language settings are per repository from Package.swift files and
    project.pbxproj files (any target, any configuration): a repository
    counts once for each distinct value it has.
Output is sorted by section, then by number of files (descending), then by
form name, so it is deterministic for the same DIR.
"""

import os
import re
import subprocess
import sys
from collections import defaultdict

# --------------------------------------------------------------------------
# Lexing: remove comments, blank string contents (same length, newlines kept)
# --------------------------------------------------------------------------


def mask_source(src):
    """Return src with comments replaced by spaces and string literal
    contents replaced by 'x' (quotes kept), newlines preserved."""
    out = []
    i, n = 0, len(src)

    def blank(s):
        return "".join("\n" if c == "\n" else " " for c in s)

    def xs(s):
        return "".join("\n" if c == "\n" else "x" for c in s)

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(src[i:j]))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth += 1
                    j += 2
                elif src.startswith("*/", j):
                    depth -= 1
                    j += 2
                else:
                    j += 1
            out.append(blank(src[i:j]))
            i = j
        elif c == '"' or (c == "#" and re.match(r'#+"', src[i:i + 8])):
            # string literal, possibly raw (#"..."#) or multi-line ("""...""")
            hashes = 0
            while src[i + hashes] == "#":
                hashes += 1
            start = i + hashes
            if src.startswith('"""', start):
                close = '"""' + "#" * hashes
                j = src.find(close, start + 3)
                j = n if j < 0 else j
                out.append(src[i:start + 3] + xs(src[start + 3:j]) + src[j:j + len(close)])
                i = j + len(close)
                continue
            close = '"' + "#" * hashes
            j = start + 1
            depth = 0  # parenthesis depth inside \( ) interpolation
            while j < n:
                ch = src[j]
                if ch == "\n" and depth == 0:
                    break
                if hashes == 0 and ch == "\\" and j + 1 < n:
                    if src[j + 1] == "(":
                        depth += 1
                        j += 2
                        continue
                    j += 2
                    continue
                if depth:
                    if ch == "(":
                        depth += 1
                    elif ch == ")":
                        depth -= 1
                    j += 1
                    continue
                if src.startswith(close, j):
                    break
                j += 1
            out.append(src[i:start + 1] + xs(src[start + 1:j]) + src[j:j + len(close)])
            i = j + len(close)
        else:
            out.append(c)
            i += 1
    return "".join(out)


def match_close(text, pos, open_ch="{", close_ch="}"):
    """text[pos] == open_ch; return index of the matching close (or len)."""
    depth = 0
    for j in range(pos, len(text)):
        ch = text[j]
        if ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return j
    return len(text)


def call_args(text, start):
    """text[start] == '('; return the argument text inside the parentheses."""
    end = match_close(text, start, "(", ")")
    return text[start + 1:end]


def split_top(args, sep=","):
    """Split at separators not nested in (), [], {}, <>."""
    parts, depth, cur = [], 0, []
    for ch in args:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return [p.strip() for p in parts]


# --------------------------------------------------------------------------
# @Model class bodies
# --------------------------------------------------------------------------

MODEL_RE = re.compile(
    r"@Model\b(?P<pre>(?:\s+(?:@[\w.]+(?:\([^)]*\))?|public|internal|package|open|final|"
    r"fileprivate|private|nonisolated))*)\s+class\s+(?P<name>\w+)(?P<head>[^{]*)\{")

STANDARD_TYPES = {
    "String", "Int", "Int8", "Int16", "Int32", "Int64", "UInt", "UInt8", "UInt16",
    "UInt32", "UInt64", "Double", "Float", "Bool", "Date", "Data", "UUID", "URL",
    "Decimal", "CGFloat", "TimeInterval", "Character", "Substring", "Float16",
    "Float32", "Float64", "CGPoint", "CGSize", "CGRect", "Array", "Dictionary",
    "Set", "Optional", "DateComponents", "PersistentIdentifier", "Any",
}

KNOWN_PROTOCOLS = {
    "Identifiable", "Hashable", "Equatable", "Codable", "Decodable", "Encodable",
    "Sendable", "Comparable", "CustomStringConvertible", "Transferable",
    "ObservableObject", "PersistentModel", "CustomDebugStringConvertible",
}

PROP_RE = re.compile(
    r"^(?P<attrs>(?:@[\w.]+(?:\((?:[^()]|\([^()]*\))*\))?\s*)*)"
    r"(?P<mods>(?:(?:public|private|fileprivate|internal|package|open|static|class|final|lazy|"
    r"nonisolated|weak|unowned|override|dynamic|@[\w.]+)(?:\((?:set|unsafe)\))?\s+)*)"
    r"(?P<kw>var|let)\s+(?P<name>\w+)\s*"
    r"(?::\s*(?P<type>[^=]+?))?\s*"
    r"(?:=\s*(?P<init>.+?))?\s*"
    r"(?P<block>\{#\d+\})?\s*$", re.S)

INIT_RE = re.compile(
    r"^(?P<attrs>(?:@[\w.]+(?:\((?:[^()]|\([^()]*\))*\))?\s*)*)"
    r"(?P<mods>(?:(?:public|private|fileprivate|internal|package|open|required|convenience|"
    r"override|nonisolated|@[\w.]+)\s+)*)init(?P<fail>[?!]?)\s*\(", re.S)


def split_body(body):
    """Split a class body into top-level statements; nested blocks become
    placeholders {#k}. Returns (statements, blocks)."""
    stmts, blocks = [], []
    cur, i, n = [], 0, len(body)
    paren = 0

    def flush():
        s = " ".join("".join(cur).split())
        cur.clear()
        if s:
            stmts.append(s)

    while i < n:
        ch = body[i]
        if ch == "{":
            j = match_close(body, i)
            blocks.append(body[i + 1:j])
            cur.append("{#%d}" % (len(blocks) - 1))
            i = j + 1
            continue
        if ch in "([":
            paren += 1
        elif ch in ")]":
            paren = max(0, paren - 1)
        if (ch == "\n" or ch == ";") and paren == 0:
            so_far = "".join(cur).rstrip()
            if so_far and not re.search(r"(=|,|->|:|&&|\|\||\+|-)$", so_far):
                flush()
            else:
                cur.append(" ")
        else:
            cur.append(ch)
        i += 1
    flush()
    # merge attribute-only statements and continuation lines
    merged = []
    for s in stmts:
        if merged and (re.match(r"^(\{#\d+\}|\.|=|\?|:|where\b|->)", s)
                       or re.fullmatch(r"(?:@[\w.]+(?:\((?:[^()]|\([^()]*\))*\))?\s*)+", merged[-1])):
            merged[-1] = merged[-1] + " " + s
        else:
            merged.append(s)
    return merged, blocks


def base_type_names(t):
    return re.findall(r"[A-Za-z_]\w*", t)


def classify_type(t, model_names):
    """Return a set of form names describing a property type."""
    forms = set()
    t = t.strip()
    core = t
    optional = False
    if core.endswith("?") or core.endswith("!"):
        optional = True
        core = core[:-1].strip()
    m = re.fullmatch(r"Optional<(.+)>", core)
    if m:
        optional = True
        core = m.group(1).strip()
    if optional:
        forms.add("optional type `T?`")
    is_array = is_dict = is_set = False
    inner = core
    if core.startswith("[") and core.endswith("]"):
        if len(split_top(core[1:-1], ":")) == 2:
            is_dict = True
        else:
            is_array = True
            inner = core[1:-1].strip()
    elif re.fullmatch(r"Array<(.+)>", core):
        is_array = True
        inner = re.fullmatch(r"Array<(.+)>", core).group(1)
    elif re.fullmatch(r"Set<(.+)>", core):
        is_set = True
        inner = re.fullmatch(r"Set<(.+)>", core).group(1)
    elif re.fullmatch(r"Dictionary<(.+)>", core):
        is_dict = True
    names = base_type_names(inner)
    is_model = bool(names) and names[0] in model_names and not is_dict
    if is_model:
        if is_array or is_set:
            forms.add("relationship to-many (`[Model]`)")
            if optional:
                forms.add("relationship to-many optional (`[Model]?`)")
        else:
            forms.add("relationship to-one (`Model` / `Model?`)")
    else:
        if is_array:
            forms.add("array attribute `[T]` (T not a model)")
        if is_set:
            forms.add("Set<T> attribute")
        if is_dict:
            forms.add("dictionary attribute `[K: V]`")
        for nm in names:
            if nm in STANDARD_TYPES:
                if nm in ("Date", "Data", "UUID", "URL", "Decimal", "Double", "Int", "Bool",
                          "String", "Float", "CGFloat", "TimeInterval", "Int64", "Int32",
                          "Int16", "UInt"):
                    forms.add("attribute type %s" % nm)
            elif nm not in model_names:
                forms.add("non-standard attribute type (enum/struct/Codable, approx.)")
    return forms


def init_kind(init):
    init = init.strip()
    if re.fullmatch(r"-?\d[\d_]*(\.\d+)?", init):
        return "number literal"
    if re.fullmatch(r'#*"+.*"+#*', init, re.S):
        return "string literal"
    if init in ("true", "false"):
        return "bool literal"
    if init == "nil":
        return "nil"
    if re.fullmatch(r"\[\s*:?\s*\]", init) or re.fullmatch(r"\[.*\]", init, re.S):
        return "array/dict literal"
    if re.fullmatch(r"\.\w+(\(.*\))?", init, re.S):
        return "implicit member (`.x`)"
    if re.fullmatch(r"[A-Z]\w*(<.*>)?\.\w+", init):
        return "Type.member"
    if re.fullmatch(r"[\[\]\w<>.:? ]+\(.*\)", init, re.S):
        return "initializer call"
    return "other expression"


def model_forms(masked, model_names, protocol_names=frozenset()):
    """Forms found in the @Model classes of one file."""
    forms = set()
    nmodels = 0
    for m in MODEL_RE.finditer(masked):
        nmodels += 1
        name = m.group("name")
        pre = m.group("pre")
        head = m.group("head")
        bopen = m.end() - 1
        bclose = match_close(masked, bopen)
        body = masked[bopen + 1:bclose]
        forms.add("@Model class")
        # nesting level of the @Model declaration
        depth = masked[:m.start()].count("{") - masked[:m.start()].count("}")
        if depth > 0:
            forms.add("@Model nested in a type (e.g. VersionedSchema enum)")
        forms.add("final class" if re.search(r"\bfinal\b", pre) else "non-final class")
        if re.search(r"\b(public|open)\b", pre):
            forms.add("public/open model class")
        if "@MainActor" in pre:
            forms.add("@MainActor on model class")
        if "nonisolated" in pre:
            forms.add("nonisolated on model class")
        for a in re.findall(r"@[\w.]+", pre):
            if a not in ("@MainActor",):
                forms.add("other attribute on model class (%s)" % a)
        inh = [x for x in split_top(re.sub(r"\bwhere\b.*", "", head).lstrip(":").strip()) if x]
        if inh:
            first = re.sub(r"<.*", "", inh[0]).strip()
            if first in model_names and first != name:
                forms.add("model subclass of another @Model")
            elif first not in KNOWN_PROTOCOLS and first not in protocol_names and not re.search(
                    r"(able|ible|Protocol|ing|Convertible|Type)$", first):
                forms.add("first supertype not a known protocol (approx. subclass)")
            for x in inh:
                x = re.sub(r"<.*", "", x).strip()
                if x in KNOWN_PROTOCOLS:
                    forms.add("model conforms to %s" % x)
            if any(re.sub(r"<.*", "", x).strip() in ("Codable", "Decodable", "Encodable") for x in inh):
                forms.add("model conforms to Codable/Decodable/Encodable")
        stmts, blocks = split_body(body)
        n_init = 0
        for s in stmts:
            if s.startswith("#if") or "#if " in s:
                forms.add("#if inside model body")
            if re.match(r"#Unique\b", s):
                forms.add("#Unique<...>")
            if re.match(r"#Index\b", s):
                forms.add("#Index<...>")
            im = INIT_RE.match(s)
            if im:
                n_init += 1
                mods = im.group("mods")
                if "convenience" in mods:
                    forms.add("convenience init")
                if "required" in mods:
                    forms.add("required init")
                if im.group("fail"):
                    forms.add("failable init?")
                params = call_args(s, s.index("(", im.end() - 1))
                if re.search(r"\bfrom\s+decoder\s*:", params):
                    forms.add("init(from decoder:) (Codable)")
                elif not params.strip():
                    forms.add("init() without parameters")
                elif re.search(r"=", params):
                    forms.add("init with default argument values")
                else:
                    forms.add("init with parameters, no defaults")
                continue
            if re.match(r"^(?:(?:@[\w.]+(?:\([^)]*\))?|public|private|fileprivate|internal|"
                        r"package|open|static|class|final|override|nonisolated|mutating)\s+)*func\s", s):
                forms.add("method (func) in model")
                if re.search(r"\b(static|class)\s+(?:\w+\s+)*func\b", s):
                    forms.add("static func in model")
                if re.search(r"\bfunc\s+encode\s*\(\s*to\s+encoder", s):
                    forms.add("func encode(to:) (Codable)")
                continue
            if re.match(r"^(?:(?:public|private|fileprivate|internal|package|@[\w.]+)\s+)*"
                        r"(?:indirect\s+)?(enum|struct|class|actor|protocol)\s", s):
                forms.add("nested type in model")
                continue
            if re.match(r"^(?:(?:public|private|fileprivate|internal|package)\s+)*typealias\s", s):
                forms.add("typealias in model")
                continue
            pm = PROP_RE.match(s)
            if not pm:
                continue
            attrs, mods, kw = pm.group("attrs"), pm.group("mods"), pm.group("kw")
            ptype, pinit, block = pm.group("type"), pm.group("init"), pm.group("block")
            allmods = attrs + " " + mods
            if re.search(r"\b(static|class)\b", mods):
                forms.add("static property in model")
                continue
            computed = False
            if block:
                inner = blocks[int(block[2:-1])]
                if not re.fullmatch(r"\s*((willSet|didSet)(\s*\(\s*\w+\s*\))?\s*\{#?\d*\}?\s*)+\s*",
                                    re.sub(r"\{[^{}]*\}", "{}", inner)):
                    computed = True
                else:
                    forms.add("property observer (willSet/didSet)")
            if computed:
                forms.add("computed property in model")
                if "@Transient" in attrs:
                    forms.add("@Transient on computed property")
                continue
            if "@MainActor" in allmods:
                forms.add("@MainActor on model member")
            if re.search(r"\bnonisolated\b", allmods):
                forms.add("nonisolated on model member")
            if "lazy" in mods:
                forms.add("lazy var in model")
            if "@Transient" in attrs:
                forms.add("@Transient stored property")
            if "@Attribute" in attrs:
                forms.add("@Attribute on property")
            if "@Relationship" in attrs:
                forms.add("@Relationship on property")
            for a in re.findall(r"@([\w.]+)", attrs):
                if a not in ("Attribute", "Relationship", "Transient", "MainActor"):
                    forms.add("other property wrapper/attribute on model property (@%s)" % a)
            if kw == "let":
                forms.add("`let` stored property")
            if re.search(r"\bprivate\(set\)", mods):
                forms.add("private(set) property")
            elif re.search(r"\bprivate\b", mods):
                forms.add("private property")
            if re.search(r"\bfileprivate\b", mods):
                forms.add("fileprivate property")
            if re.search(r"\b(public|open)\b", mods):
                forms.add("public property")
            if re.search(r"\bpackage\b", mods):
                forms.add("package property")
            if pm.group("name") == "id":
                forms.add("model declares its own `id` property")
            if ptype and pinit is None:
                forms.add("stored `var x: T` (no default)")
            elif ptype and pinit is not None:
                forms.add("stored `var x: T = default`")
                k = init_kind(pinit)
                forms.add("default value kind: %s" % k)
            elif pinit is not None:
                forms.add("stored `var x = value` (type inferred)")
                k = init_kind(pinit)
                forms.add("default value kind: %s" % k)
                if re.fullmatch(r"\[\s*\w+\s*\]\(\)", pinit.strip()):
                    it = re.findall(r"\w+", pinit)[0]
                    if it in model_names:
                        forms.add("relationship to-many (`[Model]`)")
                        forms.add("relationship to-many via `= [Model]()`")
                    else:
                        forms.add("array attribute `[T]` (T not a model)")
            if ptype:
                tf = classify_type(ptype, model_names)
                forms |= tf
                if ("relationship to-many optional (`[Model]?`)" in tf and pinit is not None
                        and re.fullmatch(r"\[\s*\]", pinit.strip())):
                    forms.add("relationship to-many optional with default `= []`")
                if ("relationship to-many (`[Model]`)" in tf and pinit is not None
                        and "relationship to-many optional (`[Model]?`)" not in tf
                        and re.fullmatch(r"\[\s*\]", pinit.strip())):
                    forms.add("relationship to-many non-optional with default `= []`")
                if (tf & {"relationship to-many (`[Model]`)", "relationship to-one (`Model` / `Model?`)"}
                        and "@Relationship" not in attrs):
                    forms.add("relationship without @Relationship")
        if n_init == 0:
            forms.add("model without explicit init")
        elif n_init > 1:
            forms.add("model with several inits")
    return forms, nmodels


# --------------------------------------------------------------------------
# Attribute / Relationship macro arguments (file level)
# --------------------------------------------------------------------------


def macro_arg_forms(masked):
    forms = set()
    for m in re.finditer(r"@Attribute\b", masked):
        rest = masked[m.end():]
        if rest.lstrip().startswith("(") and not re.match(r"\s*\n", rest):
            args = call_args(masked, masked.index("(", m.end()))
            if not args.strip():
                forms.add("@Attribute() (no options)")
            for opt, label in ((r"\.unique\b", ".unique"),
                               (r"\.externalStorage\b", ".externalStorage"),
                               (r"\.transformable\s*\(\s*by\s*:", ".transformable(by:)"),
                               (r"\.ephemeral\b", ".ephemeral"),
                               (r"\.spotlight\b", ".spotlight"),
                               (r"\.allowsCloudEncryption\b", ".allowsCloudEncryption"),
                               (r"\.preserveValueOnDeletion\b", ".preserveValueOnDeletion"),
                               (r"\.encrypt\b", ".encrypt"),
                               (r"\boriginalName\s*:", "originalName:"),
                               (r"\bhashModifier\s*:", "hashModifier:")):
                if re.search(opt, args):
                    forms.add("@Attribute(%s)" % label)
        else:
            forms.add("@Attribute without arguments")
    for m in re.finditer(r"@Relationship\b", masked):
        rest = masked[m.end():]
        if rest.lstrip().startswith("(") and not re.match(r"\s*\n", rest):
            args = call_args(masked, masked.index("(", m.end()))
            if not args.strip():
                forms.add("@Relationship() (no arguments)")
            for opt, label in ((r"deleteRule\s*:\s*\.cascade", "deleteRule: .cascade"),
                               (r"deleteRule\s*:\s*\.nullify", "deleteRule: .nullify"),
                               (r"deleteRule\s*:\s*\.deny", "deleteRule: .deny"),
                               (r"deleteRule\s*:\s*\.noAction", "deleteRule: .noAction"),
                               (r"^\s*\.cascade", ".cascade (unlabelled, pre-release form)"),
                               (r"\binverse\s*:", "inverse:"),
                               (r"\bminimumModelCount\s*:", "minimumModelCount:"),
                               (r"\bmaximumModelCount\s*:", "maximumModelCount:"),
                               (r"\boriginalName\s*:", "originalName:"),
                               (r"\bhashModifier\s*:", "hashModifier:"),
                               (r"\.unique\b", ".unique")):
                if re.search(opt, args):
                    forms.add("@Relationship(%s)" % label)
        else:
            forms.add("@Relationship without arguments")
    return forms


# --------------------------------------------------------------------------
# Predicates
# --------------------------------------------------------------------------

VALUE_MEMBERS = {
    "count", "isEmpty", "contains", "localizedStandardContains", "lowercased", "uppercased",
    "starts", "hasPrefix", "hasSuffix", "rawValue", "caseInsensitiveCompare", "localizedCompare",
    "description", "first", "last", "filter", "allSatisfy", "flatMap", "map", "min", "max",
    "timeIntervalSince1970", "timeIntervalSinceReferenceDate", "uuidString",
    "localizedLowercase", "localizedCaseInsensitiveContains", "absoluteString", "self",
}


def predicate_forms(masked):
    forms = set()
    npred = 0
    for m in re.finditer(r"#Predicate\b(?P<gen>\s*<[^>{]*>)?\s*(?P<paren>\()?", masked):
        npred += 1
        forms.add("#Predicate (any)")
        forms.add("#Predicate<T> { } (explicit type)" if m.group("gen") else "#Predicate { } (type inferred)")
        if m.group("paren"):
            forms.add("#Predicate(...) with parenthesised argument")
        b = masked.find("{", m.end())
        if b < 0:
            continue
        body = masked[b + 1:match_close(masked, b)]
        pm = re.match(r"\s*\(?\s*(\w+)(?:\s*:\s*[\w.<>]+)?\s*\)?\s+in\b", body)
        if pm:
            params = [pm.group(1)]
            body_expr = body[pm.end():]
            forms.add("predicate with named parameter (`x in`)")
            if params[0] == "_":
                forms.add("predicate ignoring its parameter (`_ in`)")
        else:
            params = ["$0"]
            body_expr = body
            if "$0" in body:
                forms.add("predicate with `$0`")
        pv = "|".join(re.escape(p) for p in params if p != "_") or r"\$0"
        checks = (
            (r"\.contains\(\s*(?!where\s*:)", ".contains(x)"),
            (r"\.contains\s*(\(\s*where\s*:|\{)", ".contains(where:) / .contains { }"),
            (r"\.localizedStandardContains\(", ".localizedStandardContains("),
            (r"\.localizedCaseInsensitiveContains\(", ".localizedCaseInsensitiveContains("),
            (r"\.starts\(\s*with\s*:", ".starts(with:"),
            (r"\.hasPrefix\(", ".hasPrefix("),
            (r"\.hasSuffix\(", ".hasSuffix("),
            (r"\.caseInsensitiveCompare\(", ".caseInsensitiveCompare("),
            (r"\.localizedCompare\(", ".localizedCompare("),
            (r"\.lowercased\(\)", ".lowercased()"),
            (r"\.uppercased\(\)", ".uppercased()"),
            (r"\.isEmpty\b", ".isEmpty"),
            (r"\.count\b", ".count"),
            (r"\?\?", "?? (nil-coalescing)"),
            (r"\bif\s+let\b", "if let"),
            (r"\bflatMap\b", "flatMap"),
            (r"\.evaluate\(", ".evaluate( inside predicate"),
            (r"==\s*nil\b", "== nil"),
            (r"!=\s*nil\b", "!= nil"),
            (r"\w\?\.", "optional chaining `?.`"),
            (r"\.filter\s*[({]", ".filter"),
            (r"\.allSatisfy\b", ".allSatisfy"),
            (r"\.map\s*[({]", ".map"),
            (r"\bpersistentModelID\s*==|==\s*[\w.$]*persistentModelID\b", "persistentModelID =="),
            (r"\s\?\s[^:?]+\s:\s", "ternary `c ? a : b`"),
            (r"&&", "&&"),
            (r"\|\|", "||"),
            (r"(?<![=!<>])!(?!=)\s*[\w($]", "! (negation)"),
            (r"(?<![=!<>])(<|>|<=|>=)(?!=)", "< > <= >= comparison"),
            (r"==", "=="),
            (r"!=(?!\s*nil)", "!= (non-nil)"),
            (r"\.rawValue\b", ".rawValue"),
            (r"==\s*\.\w+\b(?!\()", "== .enumCase (implicit member)"),
            (r"\bDate\s*\(\s*\)|\bDate\.now\b", "Date()/Date.now inside predicate"),
            (r"\b(?:%s)\s*\.\s*id\s*==|==\s*\w+\.id\b" % pv, ".id == (own id attribute)"),
            (r"\breturn\b", "explicit `return`"),
            (r"^\s*(true|false)\s*$", "constant true/false"),
            (r"\bswitch\b", "switch"),
            (r"\blet\s+\w+\s*=", "local `let` inside predicate"),
            (r"\.min\(\)|\.max\(\)", ".min()/.max()"),
            (r"\.first\b|\.last\b", ".first/.last"),
            (r"\bString\(|\bInt\(", "type conversion String()/Int()"),
        )
        for rx, label in checks:
            if re.search(rx, body_expr, re.M):
                forms.add("predicate: " + label)
        if re.search(r"(?:^|[^\w.$])(?:%s)\??\.\w+\??\.(\w+)" % pv, body_expr):
            for mm in re.finditer(r"(?:^|[^\w.$])(?:%s)\??\.(\w+)\??\.(\w+)" % pv, body_expr):
                if mm.group(1) not in VALUE_MEMBERS and mm.group(2) not in VALUE_MEMBERS:
                    forms.add("predicate: relationship traversal `x.a.b`")
                    break
        for mm in re.finditer(r"([\w$.]+)\s*\.contains\(\s*(?!where)([\w$]+)", body_expr):
            recv = mm.group(1).split(".")[0]
            if recv not in params and recv != "$0":
                forms.add("predicate: captured collection `.contains(x.attr)`")
                break
        if re.search(r"\.contains\(\s*(?:%s)\b" % pv, body_expr):
            forms.add("predicate: captured collection `.contains(x.attr)`")
        if body_expr.count("\n") >= 3:
            forms.add("predicate: multi-line body (>3 lines)")
    return forms, npred


# --------------------------------------------------------------------------
# Call forms (ModelContainer, ModelConfiguration, Schema, modelContainer)
# --------------------------------------------------------------------------


def call_forms(masked):
    forms = set()
    for m in re.finditer(r"(?<![\w.])ModelContainer\s*\(", masked):
        forms.add("ModelContainer( (any)")
        args = split_top(call_args(masked, m.end() - 1))
        labels = [re.match(r"\s*(\w+)\s*:", a).group(1) if re.match(r"\s*(\w+)\s*:(?!:)", a) else None
                  for a in args]
        if not args:
            forms.add("ModelContainer() no arguments")
        if args and labels[0] == "for":
            first = args[0].split(":", 1)[1].strip()
            follow_unlabelled = [a for a, l in zip(args[1:], labels[1:]) if l is None]
            if re.search(r"\.self\s*$", first):
                if follow_unlabelled:
                    forms.add("ModelContainer(for: A.self, B.self, ...) variadic types")
                else:
                    forms.add("ModelContainer(for: A.self) single type")
            elif re.match(r"Schema\s*\(", first):
                forms.add("ModelContainer(for: Schema(...)) inline schema")
            elif first.startswith("["):
                forms.add("ModelContainer(for: [ ... ]) array argument")
            else:
                forms.add("ModelContainer(for: schema) schema value")
        for a, l in zip(args, labels):
            if l == "configurations":
                v = a.split(":", 1)[1].strip()
                forms.add("ModelContainer configurations: [array]" if v.startswith("[")
                          else "ModelContainer configurations: variadic value")
            if l == "migrationPlan":
                forms.add("ModelContainer migrationPlan:")
        if "configurations" in labels and len([l for l in labels if l is None]) >= 1:
            forms.add("ModelContainer configurations: several (variadic)")
    for m in re.finditer(r"(?<![\w.])ModelConfiguration\s*\(", masked):
        forms.add("ModelConfiguration( (any)")
        args = split_top(call_args(masked, m.end() - 1))
        if not args:
            forms.add("ModelConfiguration() no arguments")
        for i, a in enumerate(args):
            lm = re.match(r"\s*(\w+)\s*:(?!:)", a)
            if lm:
                lab = lm.group(1)
                forms.add("ModelConfiguration %s:" % lab)
                v = a.split(":", 1)[1].strip()
                if lab == "cloudKitDatabase":
                    vm = re.match(r"\.(\w+)", v)
                    forms.add("ModelConfiguration cloudKitDatabase: .%s" % (vm.group(1) if vm else "<expr>"))
                if lab == "groupContainer":
                    vm = re.match(r"\.(\w+)", v)
                    forms.add("ModelConfiguration groupContainer: .%s" % (vm.group(1) if vm else "<expr>"))
                if lab == "isStoredInMemoryOnly" and v not in ("true", "false"):
                    forms.add("ModelConfiguration isStoredInMemoryOnly: <expression>")
            elif i == 0:
                forms.add("ModelConfiguration(\"name\", ...) positional name")
            else:
                forms.add("ModelConfiguration extra unlabelled argument (variadic types)")
    for m in re.finditer(r"\.modelContainer\s*\(", masked):
        forms.add(".modelContainer( modifier")
        args = call_args(masked, m.end() - 1)
        if re.match(r"\s*for\s*:", args):
            forms.add(".modelContainer(for:) modifier")
        else:
            forms.add(".modelContainer(container) modifier")
        if re.search(r"\binMemory\s*:", args):
            forms.add(".modelContainer(... inMemory:)")
        if re.search(r"\bisAutosaveEnabled\s*:", args):
            forms.add(".modelContainer(... isAutosaveEnabled:)")
        if re.search(r"\bisUndoEnabled\s*:", args):
            forms.add(".modelContainer(... isUndoEnabled:)")
        if re.search(r"\bonSetup\s*:", args):
            forms.add(".modelContainer(... onSetup:)")
    for m in re.finditer(r"(?<![\w.])Schema\s*\(", masked):
        args = call_args(masked, m.end() - 1).strip()
        if re.match(r"versionedSchema\s*:", args):
            forms.add("Schema(versionedSchema:)")
        elif args.startswith("["):
            forms.add("Schema([A.self, ...])")
        elif not args:
            forms.add("Schema()")
        else:
            forms.add("Schema(other arguments)")
    return forms


# --------------------------------------------------------------------------
# Simple file-level regexes: (section, form, regex)
# --------------------------------------------------------------------------

CTX = r"(?:\b\w*(?:[cC]ontext|ctx)\w*|\bmainContext)\s*[!?]?\s*\."

SIMPLE = [
    # ---- model-level (file) ----
    ("2 model", "@Model (any use)", r"@Model\b"),
    ("2 model", "@Transient", r"@Transient\b"),
    ("2 model", "@Attribute (any)", r"@Attribute\b"),
    ("2 model", "@Relationship (any)", r"@Relationship\b"),
    # ---- predicates (file) ----
    ("3 predicate", "Predicate<T> type (stored/passed predicate)", r"(?<!#)\bPredicate<"),
    ("3 predicate", "#Expression", r"#Expression\b"),
    ("3 predicate", "Expression< type", r"(?<![#\w])Expression<"),
    ("3 predicate", ".evaluate( (predicate evaluation)", r"\.evaluate\("),
    ("3 predicate", "NSPredicate", r"\bNSPredicate\b"),
    ("3 predicate", "Predicate.true / constant predicate", r"#Predicate[^{]*\{\s*(?:_\s+in\s*)?true\s*\}"),
    # ---- fetch / context ----
    ("4 context", "FetchDescriptor<", r"\bFetchDescriptor<"),
    ("4 context", "FetchDescriptor( (type inferred)", r"\bFetchDescriptor\s*\("),
    ("4 context", "FetchDescriptor (any)", r"\bFetchDescriptor\b"),
    ("4 context", "fetchLimit", r"\bfetchLimit\b"),
    ("4 context", "fetchOffset", r"\bfetchOffset\b"),
    ("4 context", "propertiesToFetch", r"\bpropertiesToFetch\b"),
    ("4 context", "relationshipKeyPathsForPrefetching", r"\brelationshipKeyPathsForPrefetching\b"),
    ("4 context", "includePendingChanges", r"\bincludePendingChanges\b"),
    ("4 context", "SortDescriptor(", r"\bSortDescriptor\s*\("),
    ("4 context", "SortDescriptor<T> type", r"\bSortDescriptor<"),
    ("4 context", "SortDescriptor order: .reverse", r"order\s*:\s*\.reverse"),
    ("4 context", "SortDescriptor comparator: (.localizedStandard ...)", r"comparator\s*:\s*\."),
    ("4 context", "sortBy:", r"\bsortBy\s*:"),
    ("4 context", "context.fetch(", CTX + r"fetch\("),
    ("4 context", "context.fetchCount(", CTX + r"fetchCount\("),
    ("4 context", "context.fetchIdentifiers(", CTX + r"fetchIdentifiers\("),
    ("4 context", "fetch(..., batchSize:)", r"\bbatchSize\s*:"),
    ("4 context", "context.enumerate(", CTX + r"enumerate\("),
    ("4 context", "context.insert(", CTX + r"insert\("),
    ("4 context", "context.delete( (instance)", CTX + r"delete\(\s*(?!model\s*:)"),
    ("4 context", "context.delete(model:) (batch)", CTX + r"delete\(\s*model\s*:"),
    ("4 context", "context.delete(model:where:)", CTX + r"delete\(\s*model\s*:[^)]*where\s*:"),
    ("4 context", "context.save()", CTX + r"save\(\)"),
    ("4 context", "try? context.save()", r"try\?\s*" + CTX + r"save\(\)"),
    ("4 context", "context.rollback()", CTX + r"rollback\(\)"),
    ("4 context", "context.transaction { }", CTX + r"transaction\s*[({]"),
    ("4 context", "context.hasChanges", CTX + r"hasChanges\b"),
    ("4 context", "hasChanges (any receiver)", r"\bhasChanges\b"),
    ("4 context", "autosaveEnabled", r"\bautosaveEnabled\b"),
    ("4 context", ".model(for:)", r"\.model\(\s*for\s*:"),
    ("4 context", ".registeredModel(for:)", r"\.registeredModel\(\s*for\s*:"),
    ("4 context", "existingModel", r"\bexistingModel\b"),
    ("4 context", "persistentModelID", r"\bpersistentModelID\b"),
    ("4 context", "PersistentIdentifier", r"\bPersistentIdentifier\b"),
    ("4 context", "undoManager", r"\bundoManager\b"),
    ("4 context", "processPendingChanges", r"\bprocessPendingChanges\b"),
    ("4 context", "insertedModelsArray / changedModelsArray / deletedModelsArray",
     r"\b(inserted|changed|deleted)ModelsArray\b"),
    ("4 context", "fetchHistory", r"\bfetchHistory\b"),
    ("4 context", "deleteHistory", r"\bdeleteHistory\b"),
    ("4 context", "HistoryDescriptor", r"\bHistoryDescriptor\b"),
    ("4 context", "HistoryToken / DefaultHistoryToken", r"\b(Default)?HistoryToken\b"),
    ("4 context", "ModelContext( constructor", r"(?<![\w.])ModelContext\s*\("),
    ("4 context", "ModelContext type mention", r"\bModelContext\b"),
    ("4 context", "mainContext", r"\bmainContext\b"),
    ("4 context", "context.container", CTX + r"container\b"),
    ("4 context", "@ModelActor", r"@ModelActor\b"),
    ("4 context", "ModelActor protocol (conformance/constraint)", r"(?<!@)\bModelActor\b"),
    ("4 context", "modelExecutor", r"\bmodelExecutor\b"),
    ("4 context", "DefaultSerialModelExecutor", r"\bDefaultSerialModelExecutor\b"),
    ("4 context", "PersistentModel protocol (generic/any)", r"\bPersistentModel\b"),
    ("4 context", "generic <T: PersistentModel>", r"<\s*\w+\s*:\s*PersistentModel\b"),
    ("4 context", "@Query (outside views)", r"@Query\b"),
    ("4 context", "@Environment(\\.modelContext)", r"@Environment\(\s*\\\.modelContext\s*\)"),
    ("4 context", "SwiftDataError", r"\bSwiftDataError\b"),
    ("4 context", "NotificationCenter", r"\bNotificationCenter\b"),
    ("4 context", "ModelContext.didSave", r"ModelContext\.didSave\b|\.didSave\b"),
    ("4 context", "ModelContext.willSave", r"ModelContext\.willSave\b|\.willSave\b"),
    ("4 context", "NSManagedObjectContext.didSave / NSPersistentStoreRemoteChange",
     r"NSManagedObjectContext|NSPersistentStoreRemoteChange"),
    # ---- container ----
    ("5 container", "ModelContainer type mention", r"\bModelContainer\b"),
    ("5 container", "ModelConfiguration type mention", r"\bModelConfiguration\b"),
    ("5 container", "deleteAllData", r"\bdeleteAllData\b"),
    ("5 container", "erase()", r"\.erase\(\)"),
    ("5 container", "container.configurations / .url of configuration", r"\bconfigurations\.(first|last)|\.url\b.*[Cc]onfig|[Cc]onfig\w*\.url\b"),
    ("5 container", "Schema type mention", r"(?<![\w.])Schema\b"),
    ("5 container", "static shared container/preview container", r"static\s+(?:let|var)\s+\w*\s*[:=][^\n]*ModelContainer"),
    ("5 container", "fatalError( (e.g. container creation)", r"\bfatalError\("),
    # ---- migration ----
    ("6 migration", "VersionedSchema", r"\bVersionedSchema\b"),
    ("6 migration", "SchemaMigrationPlan", r"\bSchemaMigrationPlan\b"),
    ("6 migration", "Schema.Version(", r"Schema\.Version\s*\("),
    ("6 migration", "versionIdentifier", r"\bversionIdentifier\b"),
    ("6 migration", "static var models", r"static\s+(?:var|let)\s+models\b"),
    ("6 migration", "MigrationStage", r"\bMigrationStage\b"),
    ("6 migration", "MigrationStage.lightweight / .lightweight(", r"\.lightweight\s*\("),
    ("6 migration", "MigrationStage.custom / .custom(", r"\.custom\s*\(\s*fromVersion"),
    ("6 migration", "willMigrate: closure", r"willMigrate\s*:\s*(?!nil)"),
    ("6 migration", "willMigrate: nil", r"willMigrate\s*:\s*nil"),
    ("6 migration", "didMigrate: closure", r"didMigrate\s*:\s*(?!nil)"),
    ("6 migration", "didMigrate: nil", r"didMigrate\s*:\s*nil"),
    ("6 migration", "typealias to a versioned model (`typealias X = V2.X`)", r"typealias\s+\w+\s*=\s*\w+\.\w+"),
    # ---- foundation / platform ----
    ("7 foundation", "URL.documentsDirectory", r"\bURL\.documentsDirectory\b|\.documentsDirectory\b"),
    ("7 foundation", ".applicationSupportDirectory", r"\.applicationSupportDirectory\b"),
    ("7 foundation", "URL.cachesDirectory", r"\.cachesDirectory\b"),
    ("7 foundation", "FileManager.default.urls(for:", r"FileManager\.default\.urls\(\s*for\s*:"),
    ("7 foundation", "FileManager (any)", r"\bFileManager\b"),
    ("7 foundation", "containerURL(forSecurityApplicationGroupIdentifier", r"containerURL\(\s*forSecurityApplicationGroupIdentifier"),
    ("7 foundation", ".appendingPathComponent / .appending(path:)", r"\.appendingPathComponent\(|\.appending\(\s*(path|component)\s*:"),
    ("7 foundation", "String(localized:", r"\bString\(\s*localized\s*:"),
    ("7 foundation", "NSLocalizedString", r"\bNSLocalizedString\b"),
    ("7 foundation", "LocalizedStringResource / LocalizedStringKey", r"\bLocalizedString(Resource|Key)\b"),
    ("7 foundation", "autoreleasepool", r"\bautoreleasepool\b"),
    ("7 foundation", "UUID()", r"\bUUID\(\)"),
    ("7 foundation", "UUID().uuidString", r"UUID\(\)\.uuidString"),
    ("7 foundation", "Date.now", r"\bDate\.now\b"),
    ("7 foundation", "Date()", r"\bDate\(\)"),
    ("7 foundation", ".now (implicit Date.now)", r"(?<![\w.])\.now\b"),
    ("7 foundation", "Calendar", r"\bCalendar\b"),
    ("7 foundation", "DateFormatter / .formatted(", r"\bDateFormatter\b|\.formatted\("),
    ("7 foundation", "JSONEncoder", r"\bJSONEncoder\b"),
    ("7 foundation", "JSONDecoder", r"\bJSONDecoder\b"),
    ("7 foundation", "Codable (any mention)", r"\b(Codable|Decodable|Encodable)\b"),
    ("7 foundation", "CodingKeys", r"\bCodingKeys\b"),
    ("7 foundation", "URLSession", r"\bURLSession\b"),
    ("7 foundation", "Task {", r"(?<![\w.])Task\s*(\{|\(\s*priority|\(\s*\{|\(\s*name)"),
    ("7 foundation", "Task.detached", r"\bTask\.detached\b"),
    ("7 foundation", "@MainActor", r"@MainActor\b"),
    ("7 foundation", "MainActor.run / MainActor.assumeIsolated", r"\bMainActor\.(run|assumeIsolated)\b"),
    ("7 foundation", "nonisolated", r"\bnonisolated\b"),
    ("7 foundation", "nonisolated(unsafe)", r"\bnonisolated\(unsafe\)"),
    ("7 foundation", "Sendable", r"\bSendable\b"),
    ("7 foundation", "@unchecked Sendable", r"@unchecked\s+Sendable\b"),
    ("7 foundation", "@Sendable closure", r"@Sendable\b"),
    ("7 foundation", "actor declaration", r"(?<![\w@])actor\s+\w+"),
    ("7 foundation", "async", r"\basync\b"),
    ("7 foundation", "await", r"\bawait\b"),
    ("7 foundation", "AsyncStream", r"\bAsync(Throwing)?Stream\b"),
    ("7 foundation", "DispatchQueue", r"\bDispatchQueue\b"),
    ("7 foundation", "UserDefaults", r"\bUserDefaults\b"),
    ("7 foundation", "@AppStorage", r"@AppStorage\b"),
    ("7 foundation", "Logger / os_log", r"\bLogger\s*\(|\bos_log\b|\bLogger\b"),
    ("7 foundation", "print(", r"(?<![\w.])print\("),
    ("7 foundation", "@Observable (non-model)", r"@Observable\b"),
    ("7 foundation", "ObservableObject / @Published", r"\bObservableObject\b|@Published\b"),
    ("7 foundation", "import Foundation", r"^\s*(?:@preconcurrency\s+)?import\s+Foundation\b"),
    ("7 foundation", "import SwiftUI", r"^\s*(?:@preconcurrency\s+)?import\s+SwiftUI\b"),
    ("7 foundation", "import UIKit", r"^\s*(?:@preconcurrency\s+)?import\s+UIKit\b"),
    ("7 foundation", "import AppKit", r"^\s*(?:@preconcurrency\s+)?import\s+AppKit\b"),
    ("7 foundation", "import Observation", r"^\s*import\s+Observation\b"),
    ("7 foundation", "import Combine", r"^\s*import\s+Combine\b"),
    ("7 foundation", "import CloudKit", r"^\s*import\s+CloudKit\b"),
    ("7 foundation", "import CoreData", r"^\s*import\s+CoreData\b"),
    ("7 foundation", "import OSLog / os", r"^\s*import\s+(OSLog|os)\b"),
    ("7 foundation", "import Testing", r"^\s*import\s+Testing\b"),
    ("7 foundation", "import XCTest", r"^\s*(?:@preconcurrency\s+)?import\s+XCTest\b"),
    ("7 foundation", "@testable import", r"@testable\s+import\b"),
    ("7 foundation", "@preconcurrency import", r"@preconcurrency\s+import\b"),
    ("7 foundation", "public import / internal import (access-level imports)", r"^\s*(public|internal|package)\s+import\b"),
    ("7 foundation", "import WidgetKit / AppIntents", r"^\s*import\s+(WidgetKit|AppIntents)\b"),
    ("7 foundation", "#if DEBUG", r"#if\s+DEBUG\b"),
    ("7 foundation", "#if os( / targetEnvironment(", r"#if\s+(os\(|targetEnvironment\(|!os\()"),
    ("7 foundation", "#if canImport(", r"#if\s+canImport\("),
    ("7 foundation", "@available(", r"@available\s*\("),
    ("7 foundation", "#available(", r"#available\s*\("),
    ("7 foundation", "@main App struct", r"@main\b"),
    ("7 foundation", "Color / UIColor / NSColor in data layer", r"\b(Color|UIColor|NSColor)\b"),
    ("7 foundation", "UIImage / NSImage in data layer", r"\b(UIImage|NSImage)\b"),
    ("7 foundation", "Identifiable", r"\bIdentifiable\b"),
    ("7 foundation", "Hashable", r"\bHashable\b"),
    ("7 foundation", "enum declaration", r"(?<![\w@])enum\s+\w+"),
    ("7 foundation", "struct declaration", r"(?<![\w@])struct\s+\w+"),
    ("7 foundation", "protocol declaration", r"(?<![\w@])protocol\s+\w+"),
    ("7 foundation", "extension declaration", r"(?<![\w@])extension\s+\w+"),
    ("7 foundation", "Result type / throws", r"\bthrows\b"),
    ("7 foundation", "typed throws `throws(E)`", r"\bthrows\s*\("),
    ("7 foundation", "do/catch", r"\bcatch\b"),
    ("7 foundation", "KeyPath / \\.keyPath", r"\bKeyPath\b|\\\.\w+"),
]
SIMPLE = [(s, f, re.compile(r, re.M)) for s, f, r in SIMPLE]

def modelactor_forms(masked):
    forms = set()
    for m in re.finditer(r"@ModelActor\b(?P<pre>(?:\s+(?:@[\w.]+|public|internal|package|final|"
                         r"fileprivate|private|open))*)\s+actor\s+(\w+)([^{]*)\{", masked):
        forms.add("@ModelActor actor")
        if "final" in m.group("pre"):
            forms.add("@ModelActor final actor")
        if re.search(r"\b(public|package)\b", m.group("pre")):
            forms.add("@ModelActor public actor")
        if m.group(3).strip().startswith(":"):
            forms.add("@ModelActor actor conforming to a protocol")
        b = m.end() - 1
        body = masked[b + 1:match_close(masked, b)]
        stmts, _ = split_body(body)
        for s in stmts:
            if INIT_RE.match(s):
                forms.add("@ModelActor actor with its own init")
            if re.search(r"\bnonisolated\b", s):
                forms.add("nonisolated member in @ModelActor actor")
            if re.match(r"(?:(?:public|private|internal|package|fileprivate)\s+)*(?:static\s+)?(?:let|var)\s", s) \
                    and not re.search(r"\bstatic\b", s):
                forms.add("stored property in @ModelActor actor")
            if re.search(r"\bstatic\s+(?:let|var)\s+shared\b", s):
                forms.add("@ModelActor actor with static shared instance")
        if re.search(r"\bmodelContainer\b", body):
            forms.add("@ModelActor body uses modelContainer")
        if re.search(r"\bmodelContext\b", body):
            forms.add("@ModelActor body uses modelContext")
        if re.search(r"\bPersistentIdentifier\b|persistentModelID", body):
            forms.add("@ModelActor passes PersistentIdentifier")
    return forms


# --------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------


def settings_forms(text):
    forms = set()
    for line in text.splitlines():
        if "\t" not in line:
            continue
        kind, val = line.split("\t", 1)
        val = val.strip()
        if kind == "package":
            m = re.search(r"swift-tools-version\s*:\s*([\d.]+)", val)
            if m:
                v = m.group(1)
                v = ".".join(v.split(".")[:2])
                forms.add("Package.swift swift-tools-version %s" % v)
            m = re.search(r"swiftLanguage(?:Modes|Versions)\s*:\s*\[([^\]]*)\]", val)
            if m:
                for v in re.findall(r"\.(\w+)|\"([\d.]+)\"", m.group(1)):
                    forms.add("Package.swift swiftLanguageModes/Versions .%s" % (v[0] or v[1]))
            for f in re.findall(r"enableUpcomingFeature\(\s*\"(\w+)\"", val):
                forms.add("Package.swift .enableUpcomingFeature(%s)" % f)
            for f in re.findall(r"enableExperimentalFeature\(\s*\"(\w+)\"", val):
                forms.add("Package.swift .enableExperimentalFeature(%s)" % f)
            m = re.search(r"defaultIsolation\(\s*([\w.]+)", val)
            if m:
                forms.add("Package.swift .defaultIsolation(%s)" % m.group(1))
            if "strict-concurrency" in val:
                forms.add("Package.swift unsafeFlags -strict-concurrency")
        elif kind == "pbxproj":
            m = re.match(r"(\w+)\s*=\s*\"?([^\";]*)\"?;?", val)
            if not m:
                continue
            key, v = m.group(1), m.group(2).strip()
            if key == "SWIFT_VERSION":
                forms.add("pbxproj SWIFT_VERSION = %s" % v)
            elif key == "SWIFT_DEFAULT_ACTOR_ISOLATION":
                forms.add("pbxproj SWIFT_DEFAULT_ACTOR_ISOLATION = %s" % v)
            elif key == "SWIFT_APPROACHABLE_CONCURRENCY":
                forms.add("pbxproj SWIFT_APPROACHABLE_CONCURRENCY = %s" % v)
            elif key.startswith("SWIFT_UPCOMING_FEATURE_"):
                forms.add("pbxproj %s = %s" % (key, v))
            elif key == "SWIFT_STRICT_CONCURRENCY":
                forms.add("pbxproj SWIFT_STRICT_CONCURRENCY = %s" % v)
            elif key == "IPHONEOS_DEPLOYMENT_TARGET":
                forms.add("pbxproj IPHONEOS_DEPLOYMENT_TARGET = %s" % v.split(".")[0])
            elif key == "MACOSX_DEPLOYMENT_TARGET":
                forms.add("pbxproj MACOSX_DEPLOYMENT_TARGET = %s" % v.split(".")[0])
        elif kind == "has":
            forms.add("project kind: %s" % val)
    # derived, per repository
    six = any(re.search(r"SWIFT_VERSION = 6|swiftLanguageModes/Versions \.v6", f) for f in forms)
    tools6_default = any(re.search(r"swift-tools-version (6|[7-9])", f) for f in forms) and not any(
        "swiftLanguageModes/Versions" in f for f in forms)
    if six or tools6_default:
        forms.add("derived: Swift 6 language mode in some target (SWIFT_VERSION 6, .v6, or tools >= 6.0 "
                  "without swiftLanguageModes)")
    else:
        forms.add("derived: Swift 5 language mode only")
    if any("ISOLATION = MainActor" in f or "defaultIsolation(MainActor" in f for f in forms):
        forms.add("derived: default actor isolation MainActor in some target")
    if any("STRICT_CONCURRENCY = complete" in f or "StrictConcurrency" in f or "strict-concurrency" in f
           for f in forms):
        forms.add("derived: strict concurrency checking complete (Swift 5 mode setting)")
    return forms


# --------------------------------------------------------------------------
# Counting
# --------------------------------------------------------------------------

SECTION_NAMES = {
    "1 totals": "totals",
    "2 model": "@Model declarations",
    "3 predicate": "#Predicate",
    "4 context": "fetch / context / actors",
    "5 container": "container / configuration / schema",
    "6 migration": "versioned schemas / migration",
    "7 foundation": "Foundation / platform / concurrency",
    "8 settings": "language settings (per repository)",
}


def repo_dirs(root):
    return sorted(d for d in os.listdir(root)
                  if not d.startswith("_") and not d.startswith(".")
                  and os.path.isdir(os.path.join(root, d)))


def swift_files(repodir):
    out = []
    for dp, dn, fn in os.walk(repodir):
        dn.sort()
        for f in sorted(fn):
            if f.endswith(".swift"):
                out.append(os.path.join(dp, f))
    return out


def model_names_in(masked_texts):
    names = set()
    for t in masked_texts:
        for m in MODEL_RE.finditer(t):
            names.add(m.group("name"))
    return names


def protocol_names_in(masked_texts):
    """Names declared as protocols, or used as `any X` / `some X`, in the files."""
    names = set()
    for t in masked_texts:
        names.update(re.findall(r"(?<![\w@])protocol\s+(\w+)", t))
        names.update(re.findall(r"\b(?:any|some)\s+(\w+)", t))
    return names


def count(root):
    file_hits = defaultdict(int)
    repo_hits = defaultdict(set)
    total_files = 0
    total_models = 0
    total_preds = 0
    repos = repo_dirs(root)
    per_repo_files = {}
    for r in repos:
        rd = os.path.join(root, r)
        files = swift_files(rd)
        per_repo_files[r] = len(files)
        masked = {}
        for f in files:
            with open(f, encoding="utf-8", errors="replace") as fh:
                masked[f] = mask_source(fh.read())
        mnames = model_names_in(masked.values())
        pnames = protocol_names_in(masked.values())
        for f in files:
            t = masked[f]
            total_files += 1
            forms = set()
            for sec, form, rx in SIMPLE:
                if rx.search(t):
                    forms.add((sec, form))
            mf, nm = model_forms(t, mnames, pnames)
            total_models += nm
            forms |= {("2 model", x) for x in mf}
            forms |= {("2 model", x) for x in macro_arg_forms(t)}
            pf, npd = predicate_forms(t)
            total_preds += npd
            forms |= {("3 predicate", x) for x in pf}
            forms |= {("5 container", x) for x in call_forms(t)}
            forms |= {("4 context", x) for x in modelactor_forms(t)}
            if any(re.search(r"(?<![\w@])extension\s+%s\b" % re.escape(n), t) for n in mnames):
                forms.add(("2 model", "extension of a @Model class"))
            for key in forms:
                file_hits[key] += 1
                repo_hits[key].add(r)
        sp = os.path.join(rd, "_settings.txt")
        if os.path.exists(sp):
            with open(sp, encoding="utf-8", errors="replace") as fh:
                for x in settings_forms(fh.read()):
                    repo_hits[("8 settings", x)].add(r)
    return repos, per_repo_files, total_files, total_models, total_preds, file_hits, repo_hits


def rows(root):
    repos, per_repo, nfiles, nmodels, npreds, fh, rh = count(root)
    out = []
    for key in rh:
        sec, form = key
        out.append((sec, form, fh.get(key, 0), len(rh[key])))
    out.sort(key=lambda x: (x[0], -x[2] if x[0] != "8 settings" else -x[3], -x[3], x[1]))
    return repos, per_repo, nfiles, nmodels, npreds, out


def pct(a, b):
    return "%.1f" % (100.0 * a / b) if b else "0.0"


def main(argv):
    if len(argv) >= 3 and argv[0] == "--extract":
        return extract(argv[1], argv[2], argv[3:])
    markdown = "--markdown" in argv
    repolist = "--repos" in argv
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__)
        return 2
    root = args[0]
    if repolist:
        for r in repo_dirs(root):
            cp = os.path.join(root, r, "_commit.txt")
            commit = open(cp).read().strip() if os.path.exists(cp) else "unknown"
            print("%s %s %d" % (r.replace("+", "/", 1), commit, len(swift_files(os.path.join(root, r)))))
        return 0
    repos, per_repo, nfiles, nmodels, npreds, table = rows(root)
    nrepos = len(repos)
    if markdown:
        print("# SwiftData forms in real data-layer code")
        print()
        print("Regenerate: `python3 Tests/Census/count-forms.py --markdown /work/census-scratch "
              "> Tests/Census/realcode-counts.md` (see README-realcode.md).")
        print()
        print("Totals: %d repositories, %d qualifying files, %d `@Model` classes, %d `#Predicate` uses."
              % (nrepos, nfiles, nmodels, npreds))
        print("`files` = qualifying files containing the form; `repos` = repositories with at least one such "
              "file. Language settings are counted per repository (`files` is blank there; `%` is % of repositories).")
        cur = None
        for sec, form, f, r in table:
            if sec != cur:
                cur = sec
                print()
                print("## %s" % SECTION_NAMES.get(sec, sec))
                print()
                if sec == "8 settings":
                    print("| form | files | % of repos | repos |")
                else:
                    print("| form | files | % of files | repos |")
                print("|---|---:|---:|---:|")
            if sec == "8 settings":
                print("| %s | | %s | %d |" % (form.replace("|", "\\|"), pct(r, nrepos), r))
            else:
                print("| %s | %d | %s | %d |" % (form.replace("|", "\\|"), f, pct(f, nfiles), r))
    else:
        print("repositories %d  files %d  models %d  predicates %d" % (nrepos, nfiles, nmodels, npreds))
        print("%-13s %7s %6s %6s  %s" % ("section", "files", "%", "repos", "form"))
        for sec, form, f, r in table:
            if sec == "8 settings":
                print("%-13s %7s %6s %6d  %s" % (sec, "-", pct(r, nrepos), r, form))
            else:
                print("%-13s %7d %6s %6d  %s" % (sec, f, pct(f, nfiles), r, form))
    return 0


# --------------------------------------------------------------------------
# Extraction from bare git snapshots
# --------------------------------------------------------------------------

SKIP_DIRS = re.compile(r"(^|/)(\.build|Pods|Carthage|DerivedData|\.swiftpm|checkouts|SourcePackages)/")
VIEW_RE = re.compile(r":\s*View\b|\bsome\s+View\b|#Preview\b")
KEEP_RE = re.compile(r"@Model\b|@ModelActor\b|\bVersionedSchema\b|\bSchemaMigrationPlan\b")

SETTINGS_PKG = re.compile(r"swift-tools-version|swiftLanguageModes|swiftLanguageVersions|"
                          r"enableUpcomingFeature|enableExperimentalFeature|defaultIsolation|strict-concurrency")
SETTINGS_PBX = re.compile(r"^\s*(SWIFT_VERSION|SWIFT_DEFAULT_ACTOR_ISOLATION|SWIFT_APPROACHABLE_CONCURRENCY|"
                          r"SWIFT_UPCOMING_FEATURE_\w+|SWIFT_STRICT_CONCURRENCY|IPHONEOS_DEPLOYMENT_TARGET|"
                          r"MACOSX_DEPLOYMENT_TARGET)\s*=")


def git(gitdir, *args, inp=None):
    return subprocess.run(["git", "--git-dir=" + gitdir] + list(args), input=inp,
                          capture_output=True, check=True).stdout


def qualifies(text):
    if "import SwiftData" not in text:
        return False
    if VIEW_RE.search(text) and not KEEP_RE.search(text):
        return False
    return True


def extract(mirrors, out, names):
    if not names:
        names = sorted(d.replace("+", "/", 1) for d in os.listdir(mirrors))
    for name in names:
        gitdir = os.path.join(mirrors, name.replace("/", "+", 1), "repo")
        if not os.path.isdir(gitdir):
            print("missing %s" % name, file=sys.stderr)
            continue
        commit = git(gitdir, "rev-parse", "HEAD").decode().strip()
        listing = git(gitdir, "ls-tree", "-r", "-z", "HEAD").split(b"\0")
        entries = []
        for e in listing:
            if not e:
                continue
            meta, path = e.split(b"\t", 1)
            mode, typ, sha = meta.split()
            path = path.decode("utf-8", "replace")
            if typ != b"blob" or SKIP_DIRS.search(path):
                continue
            base = os.path.basename(path)
            if path.endswith(".swift") or base == "project.pbxproj" or re.fullmatch(r"Package(@swift-[\d.]+)?\.swift", base):
                entries.append((path, sha.decode()))
        blobs = {}
        if entries:
            data = git(gitdir, "cat-file", "--batch", inp="".join(s + "\n" for _, s in entries).encode())
            pos = 0
            for _, sha in entries:
                nl = data.index(b"\n", pos)
                hdr = data[pos:nl].split()
                size = int(hdr[2]) if len(hdr) >= 3 and hdr[1] != b"missing" else 0
                blobs[sha] = data[nl + 1:nl + 1 + size]
                pos = nl + 1 + size + 1
        dest = os.path.join(out, name.replace("/", "+", 1))
        seen = set()
        settings = []
        nq = 0
        for path, sha in sorted(entries):
            text = blobs.get(sha, b"").decode("utf-8", "replace")
            base = os.path.basename(path)
            if re.fullmatch(r"Package(@swift-[\d.]+)?\.swift", base):
                settings.append("has\tPackage.swift")
                for line in text.splitlines():
                    if SETTINGS_PKG.search(line):
                        settings.append("package\t" + line.strip() + "\t" + path)
                if "import SwiftData" not in text:
                    continue
            if base == "project.pbxproj":
                settings.append("has\txcodeproj")
                for line in text.splitlines():
                    if SETTINGS_PBX.search(line):
                        settings.append("pbxproj\t" + line.strip() + "\t" + path)
                continue
            if not qualifies(text) or sha in seen:
                continue
            seen.add(sha)
            fp = os.path.join(dest, path)
            os.makedirs(os.path.dirname(fp), exist_ok=True)
            with open(fp, "w", encoding="utf-8") as fh:
                fh.write(text)
            nq += 1
        if nq:
            with open(os.path.join(dest, "_commit.txt"), "w") as fh:
                fh.write(commit + "\n")
            with open(os.path.join(dest, "_settings.txt"), "w") as fh:
                fh.write("\n".join(sorted(set(settings))) + "\n")
        print("%s %s %d" % (name, commit, nq))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
