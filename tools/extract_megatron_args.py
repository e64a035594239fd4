#!/usr/bin/env python3
"""Extracts Megatron-LM's command-line arguments from its source, without importing it.

Usage: tools/extract_megatron_args.py MEGATRON_GIT_DIR COMMIT > testdata/frameworks/megatron-lm-args.txt

Megatron-LM registers its arguments in megatron/training/arguments.py in two ways (at d98e8a6):
  1. literal `group.add_argument('--name', ..., action=..., nargs=...)` calls;
  2. `ArgumentGroupFactory(SomeConfig, exclude=[...]).build_group(...)`
     (megatron/training/argument_utils.py): one argument per dataclass field of SomeConfig (its base
     classes' fields first), named `--field-name`; a bool field defaulting to True becomes
     `--no-field-name` and `--disable-field-name` (store_false), one defaulting to False
     `--field-name` (store_true); a field's metadata "argparse_meta" may set "arg_names" and "nargs".
This script reads both with Python's ast module from the git objects at COMMIT. Output: one line
per flag, "--name<TAB>arity", arity 0 (a switch), 1 (one value) or + (one or more values), sorted.
A tooling script (the product is C++): its output is kept in the repository with its commit.
"""
import ast
import subprocess
import sys

git_dir, commit = sys.argv[1], sys.argv[2]


def show(path):
    return subprocess.run(["git", "-C", git_dir, "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def ls_files():
    out = subprocess.run(["git", "-C", git_dir, "ls-tree", "-r", "--name-only", commit, "megatron"], check=True,
                         capture_output=True, text=True).stdout
    return [p for p in out.splitlines() if p.endswith(".py")]


FILES = ls_files()
_class_cache = {}


def find_class(name):
    """The ClassDef of a dataclass named `name` anywhere under megatron/ (first definition)."""
    if name in _class_cache:
        return _class_cache[name]
    for path in FILES:
        text = show(path)
        if f"class {name}" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.name == name:
                _class_cache[name] = node
                return node
    raise SystemExit(f"class {name} not found at {commit}")


def const(node):
    try:
        return ast.literal_eval(node)
    except Exception:
        return None


def is_bool(annotation):
    if annotation is None:
        return False
    src = ast.unparse(annotation)
    return src in ("bool", "Optional[bool]", "bool | None", "typing.Optional[bool]")


def is_list(annotation):
    src = ast.unparse(annotation) if annotation is not None else ""
    return src.startswith(("list[", "List[", "Optional[list[", "Optional[List[", "typing.List[")) or "list[" in src.split("|")[0]


def fields_of(cls):
    """(name, annotation, default node, field(...) keywords) of a dataclass, bases first."""
    out = []
    for base in cls.bases:
        base_name = ast.unparse(base)
        if base_name in ("object",) or "." in base_name:
            continue
        try:
            out.extend(fields_of(find_class(base_name)))
        except SystemExit:
            pass
    for stmt in cls.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        ann = ast.unparse(stmt.annotation)
        if ann.startswith(("ClassVar", "typing.ClassVar", "InitVar")):
            continue
        default, keywords = stmt.value, {}
        if isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func) in ("field", "dataclasses.field"):
            keywords = {k.arg: k.value for k in stmt.value.keywords}
            default = keywords.get("default")
        out = [f for f in out if f[0] != stmt.target.id]  # a redefinition replaces the base's field
        out.append((stmt.target.id, stmt.annotation, default, keywords))
    return out


def factory_flags(cls_name, exclude):
    flags = {}
    for name, annotation, default, keywords in fields_of(find_class(cls_name)):
        if name in exclude:
            continue
        if "init" in keywords and const(keywords["init"]) is False:
            continue
        meta = {}
        if "metadata" in keywords:
            md = keywords["metadata"]
            if isinstance(md, ast.Dict):
                for k, v in zip(md.keys, md.values):
                    if const(k) == "argparse_meta" and isinstance(v, ast.Dict):
                        meta = {const(kk): vv for kk, vv in zip(v.keys, v.values)}
        dashed = "--" + name.replace("_", "-")
        if is_bool(annotation) and "type" not in meta:
            if const(default) is True:
                names = ["--no-" + name.replace("_", "-"), "--disable-" + name.replace("_", "-")]
            else:
                names = [dashed]
            arity = "0"
        else:
            names = [dashed]
            arity = "+" if is_list(annotation) else "1"
        if "arg_names" in meta:
            names = const(meta["arg_names"]) or names
        if "nargs" in meta:
            nargs = const(meta["nargs"])
            arity = "+" if nargs in ("+", "*") else ("1" if nargs in (None, "?", 1) else str(nargs))
        if "action" in meta:
            action = const(meta["action"])
            if action in ("store_true", "store_false", "store_const"):
                arity = "0"
        for n in names:
            flags[n] = arity
    return flags


def literal_flags(tree):
    flags = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        names = [const(a) for a in node.args if isinstance(const(a), str) and const(a).startswith("--")]
        kw = {k.arg: k.value for k in node.keywords}
        action = const(kw["action"]) if "action" in kw else None
        nargs = const(kw["nargs"]) if "nargs" in kw else None
        if action in ("store_true", "store_false", "store_const", "count"):
            arity = "0"
        elif nargs in ("+", "*"):
            arity = "+"
        elif isinstance(nargs, int) and nargs > 1:
            arity = "+"
        else:
            arity = "1"
        for n in names:
            flags[n] = arity
    return flags


def main():
    text = show("megatron/training/arguments.py")
    tree = ast.parse(text)
    flags = literal_flags(tree)
    # ArgumentGroupFactory(Config, exclude=...) calls; `exclude` may name a list assigned in the function.
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        lists = {}
        for stmt in ast.walk(fn):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                value = const(stmt.value)
                if isinstance(value, list):
                    lists[stmt.targets[0].id] = value
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "ArgumentGroupFactory":
                cls_name = ast.unparse(node.args[0])
                exclude = []
                for k in node.keywords:
                    if k.arg == "exclude":
                        exclude = const(k.value) if const(k.value) is not None else lists.get(ast.unparse(k.value), [])
                for n, a in factory_flags(cls_name, set(exclude)).items():
                    flags.setdefault(n, a)
    print(f"# Megatron-LM command-line arguments at commit {commit}, extracted by tools/extract_megatron_args.py")
    print("# from megatron/training/arguments.py (add_argument calls and ArgumentGroupFactory dataclass fields).")
    print("# flag<TAB>arity: 0 = a switch, 1 = one value, + = one or more values.")
    for n in sorted(flags):
        print(f"{n}\t{flags[n]}")


main()
