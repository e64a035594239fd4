#!/usr/bin/env python3
"""Extracts torchtitan's config key paths (sections and fields) from its source, without importing it.

Usage: tools/extract_torchtitan_fields.py TORCHTITAN_GIT_DIR CURRENT_COMMIT TOML_COMMIT \
           > planner/frameworks/torchtitan-fields.txt
(made with CURRENT_COMMIT = b5bcd76c66d0acb1a08b176d9639425bc55e0b2a, TOML_COMMIT =
238fa9953e4aec2a62582121564273d7cbb1e9f1; see the header of the output).

torchtitan's job configuration is a tree of dataclasses; the JSON it writes with
`--debug.save_config_file` (`--job.save_config_file` in the TOML era) mirrors that tree, omitting
fields whose names start with "_" (torchtitan/config/configurable.py, Configurable.Config.to_dict).
Two eras are read:
  current: the root is `Trainer.Config` (torchtitan/trainer.py); its fields are the top-level
     sections, typed with config dataclasses from torchtitan/config/configs.py (ParallelismConfig,
     TrainingConfig, CompileConfig, CommConfig, DebugConfig), nested `X.Config` classes elsewhere
     (Profiler.Config, MetricsProcessor.Config, OptimizersContainer.Config, CheckpointManager.Config,
     Validator.Config, ...) and the alias ActivationCheckpointingConfig
     (torchtitan/distributed/activation_checkpoint.py: the union of SelectiveAC.Config, FullAC.Config
     and MemoryBudgetAC.Config, all subclasses of ActivationCheckpointing.Config).
  toml: the root is `JobConfig` (torchtitan/config/job_config.py, the last commit with TOML job
     files); every section is a plain @dataclass there, `quantize` nests two levels deep.
The script reads the files with `git show COMMIT:PATH` and Python's ast module. A name is resolved
through the module's classes, assignments (type aliases) and imports (absolute and relative, package
__init__ re-exports included), then `Outer.Config` through the nested classes of Outer and of its
bases. A class's fields are its bases' fields first, then its own annotated assignments if it is
decorated with @dataclass (ClassVar/InitVar skipped; a redefinition keeps the base's position).
A section's classes are those named by the field's annotation (Annotated, Optional and `X | Y`
unwrapped), the class its `default`/`field(default_factory=...)` builds, and VARIANTS below.
Output: "#" header lines, then one line per key, "era<TAB>dotted.key<TAB>kind", sorted within each
era; kind is `section` when the field's type is a dataclass of the repository, else `field`.
Sections in EXPAND_ALL are listed recursively, EXPAND_NONE not at all (model_spec: custom to_dict,
model tree out of scope), every other section with its direct fields only.
A tooling script (the product is C++): its output is kept in the repository with its commit.
"""
import argparse
import ast
import subprocess
import sys

ROOTS = {
    "current": ("torchtitan/trainer.py", "Trainer.Config"),
    "toml": ("torchtitan/config/job_config.py", "JobConfig"),
}
# Sections listed with every field, recursively (nested config sections too).
EXPAND_ALL = {"parallelism", "training", "activation_checkpoint", "compile", "debug", "model", "quantize", "job",
              "float8", "mx"}
# Sections named but not expanded.
EXPAND_NONE = {"model_spec"}
# Polymorphic sections at the current commit: config classes a recipe may put there besides the
# declared/default one; their fields are added to the section.  (path, dotted class name)
VARIANTS = {
    "current": {
        # BaseLoss.Config has no fields; every recipe sets one of these (MSELoss.Config has none either).
        "loss": [("torchtitan/components/loss.py", "CrossEntropyLoss.Config"),
                 ("torchtitan/components/loss.py", "ChunkedLossWrapper.Config"),
                 ("torchtitan/models/deepseek_v3/mtp.py", "MTPLoss.Config")],
        # BaseDataLoader.Config (declared and default) has no fields; GrainDataLoader is its only
        # subclass in the repository and the loader every config registry uses.
        "dataloader": [("torchtitan/components/data/loader.py", "GrainDataLoader.Config")],
    },
}


class Repo:
    """One commit of a git directory, read without a work tree."""

    def __init__(self, git_dir, commit):
        self.git_dir, self.commit = git_dir, commit
        self._text, self._tree = {}, {}

    def show(self, path):
        if path not in self._text:
            r = subprocess.run(["git", "-C", self.git_dir, "show", f"{self.commit}:{path}"], capture_output=True,
                               text=True)
            self._text[path] = r.stdout if r.returncode == 0 else None
        return self._text[path]

    def tree(self, path):
        if path not in self._tree:
            text = self.show(path)
            self._tree[path] = ast.parse(text) if text is not None else None
        return self._tree[path]

    def module_path(self, dotted):
        """The file of a dotted module name in this commit, or None (not part of the repository)."""
        base = dotted.replace(".", "/")
        for path in (base + ".py", base + "/__init__.py"):
            if self.show(path) is not None:
                return path
        return None


def package_of(path):
    parts = path[:-3].split("/")
    return parts[:-1]  # a/b/c.py -> [a, b]; a/b/__init__.py -> [a, b]


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
    def __init__(self, repo):
        self.repo = repo
        self._busy = set()

    def lookup(self, path, name):
        """What `name` is at the top level of module file `path`: ("class", path, ClassDef),
        ("alias", path, expr), ("module", path) or None (not found or outside the repository)."""
        key = (path, name)
        if key in self._busy:
            return None
        self._busy.add(key)
        try:
            return self._lookup(path, name)
        finally:
            self._busy.discard(key)

    def _lookup(self, path, name):
        tree = self.repo.tree(path)
        if tree is None:
            return None
        found = None
        for stmt in top_statements(tree.body):
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                found = ("class", path, stmt)
            elif isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                found = ("alias", path, stmt.value)
            elif (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name
                  and stmt.value is not None):
                found = ("alias", path, stmt.value)
            elif isinstance(stmt, ast.ImportFrom):
                for a in stmt.names:
                    if (a.asname or a.name) != name:
                        continue
                    if stmt.level:
                        pkg = package_of(path)
                        pkg = pkg[:len(pkg) - (stmt.level - 1)]
                        source = ".".join(pkg + ([stmt.module] if stmt.module else []))
                    else:
                        source = stmt.module
                    sub = self.repo.module_path(f"{source}.{a.name}")
                    if sub is not None:
                        found = ("module", sub)
                        continue
                    src_path = self.repo.module_path(source)
                    found = self.lookup(src_path, a.name) if src_path else None
            elif isinstance(stmt, ast.Import):
                for a in stmt.names:
                    if a.asname == name:
                        sub = self.repo.module_path(a.name)
                        found = ("module", sub) if sub else None
        return found

    def nested(self, ref, name):
        """Class attribute `name` of class ref (a nested class), looking through the bases."""
        _, path, cls = ref
        for stmt in cls.body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                return ("class", path, stmt)
        for base in cls.bases:
            for b in self.classes(path, base):
                hit = self.nested(b, name)
                if hit:
                    return hit
        return None

    def resolve(self, path, expr):
        """The lookup result of a Name/Attribute expression in module `path`."""
        if isinstance(expr, ast.Name):
            return self.lookup(path, expr.id)
        if isinstance(expr, ast.Attribute):
            owner = self.resolve(path, expr.value)
            if owner is None:
                return None
            if owner[0] == "module":
                return self.lookup(owner[1], expr.attr)
            if owner[0] == "class":
                return self.nested(owner, expr.attr)
            if owner[0] == "alias":
                classes = self.classes(owner[1], owner[2])
                return self.nested(classes[0], expr.attr) if len(classes) == 1 else None
        return None

    def classes(self, path, expr):
        """Repository classes a type expression (or a default value / factory) can stand for."""
        if expr is None:
            return []
        if isinstance(expr, ast.Constant):
            if isinstance(expr.value, str):  # a forward reference
                try:
                    return self.classes(path, ast.parse(expr.value, mode="eval").body)
                except SyntaxError:
                    return []
            return []
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            return self.classes(path, expr.left) + self.classes(path, expr.right)
        if isinstance(expr, ast.Subscript):
            head = ast.unparse(expr.value).split(".")[-1]
            args = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
            if head == "Annotated":
                return self.classes(path, args[0])
            if head in ("Optional", "Union"):
                return [c for a in args for c in self.classes(path, a)]
            return []  # list[...], dict[...], Literal[...], type[...]: not a nested config
        if isinstance(expr, ast.Lambda):
            return self.classes(path, expr.body)
        if isinstance(expr, ast.Call):  # a default value built by calling a class
            return self.classes(path, expr.func)
        if isinstance(expr, (ast.Name, ast.Attribute)):
            ref = self.resolve(path, expr)
            if ref is None or ref[0] == "module":
                return []
            if ref[0] == "alias":
                return self.classes(ref[1], ref[2])
            return [ref]
        return []


def is_dataclass(ref):
    for d in ref[2].decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if ast.unparse(target) in ("dataclass", "dataclasses.dataclass"):
            return True
    return False


def fields_of(resolver, ref, _seen=None):
    """{name: (path, annotation, default expr, default_factory expr)} of a dataclass, bases first."""
    _, path, cls = ref
    seen = _seen or set()
    if id(cls) in seen:
        return {}
    seen = seen | {id(cls)}
    out = {}
    for base in cls.bases:
        for b in resolver.classes(path, base):
            for name, f in fields_of(resolver, b, seen).items():
                out[name] = f
    if not is_dataclass(ref):
        return out
    for stmt in cls.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        ann = ast.unparse(stmt.annotation)
        if ann.split("[")[0].split(".")[-1] in ("ClassVar", "InitVar"):
            continue
        default, factory = stmt.value, None
        if isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func) in ("field", "dataclasses.field"):
            kw = {k.arg: k.value for k in stmt.value.keywords}
            default, factory = kw.get("default"), kw.get("default_factory")
        out[stmt.target.id] = (path, stmt.annotation, default, factory)  # a redefinition keeps its position
    return out


def field_classes(resolver, f):
    path, annotation, default, factory = f
    refs = resolver.classes(path, annotation) + resolver.classes(path, factory)
    if isinstance(default, ast.Call):
        refs += resolver.classes(path, default)
    unique = []
    for r in refs:
        if all(r[2] is not u[2] for u in unique):
            unique.append(r)
    return unique


def union_fields(resolver, refs):
    out = {}
    for ref in refs:
        for name, f in fields_of(resolver, ref).items():
            out.setdefault(name, f)
    return out


def walk(resolver, prefix, refs, recursive, rows):
    for name, f in union_fields(resolver, refs).items():
        if name.startswith("_"):
            continue
        key = f"{prefix}.{name}"
        sub = [r for r in field_classes(resolver, f) if is_dataclass(r)]
        rows[key] = "section" if sub else "field"
        if sub and recursive:
            walk(resolver, key, sub, True, rows)


def era_rows(git_dir, era, commit):
    repo = Repo(git_dir, commit)
    resolver = Resolver(repo)
    path, dotted = ROOTS[era]
    root = resolver.classes(path, ast.parse(dotted, mode="eval").body)
    if len(root) != 1:
        raise SystemExit(f"{dotted} not found in {path} at {commit}")
    variants = VARIANTS.get(era, {})
    rows = {}
    for name, f in fields_of(resolver, root[0]).items():
        if name.startswith("_"):
            continue
        refs = [r for r in field_classes(resolver, f) if is_dataclass(r)]
        for vpath, vname in variants.get(name, []):
            v = resolver.classes(vpath, ast.parse(vname, mode="eval").body)
            if not v:
                raise SystemExit(f"variant {vname} not found in {vpath} at {commit}")
            refs += v
        rows[name] = "section" if refs else "field"
        if refs and name not in EXPAND_NONE:
            walk(resolver, name, refs, name in EXPAND_ALL, rows)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", help="torchtitan git directory (e.g. a bare mirror)")
    parser.add_argument("current_commit", help="commit whose root config is Trainer.Config")
    parser.add_argument("toml_commit", help="commit whose root config is JobConfig (TOML era)")
    args = parser.parse_args()
    eras = [("current", args.current_commit), ("toml", args.toml_commit)]
    out = [
        "# torchtitan (github.com/pytorch/torchtitan) config key paths, extracted by tools/extract_torchtitan_fields.py",
        f"# current = {args.current_commit} (root Trainer.Config, torchtitan/trainer.py)",
        f"# toml = {args.toml_commit} (root JobConfig, torchtitan/config/job_config.py)",
        "# era<TAB>dotted.key<TAB>kind (section = a nested config dataclass, field = anything else), sorted per era.",
        f"# Regenerate: tools/extract_torchtitan_fields.py TORCHTITAN_GIT_DIR {args.current_commit} {args.toml_commit}"
        " > planner/frameworks/torchtitan-fields.txt",
    ]
    for era, commit in eras:
        rows = era_rows(args.git_dir, era, commit)
        out.extend(f"{era}\t{key}\t{rows[key]}" for key in sorted(rows))
    sys.stdout.write("\n".join(out) + "\n")


main()
