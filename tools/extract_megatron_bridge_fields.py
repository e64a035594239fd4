#!/usr/bin/env python3
"""Extracts Megatron-Bridge's config key paths (ConfigContainer sections and fields) from source, without importing it.

Usage: tools/extract_megatron_bridge_fields.py BRIDGE_GIT_DIR BRIDGE_COMMIT MEGATRON_GIT_DIR MEGATRON_COMMIT \
           > planner/frameworks/megatron-bridge-fields.txt
(made with BRIDGE_COMMIT = 067f987df03b8355b03192d88d70f1709fedf51a and MEGATRON_COMMIT =
2a75ac12c54ba6a42b34024756820bf819a2e25f, the commit Bridge's 3rdparty/Megatron-LM submodule pins there;
see the header of the output).

Megatron-Bridge's run configuration is `ConfigContainer` (src/megatron/bridge/training/config.py), a
dataclass whose fields are the top-level keys of a run_config.yaml / override YAML; most are config
dataclasses (sections) defined in Bridge or subclassing Megatron-LM's (megatron/core/...,
megatron/training/config/...). run_config.yaml is written with dataclasses.fields(), skipping names
that start with "_" (Megatron-LM's megatron/training/config/container.py, ConfigContainerBase.to_dict,
the base of Bridge's training/utils/config_utils.py), so init=False fields are listed too; an override
YAML is merged onto that dict and applied key by key with setattr, a key that names no attribute
being skipped with a warning (Bridge's training/utils/omegaconf_utils.py, _apply_overrides).
The script reads the files with `git show COMMIT:PATH` and Python's ast module: modules named
megatron.bridge.* from BRIDGE_GIT_DIR (under src/), other megatron.* from MEGATRON_GIT_DIR. A name is
resolved through the module's classes, assignments and imports (absolute and relative, package
__init__ re-exports included). A class's fields follow dataclasses' rules: each base's complete field
set merged in reverse C3 MRO order, then the class's own annotated assignments if it is decorated with
@dataclass (ClassVar/InitVar skipped); a non-dataclass class has its nearest dataclass base's fields.
A section's classes are the dataclasses its annotation names (Optional, Union and `X | Y` unwrapped),
except for SECTION_CLASSES below.
  model: the union of the flat provider GPTModelProvider, MLAModelProvider and the builder-backed
     BridgeGPTModelConfig, whose `transformer` field (a section, model.transformer) holds Bridge's
     TransformerConfig, listed field by field too (BridgeGPTModelConfig.__setattr__ forwards a flat
     name to it).
  dataset: GPTDatasetConfig (Bridge's), plus `seq_length`, the key of its hand-written __init__ and
     to_cfg_dict (also a declared field at the commit above); Megatron-LM's `sequence_length` stays
     listed (a field an override can set) although to_cfg_dict leaves it out.
Output: "#" header lines, then one line per key, "dotted.key<TAB>kind", sorted; kind is `section`
for a key whose fields are listed below it (every top-level field typed with a config dataclass, and
model.transformer), `field` for anything else. Other fields typed with a dataclass are listed but not
expanded.
A tooling script (the product is C++): its output is kept in the repository with its commit.
"""
import argparse
import ast
import subprocess
import sys

ROOT = ("megatron.bridge.training.config", "ConfigContainer")
# Sections whose classes are named here instead of read from the annotation: {key: [(module, class)]}.
SECTION_CLASSES = {
    "model": [("megatron.bridge.models.gpt_provider", "GPTModelProvider"),
              ("megatron.bridge.models.mla_provider", "MLAModelProvider"),
              ("megatron.bridge.models.gpt.model_config", "BridgeGPTModelConfig")],
    "dataset": [("megatron.bridge.training.config", "GPTDatasetConfig")],
}
# Nested sections listed field by field: {dotted key: [(module, class)]}.
NESTED_SECTIONS = {
    "model.transformer": [("megatron.bridge.models.transformer_config", "TransformerConfig")],
}
# Keys a section accepts besides its dataclass fields: {section: [name]}.
EXTRA_KEYS = {"dataset": ["seq_length"]}


class Repo:
    """One commit of a git directory, read without a work tree."""

    def __init__(self, git_dir, commit, prefix=""):
        self.git_dir, self.commit, self.prefix = git_dir, commit, prefix
        self._text = {}

    def show(self, path):
        if path not in self._text:
            r = subprocess.run(["git", "-C", self.git_dir, "show", f"{self.commit}:{path}"], capture_output=True,
                               text=True)
            self._text[path] = r.stdout if r.returncode == 0 else None
        return self._text[path]


class Sources:
    """Python modules of both repositories by dotted name."""

    def __init__(self, bridge, megatron):
        self.bridge, self.megatron = bridge, megatron
        self._trees = {}

    def repo_of(self, module):
        if module == "megatron.bridge" or module.startswith("megatron.bridge."):
            return self.bridge
        if module.startswith("megatron."):
            return self.megatron
        return None  # outside both repositories (torch, typing, transformers, ...)

    def module(self, module):
        """(ast.Module, is_package) of a dotted module name, or (None, False)."""
        if module not in self._trees:
            repo, found = self.repo_of(module), (None, False)
            if repo is not None:
                base = repo.prefix + module.replace(".", "/")
                for path, is_pkg in ((base + ".py", False), (base + "/__init__.py", True)):
                    text = repo.show(path)
                    if text is not None:
                        found = (ast.parse(text), is_pkg)
                        break
            self._trees[module] = found
        return self._trees[module]

    def exists(self, module):
        return self.module(module)[0] is not None


def top_statements(body):
    """A module's top-level statements, looking inside if/try blocks (TYPE_CHECKING imports)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from top_statements(stmt.body)
            yield from top_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, stmt.orelse, stmt.finalbody):
                yield from top_statements(block)
            for handler in stmt.handlers:
                yield from top_statements(handler.body)
        else:
            yield stmt


class Resolver:
    def __init__(self, sources):
        self.sources = sources
        self._busy = set()

    def import_source(self, module, stmt):
        if stmt.level == 0:
            return stmt.module
        _, is_pkg = self.sources.module(module)
        pkg = module.split(".") if is_pkg else module.split(".")[:-1]
        pkg = pkg[:len(pkg) - (stmt.level - 1)]
        return ".".join(pkg + ([stmt.module] if stmt.module else []))

    def lookup(self, module, name):
        """What `name` is at the top level of `module`: ("class", module, ClassDef), ("alias", module, expr),
        ("module", dotted) or None (not found, or outside the repositories)."""
        key = (module, name)
        if key in self._busy:
            return None
        self._busy.add(key)
        try:
            return self._lookup(module, name)
        finally:
            self._busy.discard(key)

    def _lookup(self, module, name):
        tree, _ = self.sources.module(module)
        if tree is None:
            return None
        found = None
        for stmt in top_statements(tree.body):
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                found = ("class", module, stmt)
            elif isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                found = ("alias", module, stmt.value)
            elif (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name
                  and stmt.value is not None):
                found = ("alias", module, stmt.value)
            elif isinstance(stmt, ast.ImportFrom):
                for a in stmt.names:
                    if (a.asname or a.name) != name:
                        continue
                    source = self.import_source(module, stmt)
                    hit = self.lookup(source, a.name)
                    if hit is None and self.sources.exists(f"{source}.{a.name}"):
                        hit = ("module", f"{source}.{a.name}")
                    if hit is not None or found is None:
                        found = hit
            elif isinstance(stmt, ast.Import):
                for a in stmt.names:
                    if a.asname == name and self.sources.exists(a.name):
                        found = ("module", a.name)
        return found

    def resolve(self, module, expr):
        """The lookup result of a Name/Attribute expression in `module`."""
        if isinstance(expr, ast.Name):
            return self.lookup(module, expr.id)
        if isinstance(expr, ast.Attribute):
            dotted = ast.unparse(expr)
            head, _, attr = dotted.rpartition(".")
            if self.sources.exists(head):  # megatron.core.x.Class
                return self.lookup(head, attr)
            owner = self.resolve(module, expr.value)
            if owner is not None and owner[0] == "module":
                return self.lookup(owner[1], expr.attr)
            if owner is not None and owner[0] == "class":
                for stmt in owner[2].body:
                    if isinstance(stmt, ast.ClassDef) and stmt.name == expr.attr:
                        return ("class", owner[1], stmt)
        return None

    def classes(self, module, expr):
        """Repository classes a type expression can stand for: [(module, ClassDef)]."""
        if expr is None:
            return []
        if isinstance(expr, ast.Constant):
            if isinstance(expr.value, str):  # a forward reference
                try:
                    return self.classes(module, ast.parse(expr.value, mode="eval").body)
                except SyntaxError:
                    return []
            return []
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            return self.classes(module, expr.left) + self.classes(module, expr.right)
        if isinstance(expr, ast.Subscript):
            head = ast.unparse(expr.value).split(".")[-1]
            args = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
            if head == "Annotated":
                return self.classes(module, args[0])
            if head in ("Optional", "Union"):
                return [c for a in args for c in self.classes(module, a)]
            return []  # list[...], dict[...], Literal[...], Callable[...], type[...]: not a nested config
        if isinstance(expr, (ast.Name, ast.Attribute)):
            ref = self.resolve(module, expr)
            if ref is None or ref[0] == "module":
                return []
            if ref[0] == "alias":
                return self.classes(ref[1], ref[2])
            return [(ref[1], ref[2])]
        return []

    def named(self, module, name):
        ref = self.lookup(module, name)
        if ref is None or ref[0] != "class":
            raise SystemExit(f"class {name} not found in {module}")
        return (ref[1], ref[2])


def is_dataclass(ref):
    for d in ref[1].decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if ast.unparse(target) in ("dataclass", "dataclasses.dataclass"):
            return True
    return False


class Fields:
    """Dataclass fields as dataclasses.fields() returns them: {name: (module, annotation)}."""

    def __init__(self, resolver):
        self.resolver = resolver
        self._cache = {}

    def bases(self, ref):
        module, cls = ref
        out = []
        for base in cls.bases:
            expr = base.value if isinstance(base, ast.Subscript) else base  # Generic[T], Base[T]
            out.extend(self.resolver.classes(module, expr))
        return out

    def mro(self, ref):
        """C3 linearization over the classes resolved in the repositories."""
        seqs = [self.mro(b) for b in self.bases(ref)] + [self.bases(ref)]
        seqs = [list(s) for s in seqs if s]
        result = [ref]
        while seqs:
            for s in seqs:
                head = s[0]
                if not any(head in t[1:] for t in seqs):
                    break
            else:
                raise SystemExit(f"inconsistent MRO for {ref[1].name} in {ref[0]}")
            result.append(head)
            for t in seqs:
                if t[0] == head:
                    t.pop(0)
            seqs = [t for t in seqs if t]
        return result

    def of(self, ref):
        key = (ref[0], ref[1].name)
        if key not in self._cache:
            self._cache[key] = self._of(ref)
        return self._cache[key]

    def _of(self, ref):
        mro = self.mro(ref)
        if not is_dataclass(ref):
            # getattr(cls, "__dataclass_fields__") finds the nearest dataclass in the MRO.
            return next((self.of(b) for b in mro[1:] if is_dataclass(b)), {})
        out = {}
        for b in reversed(mro[1:]):
            if is_dataclass(b):
                out.update(self.of(b))
        module, cls = ref
        for stmt in cls.body:
            if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
                continue
            if ast.unparse(stmt.annotation).split("[")[0].split(".")[-1] in ("ClassVar", "InitVar"):
                continue
            out[stmt.target.id] = (module, stmt.annotation)
        return out

    def union(self, refs):
        out = {}
        for ref in refs:
            for name, f in self.of(ref).items():
                out.setdefault(name, f)
        return out


def rows_of(bridge, megatron):
    resolver = Resolver(Sources(bridge, megatron))
    fields = Fields(resolver)
    rows = {}

    def add_section(key, refs):
        rows[key] = "section"
        for name, (module, annotation) in fields.union(refs).items():
            if not name.startswith("_"):
                rows[f"{key}.{name}"] = "field"
        for name in EXTRA_KEYS.get(key, []):
            rows[f"{key}.{name}"] = "field"

    for name, (module, annotation) in fields.of(resolver.named(*ROOT)).items():
        if name.startswith("_"):
            continue
        if name in SECTION_CLASSES:
            refs = [resolver.named(m, c) for m, c in SECTION_CLASSES[name]]
        else:
            refs = [r for r in resolver.classes(module, annotation) if is_dataclass(r)]
        if refs:
            add_section(name, refs)
        else:
            rows[name] = "field"
    for key, classes in NESTED_SECTIONS.items():
        if key not in rows:
            raise SystemExit(f"{key} is not a field at this commit")
        add_section(key, [resolver.named(m, c) for m, c in classes])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bridge_git_dir", help="Megatron-Bridge git directory (e.g. a bare mirror)")
    parser.add_argument("bridge_commit", help="Megatron-Bridge commit")
    parser.add_argument("megatron_git_dir", help="Megatron-LM git directory (e.g. a bare mirror)")
    parser.add_argument("megatron_commit", help="Megatron-LM commit (Bridge's 3rdparty/Megatron-LM submodule pin)")
    args = parser.parse_args()
    bridge = Repo(args.bridge_git_dir, args.bridge_commit, "src/")
    megatron = Repo(args.megatron_git_dir, args.megatron_commit)
    for repo in (bridge, megatron):
        if subprocess.run(["git", "-C", repo.git_dir, "cat-file", "-e", f"{repo.commit}^{{commit}}"],
                          stderr=subprocess.DEVNULL).returncode:
            raise SystemExit(f"commit {repo.commit} not found in {repo.git_dir}")
    pin = subprocess.run(["git", "-C", bridge.git_dir, "ls-tree", bridge.commit, "3rdparty/Megatron-LM"],
                         capture_output=True, text=True).stdout.split()
    pinned = pin[2] if len(pin) >= 3 else None
    if pinned != megatron.commit:
        print(f"warning: Megatron-Bridge {bridge.commit} pins Megatron-LM {pinned}, not {megatron.commit}",
              file=sys.stderr)
    rows = rows_of(bridge, megatron)
    pin_note = "Bridge's 3rdparty/Megatron-LM submodule pin" if pinned == megatron.commit else f"Bridge pins {pinned}"
    out = [
        "# Megatron-Bridge (github.com/NVIDIA-NeMo/Megatron-Bridge) ConfigContainer key paths, extracted by"
        " tools/extract_megatron_bridge_fields.py",
        f"# Megatron-Bridge {args.bridge_commit}, Megatron-LM (github.com/NVIDIA/Megatron-LM) {args.megatron_commit}"
        f" ({pin_note})",
        "# dotted.key<TAB>kind (section = a config dataclass whose fields follow, field = anything else), sorted;"
        " model = GPTModelProvider | MLAModelProvider | BridgeGPTModelConfig.",
        f"# Regenerate: tools/extract_megatron_bridge_fields.py BRIDGE_GIT_DIR {args.bridge_commit} MEGATRON_GIT_DIR"
        f" {args.megatron_commit} > planner/frameworks/megatron-bridge-fields.txt",
    ]
    out.extend(f"{key}\t{rows[key]}" for key in sorted(rows))
    sys.stdout.write("\n".join(out) + "\n")


main()
