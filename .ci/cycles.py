#!/usr/bin/env python3
"""Import cycles between the modules of each crate of the workspace, read with a real Rust parser.

    .ci/cycles.py [-v] [CRATE_DIR...]

Every crate of the workspace (the root Cargo.toml's members) when no directory is named. Exits 1
when any cycle is found, 0 otherwise; -v also prints every edge inside each cycle. The parser is
tree-sitter's Rust grammar (PyPI `tree-sitter`, `tree-sitter-rust`): when the running python lacks
it, the script re-runs itself with the python of the virtual environment that `.ci/cycles-deps.sh`
installs them into (target/cycles-venv).

What is read
------------
Each target of a crate whose root file is under src/ is a crate of its own: the library
(`[lib] path`, or src/lib.rs) and each binary (`[[bin]] path`, src/main.rs, src/bin/*.rs,
src/bin/*/main.rs). Its module tree is followed from the root file through `mod x;` declarations
(x.rs or x/mod.rs beside a mod-rs file, stem/x.rs beside a non-mod-rs file, a `#[path]` file
relative to the declaring file's directory, or, inside an inline module, to that module's
directory) and inline `mod x { … }` blocks. Test code is left out: an item (a `mod`, `use`, `fn`,
`impl` or any other, at any depth) under `#[cfg(test)]` or `#[cfg(all(test, …))]`, and `#[test]`
functions; so are tests/, benches/ and examples/, which are not in the module tree. Comments and
string literals are nodes of the syntax tree, never paths.

A module's namespace holds its items (fn, struct, enum, union, trait, type, const, static,
macro_rules, the items of an `extern` block), its child modules, the names its `use` declarations
bind (pub or not, at any depth of the module's code: a function's own `use` binds in its module)
and its glob imports (`use a::*`, `pub use a::*`).

Paths
-----
A path is resolved the way rustc resolves it: `crate::` (and a macro's `$crate::`) from the
root, `super::` from the parent, `self::` from the module itself, and a path without one of these
from the module's namespace (a child module, an item, a `use` binding, then the glob imports).
Every path in the module's code counts: each leaf of each `use` tree (`use crate::{a::X, b::*}`,
`use super::x as y`, `{self, …}`), and every path of two or more segments in an expression, a
type, a pattern, a trait bound, an `impl` header, a macro's name and the tokens of a macro
invocation, a `macro_rules!` body or an attribute, and the function paths serde's derive calls
from the strings of `#[serde(with|serialize_with|deserialize_with|default|skip_serializing_if|
getter = "…")]`. Resolution walks the path segment by segment: a child module is entered; a `use`
binding or glob import found on the way is followed to what it names (a re-export chain is
followed to its end); an item stops the walk (the rest of the path is a variant or an associated
item). A name a module does not define, in a module with a macro invocation among its items
(`thread_local! { static X … }`), is taken as an item that macro defines there. A single
identifier is resolved only through glob imports of crate modules (the `use` that imported it
otherwise already counts). A path whose first segment is not in the crate (std, an external
crate, a local variable, a generic) is not an edge, nor is a name that a module takes from
another crate's module through a glob import (`pub use other_crate::wire::*`: any name may come
from it, so one the module finds nowhere else is that crate's). A path that enters the crate and cannot be
resolved further is printed as a warning: rustc accepted it, so the checker has a gap there (an
edge it may miss); a warning alone does not fail the check.

What counts as an edge
----------------------
A path in module A's code that resolves makes these edges from A:
  * to the module that defines the item it names (where the `fn`, `struct`, `const`, … is written,
    after every re-export on the way);
  * to each module whose `use` binding or glob import the walk followed on the way: naming
    `crate::m::X` where m/mod.rs says `pub use x::X` depends on m (its re-export) and on m::x
    (the definition). So a `pub use a::X` is itself an edge from its module to a (and on to where
    X is defined).
A path that ends on a module (`use crate::m;`) makes only the edges of the re-exports it followed:
it is the later `m::X` that names something.

An edge between a module and one of its own ancestors or descendants is nesting, not an import,
and is left out at both levels: a parent that re-exports its children and a child that uses its
parent's items (or a sibling through the parent's re-export: `super::X` where the parent says
`pub use x::X`, which makes an edge to x and to nothing in the parent) are one unit. Where two
modules truly share one owner, the dependent one is the owner's child (ARCHITECTURE.md).

Two levels are checked:
  * files: a node per source file (an inline module is part of its file). Edge F -> G when some
    module of F has an edge to some module of G, unless F's module and G's module are nested.
    Finds, for example, engine.rs <-> files.rs.
  * subtrees: for each module P, a node per child of P standing for that child's whole subtree.
    A module edge A -> B (A, B not nested) is an edge between the two children of their lowest
    common ancestor that contain A and B. So `workflow` <-> `error` is a cycle when anything under
    workflow/ uses error and error uses anything under workflow/, even when the two files involved
    on the workflow side differ (error names a re-export in workflow/mod.rs of an item of
    workflow/run.rs, while workflow/files.rs uses error): a cycle through a mod.rs cannot vanish.
    Every file cycle is also a subtree cycle; the file level says which files close it.

Each cycle is printed as a chain of modules (files) back to its start, each step with the
file:line of the first path that makes that edge and the line's text.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bootstrap():
    """Re-runs this script with the python of target/cycles-venv when this one lacks tree-sitter."""
    try:
        import tree_sitter  # noqa: F401
        import tree_sitter_rust  # noqa: F401
        return
    except ImportError:
        if os.environ.get('CYCLES_BOOTSTRAPPED'):
            raise
    target = os.environ.get('CARGO_TARGET_DIR') or 'target'
    python = os.path.join(ROOT, target, 'cycles-venv', 'bin', 'python')
    if not os.path.exists(python) or subprocess.run(
            [python, '-c', 'import tree_sitter, tree_sitter_rust'],
            stderr=subprocess.DEVNULL).returncode != 0:
        python = subprocess.run([os.path.join(ROOT, '.ci', 'cycles-deps.sh')], check=True,
                                stdout=subprocess.PIPE, text=True).stdout.strip()
    os.environ['CYCLES_BOOTSTRAPPED'] = '1'
    os.execv(python, [python, os.path.abspath(__file__), *sys.argv[1:]])


if __name__ == '__main__':
    _bootstrap()

import glob  # noqa: E402
import tomllib  # noqa: E402
from collections import deque  # noqa: E402

import tree_sitter  # noqa: E402
import tree_sitter_rust  # noqa: E402

PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_rust.language()))

# Items that bind a name in their module's namespace (`mod` is handled on its own).
DEFINITIONS = {'function_item', 'function_signature_item', 'struct_item', 'enum_item',
               'union_item', 'trait_item', 'type_item', 'const_item', 'static_item',
               'macro_definition'}
SCOPED = ('scoped_identifier', 'scoped_type_identifier')
PATH_HEADS = ('identifier', 'crate', 'self', 'super', 'metavariable')
ANCHORS = ('crate', '$crate', 'super', 'self')


class Module:
    def __init__(self, name, parent, file, inline, directory):
        self.name = name
        self.parent = parent
        self.file = file            # the source file its code is in
        self.inline = inline        # an inline `mod x { }` block
        self.dir = directory        # where its `mod x;` children are
        self.children = {}          # name -> Module
        self.items = {}             # name -> line of the definition
        self.bindings = {}          # name -> [Binding]
        self.globs = []             # [Binding] of `use path::*`
        self.nodes = []             # (syntax node, attributes) of its code, test items left out
        self.item_macros = False    # a macro invocation among its items (`thread_local! { }`)
        self.path = (parent.path + (name,)) if parent else ()

    def file_module(self):
        m = self
        while m.inline:
            m = m.parent
        return m

    def __repr__(self):
        return 'crate' + ''.join('::' + p for p in self.path)


class Binding:
    """A `use` leaf (or glob) written in module: the path it names, as written."""

    def __init__(self, module, segments):
        self.module = module
        self.segments = segments


class Unresolved(Exception):
    pass


def text(node):
    return node.text.decode('utf-8', 'replace')


def line_of(node):
    return node.start_point[0] + 1


def attr_is_test(attr):
    """`#[test]`, `#[cfg(test)]`, `#[cfg(all(…, test, …))]`."""
    a = attr.named_children[0] if attr.named_children else None
    if a is None or a.type != 'attribute':
        return False
    s = ''.join(text(a).split())
    return s == 'test' or s == 'cfg(test)' or (s.startswith('cfg(all(') and 'test' in
                                              s[8:].rstrip(')').split(','))


def attr_path(attr):
    a = attr.named_children[0] if attr.named_children else None
    if a is None or a.type != 'attribute':
        return None
    head = a.named_children[0] if a.named_children else None
    if head is None or text(head) != 'path':
        return None
    for c in a.named_children:
        if c.type == 'string_literal':
            return ''.join(text(s) for s in c.named_children if s.type == 'string_content')
    return None


def with_attributes(container):
    """The named children of a node, each with the outer attributes written before it; test items
    (and their attributes) left out."""
    attrs = []
    for child in container.named_children:
        if child.type == 'attribute_item':
            attrs.append(child)
            continue
        if child.type in ('line_comment', 'block_comment'):
            continue
        if not any(attr_is_test(a) for a in attrs):
            yield child, attrs
        attrs = []


def flatten(node):
    """The segments of a path node, or None when it is not a plain path (`<T as Tr>::f`)."""
    t = node.type
    if t in ('identifier', 'type_identifier', 'crate', 'self', 'super', 'metavariable'):
        return [text(node)]
    if t in SCOPED:
        path, name = node.child_by_field_name('path'), node.child_by_field_name('name')
        if name is None:
            return None
        if path is None:
            return ['::', text(name)]   # `::std::x`: a global path, never this crate
        head = flatten(path)
        return None if head is None else head + [text(name)]
    if t == 'generic_type':
        inner = node.child_by_field_name('type')
        return flatten(inner) if inner is not None else None
    return None


def use_leaves(node, prefix):
    """(kind, segments, alias, node) for each leaf of a use tree: kind 'leaf' or 'glob'."""
    t = node.type
    if t == 'use_as_clause':
        path, alias = node.child_by_field_name('path'), node.child_by_field_name('alias')
        segs = flatten(path)
        if segs is not None:
            yield 'leaf', prefix + segs, text(alias) if alias is not None else None, node
    elif t == 'use_wildcard':
        inner = [c for c in node.named_children if c.type != 'line_comment']
        segs = flatten(inner[0]) if inner else []
        if segs is not None:
            yield 'glob', prefix + segs, None, node
    elif t == 'scoped_use_list':
        path, lst = node.child_by_field_name('path'), node.child_by_field_name('list')
        segs = flatten(path) if path is not None else []
        if segs is not None and lst is not None:
            yield from use_leaves(lst, prefix + segs)
    elif t == 'use_list':
        for c in node.named_children:
            if c.type not in ('line_comment', 'block_comment'):
                yield from use_leaves(c, prefix)
    elif t == 'self' and prefix:
        yield 'leaf', prefix, None, node       # `a::{self}` binds `a`
    else:
        segs = flatten(node)
        if segs is not None:
            yield 'leaf', prefix + segs, None, node


def use_tree(decl):
    arg = decl.child_by_field_name('argument')
    return use_leaves(arg, []) if arg is not None else iter(())


class Target:
    """One crate root and the module tree under it."""

    def __init__(self, label, root_file):
        self.label = label
        self.warnings = []
        self.files = {}
        self.modules = []
        self.root = self.load(None, '', root_file, True)

    def warn(self, file, line, msg):
        self.warnings.append(f'{rel(file)}:{line}: {msg}')

    def parse(self, file):
        if file not in self.files:
            with open(file, 'rb') as f:
                tree = PARSER.parse(f.read())
            if tree.root_node.has_error:
                bad = first_error(tree.root_node)
                self.warn(file, line_of(bad) if bad else 0,
                          'syntax the parser does not read; paths there may be missed')
            self.files[file] = tree
        return self.files[file].root_node

    def load(self, parent, name, file, mod_rs):
        directory = os.path.dirname(file)
        if not mod_rs:
            directory = os.path.join(directory, os.path.splitext(os.path.basename(file))[0])
        module = Module(name, parent, file, False, directory)
        root = self.parse(file)
        if any(c.type == 'inner_attribute_item' and attr_is_test(c) for c in root.named_children):
            return None
        self.fill(module, root)
        return module

    def fill(self, module, container):
        self.modules.append(module)
        for child, attrs in with_attributes(container):
            t = child.type
            if t == 'mod_item':
                self.child_module(module, child, attrs)
                continue
            module.nodes.append((child, attrs))
            if t in DEFINITIONS:
                name = child.child_by_field_name('name')
                if name is not None:
                    module.items.setdefault(text(name), line_of(child))
            elif t == 'macro_invocation':
                module.item_macros = True
            elif t == 'foreign_mod_item':
                body = child.child_by_field_name('body')
                for item, _ in with_attributes(body) if body is not None else ():
                    name = item.child_by_field_name('name')
                    if name is not None:
                        module.items.setdefault(text(name), line_of(item))
        # Every `use` of the module's code binds in its namespace (a function's own too).
        for node, _ in module.nodes:
            for decl in descendants(node, 'use_declaration'):
                for kind, segs, alias, _ in use_tree(decl):
                    binding = Binding(module, segs)
                    if kind == 'glob':
                        module.globs.append(binding)
                    elif alias != '_':
                        module.bindings.setdefault(alias or segs[-1], []).append(binding)

    def child_module(self, module, node, attrs):
        name_node = node.child_by_field_name('name')
        if name_node is None:
            return
        name = text(name_node)
        body = node.child_by_field_name('body')
        path = next((p for p in map(attr_path, attrs) if p is not None), None)
        if body is not None:
            child = Module(name, module, module.file, True,
                           os.path.join(module.dir, path if path else name))
            module.children[name] = child
            self.fill(child, body)
            return
        if path is not None:
            base = module.dir if module.inline else os.path.dirname(module.file)
            candidates, mod_rs = [os.path.normpath(os.path.join(base, path))], True
        else:
            candidates = [os.path.join(module.dir, name + '.rs'),
                          os.path.join(module.dir, name, 'mod.rs')]
            mod_rs = None
        found = next((c for c in candidates if os.path.isfile(c)), None)
        if found is None:
            self.warn(module.file, line_of(node), f'no file for `mod {name};`')
            return
        if mod_rs is None:
            mod_rs = os.path.basename(found) == 'mod.rs'
        child = self.load(module, name, found, mod_rs)
        if child is not None:
            module.children[name] = child

    # --- resolution -------------------------------------------------------------------------

    def resolve(self, ctx, segs, seen=frozenset()):
        """(kind, module, hops) for a path written in ctx: kind 'mod' (the path names a module),
        'def' (an item defined in module) or 'ext' (a re-export of something outside the crate,
        module None); hops: the modules whose `use` bindings or glob imports the walk followed.
        None when the path's first segment is no name of this crate. Raises Unresolved."""
        if not segs or segs[0] == '::':
            return None
        head = segs[0]
        if head in ('crate', '$crate'):
            cur, i = self.root, 1
        elif head == 'self':
            cur, i = ctx, 1
        else:
            cur, i = ctx, 0
        kind, module, hops = 'mod', cur, []
        while i < len(segs) and kind == 'mod':   # an item ends the walk: the rest is a
            name = segs[i]                        # variant or an associated item
            if name == 'super':
                if module.parent is None:
                    raise Unresolved('`super` above the crate root')
                module = module.parent
            else:
                found = self.step(module, name, i + 1 < len(segs), seen)
                if found is None:
                    if i == 0:
                        return None               # a local, a generic, std, another crate
                    if module.item_macros:        # an item one of its macros defines
                        return 'def', module, hops
                    raise Unresolved(f'no `{name}` in {module!r}')
                kind, module, more = found
                hops += more
            i += 1
        return kind, module, hops

    def step(self, m, name, more, seen):
        """What `name` is in m's namespace, as resolve's (kind, module, hops); None when m has no
        such name. A child module or an item first (the module first when the path goes on),
        then `use` bindings, then glob imports; a binding or glob that leads into the crate wins
        over one that leads out of it (a name can be imported once per namespace)."""
        order = ('children', 'items') if more else ('items', 'children')
        for kind in order:
            if kind == 'children' and name in m.children:
                return 'mod', m.children[name], []
            if kind == 'items' and name in m.items:
                return 'def', m, []
        outside = None
        for b in m.bindings.get(name, ()):
            if id(b) in seen:
                continue
            try:
                r = self.resolve(b.module, b.segments, seen | {id(b)})
            except Unresolved:
                r = None                          # warned where the `use` is written
            r = r or ('ext', None, [])
            found = r[0], r[1], [b.module] + r[2]
            if r[0] != 'ext':
                return found
            outside = outside or found
        external_glob = None
        for g in m.globs:
            if id(g) in seen:
                continue
            try:
                r = self.resolve(g.module, g.segments, seen | {id(g)})
            except Unresolved:
                r = 'unresolved'
            if r is None:
                external_glob = external_glob or g  # another crate's module: any name may be its
                continue
            if r == 'unresolved' or r[0] != 'mod':
                continue                          # a glob of an enum's variants, or of std
            inner = self.step(r[1], name, more, seen | {id(g)})
            if inner is None:
                continue
            found = inner[0], inner[1], [g.module] + r[2] + inner[2]
            if inner[0] != 'ext':
                return found
            outside = outside or found
        if outside is None and external_glob is not None:
            return 'ext', None, [external_glob.module]
        return outside

    # --- references -------------------------------------------------------------------------

    def references(self, module):
        """(segments, node) for every path of the module's code."""
        glob_names = bool(module.globs)
        for node, attrs in module.nodes:
            for a in attrs:
                yield from paths_in(a, glob_names)
            yield from paths_in(node, glob_names)

    def edges(self):
        """{(from module, to module): (file, line)}: the first path making each edge."""
        out = {}
        for m in self.modules:
            for segs, node in self.references(m):
                try:
                    r = self.resolve(m, segs)
                except Unresolved as e:
                    self.warn(m.file, line_of(node), f'{"::".join(segs)}: {e}')
                    continue
                if r is None:
                    continue
                kind, target, hops = r
                for t in hops + ([target] if kind == 'def' else []):
                    if t is m:
                        continue
                    key = (m, t)
                    where = (m.file, line_of(node))
                    if key not in out or where < out[key]:
                        out[key] = where
        return out


def first_error(node):
    if node.type == 'ERROR' or node.is_missing:
        return node
    for c in node.children:
        if c.has_error:
            return first_error(c)
    return None


def descendants(node, kind):
    """Nodes of a type under node (node included), test items and inline modules left out."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == kind:
            yield n
            continue
        if n.type == 'mod_item':
            continue
        stack.extend(c for c, _ in reversed(list(with_attributes(n))))


def paths_in(node, glob_names):
    """(segments, node) of the paths under node: use leaves, scoped paths, macro tokens."""
    stack = [node]
    while stack:
        n = stack.pop()
        t = n.type
        if t == 'mod_item':
            continue                        # an inline module has its own scan
        if t == 'use_declaration':
            for kind, segs, _, leaf in use_tree(n):
                yield segs, leaf
            continue
        if t == 'visibility_modifier':
            continue                        # `pub(in crate::a)` names no item
        if t in SCOPED:
            parent = n.parent
            if not (parent is not None and parent.type in SCOPED
                    and parent.child_by_field_name('path') == n):
                segs = flatten(n)
                if segs is not None:
                    yield segs, n
        elif t == 'token_tree':
            yield from token_paths(n, glob_names)
            continue
        elif t == 'attribute' and n.named_children and text(n.named_children[0]) == 'serde':
            yield from serde_paths(n)
        elif glob_names and t in ('identifier', 'type_identifier'):
            parent = n.parent
            if parent is None or parent.type not in SCOPED:
                yield [text(n)], n
        for c, attrs in reversed(list(with_attributes(n))):
            for a in attrs:
                stack.extend(token_tree_nodes(a))
            stack.append(c)


def token_tree_nodes(node):
    return [c for c in node.named_children if c.type == 'attribute'] if node.type == \
        'attribute_item' else [node]


# serde's derive calls the function (or the module's `serialize`) these keys name in a string.
SERDE_KEYS = {'with': ['serialize'], 'serialize_with': [], 'deserialize_with': [], 'default': [],
              'skip_serializing_if': [], 'getter': []}


def serde_paths(attribute):
    """The paths in the strings of `#[serde(default = "…", with = "…", …)]`."""
    for tree in attribute.named_children:
        if tree.type != 'token_tree':
            continue
        kids = tree.children
        for i in range(len(kids) - 2):
            key = text(kids[i])
            if key in SERDE_KEYS and kids[i + 1].type == '=' and \
                    kids[i + 2].type == 'string_literal':
                value = ''.join(text(c) for c in kids[i + 2].named_children)
                segs = value.split('::')
                if len(segs) > 1 or key == 'with':
                    if all(seg.isidentifier() or seg == '$crate' for seg in segs):
                        yield segs + SERDE_KEYS[key], kids[i + 2]


def token_paths(node, glob_names):
    """Paths in the tokens of a macro invocation, macro_rules body or attribute."""
    stack = [node]
    while stack:
        n = stack.pop()
        kids = n.children
        i = 0
        while i < len(kids):
            k = kids[i]
            if k.type in ('token_tree', 'token_tree_pattern', 'macro_rule'):
                stack.append(k)
                i += 1
                continue
            if k.type in SCOPED:
                segs = flatten(k)
                if segs is not None:
                    yield segs, k
                i += 1
                continue
            starts = k.type in PATH_HEADS and not (i > 0 and kids[i - 1].type == '::')
            if k.type == 'metavariable' and text(k) != '$crate':
                starts = False
            if not starts:
                i += 1
                continue
            segs, j = [text(k)], i + 1
            while j + 1 < len(kids) and kids[j].type == '::' and kids[j + 1].type in (
                    'identifier', 'super', 'self'):
                segs.append(text(kids[j + 1]))
                j += 2
            if len(segs) > 1 or (glob_names and k.type == 'identifier'):
                yield segs, k
            i = max(j, i + 1)


# --- graphs ---------------------------------------------------------------------------------

def nested(a, b):
    return a.path[:len(b.path)] == b.path or b.path[:len(a.path)] == a.path


def sccs(nodes, graph):
    """Strongly connected components of more than one node (Tarjan), sorted."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(out)


def shortest_cycle(comp, graph):
    """The shortest cycle through the component's first node, as a list of nodes."""
    start, members = comp[0], set(comp)
    prev, queue = {start: None}, deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph.get(v, ())):
            if w not in members:
                continue
            if w == start:
                chain = [v]
                while prev[chain[-1]] is not None:
                    chain.append(prev[chain[-1]])
                return list(reversed(chain)) + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp + [comp[0]]


def rel(path):
    return os.path.relpath(path, os.getcwd())


def source_line(file, line):
    try:
        with open(file, encoding='utf-8', errors='replace') as f:
            for n, s in enumerate(f, 1):
                if n == line:
                    s = ' '.join(s.split())
                    return s if len(s) <= 110 else s[:107] + '...'
    except OSError:
        pass
    return ''


def report(title, comp, graph, evidence, name, verbose):
    chain = shortest_cycle(comp, graph)
    print(f'    {title}: ' + ' -> '.join(name(v) for v in chain))
    steps = list(zip(chain, chain[1:]))
    if verbose:
        steps = [(a, b) for a in comp for b in sorted(graph.get(a, ())) if b in set(comp)]
    for a, b in steps:
        file, line = evidence[(a, b)]
        print(f'        {name(a)} -> {name(b)}    {rel(file)}:{line}: {source_line(file, line)}')
    rest = [name(v) for v in comp if v not in chain]
    if rest:
        print(f'        (same cycle, {len(comp)} in all, also: {", ".join(rest)})')


def check(target, verbose):
    module_edges = target.edges()
    by_path = {m.path: m for m in target.modules}
    files = sorted({m.file for m in target.modules})
    file_graph, file_evidence = {}, {}
    sub_graph, sub_evidence = {}, {}
    for (a, b), where in sorted(module_edges.items(), key=lambda kv: (kv[1], kv[0][0].path,
                                                                        kv[0][1].path)):
        if nested(a, b):
            continue
        fa, fb = a.file_module(), b.file_module()
        if a.file != b.file and not nested(fa, fb):
            file_graph.setdefault(a.file, set()).add(b.file)
            file_evidence.setdefault((a.file, b.file), where)
        n = 0
        while a.path[n] == b.path[n]:
            n += 1
        ca, cb = a.path[:n + 1], b.path[:n + 1]
        sub_graph.setdefault(ca, set()).add(cb)
        sub_evidence.setdefault((ca, cb), where)
    file_cycles = sccs(files, file_graph)
    sub_nodes = sorted(by_path)
    sub_cycles = sccs(sub_nodes, sub_graph)
    print(f'{target.label}: {len(target.modules)} modules in {len(files)} files, '
          f'{len(file_cycles)} file cycles, {len(sub_cycles)} subtree cycles')
    for w in target.warnings:
        print(f'    warning: {w}')
    for comp in file_cycles:
        report('file cycle', comp, file_graph, file_evidence, rel, verbose)
    for comp in sub_cycles:
        parent = 'crate' + ''.join('::' + p for p in comp[0][:-1])
        report(f'subtree cycle under {parent}', comp, sub_graph, sub_evidence,
               lambda p: p[-1], verbose)
    return len(file_cycles) + len(sub_cycles)


def targets(crate):
    """(label, root file) of each target of the crate whose root is under src/."""
    crate = os.path.abspath(crate)
    with open(os.path.join(crate, 'Cargo.toml'), 'rb') as f:
        manifest = tomllib.load(f)
    package = manifest.get('package', {})
    name = package.get('name', os.path.basename(crate))
    src = os.path.join(crate, 'src')
    roots = []
    lib = manifest.get('lib', {})
    lib_path = os.path.join(crate, lib.get('path', 'src/lib.rs'))
    if os.path.isfile(lib_path):
        roots.append(('lib', lib_path))
    bins = {}
    for b in manifest.get('bin', []):
        path = b.get('path') or ('src/main.rs' if b.get('name') == name
                                 else f'src/bin/{b.get("name")}.rs')
        bins[os.path.normpath(os.path.join(crate, path))] = b.get('name')
    if package.get('autobins', True):
        main = os.path.join(src, 'main.rs')
        auto = ([main] if os.path.isfile(main) else []) + \
            sorted(glob.glob(os.path.join(src, 'bin', '*.rs'))) + \
            sorted(glob.glob(os.path.join(src, 'bin', '*', 'main.rs')))
        for path in auto:
            path = os.path.normpath(path)
            if path not in bins:
                stem = os.path.splitext(os.path.basename(path))[0]
                bins[path] = name if path == main else (
                    os.path.basename(os.path.dirname(path)) if stem == 'main' else stem)
    for path, bin_name in sorted(bins.items()):
        if os.path.isfile(path) and path.startswith(src + os.sep):
            roots.append((f'bin {bin_name}', path))
    return [(f'{name} ({kind}: {rel(path)})', path) for kind, path in roots]


def workspace_crates():
    with open(os.path.join(ROOT, 'Cargo.toml'), 'rb') as f:
        members = tomllib.load(f).get('workspace', {}).get('members', [])
    out = []
    for pattern in members:
        out.extend(sorted(glob.glob(os.path.join(ROOT, pattern))))
    return [c for c in out if os.path.isfile(os.path.join(c, 'Cargo.toml'))]


def main(argv):
    verbose = '-v' in argv
    crates = [a for a in argv if a != '-v'] or workspace_crates()
    found = 0
    for crate in crates:
        for label, root in targets(crate):
            found += check(Target(label, root), verbose)
    print(f'{found} cycles' if found else 'no cycles')
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
