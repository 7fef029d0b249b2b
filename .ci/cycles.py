#!/usr/bin/env python3
"""Import cycles between the modules (files) of each crate.

A module `a` depends on `b` when its code (tests excluded) names a path into `b`: `crate::b::…`,
`super::b::…`, or an item that a parent re-exports from `b` (`crate::Item` where lib.rs says
`pub use b::Item`). Edges between a module and its own ancestors or descendants are nesting, not
imports, and are left out. Prints every strongly connected component of more than one module
and exits 1 if there is one.
"""
import os, re, sys
from collections import defaultdict

def modules(src):
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith('.rs'):
                continue
            parts = os.path.relpath(os.path.join(root, f), src)[:-3].split(os.sep)
            if parts[0] == 'bin' or (parts == ['main'] and os.path.exists(os.path.join(src, 'lib.rs'))):
                continue
            if parts[-1] == 'mod':
                parts = parts[:-1]
            if parts in (['lib'], ['main']):
                parts = []
            mods[tuple(parts)] = os.path.join(root, f)
    return mods

def strip(text):
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'r(#*)".*?"\1', '""', text, flags=re.S)
    text = re.sub(r"b?'(?:\\.|[^'\\])'", "' '", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    while True:
        m = re.search(r'#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{', text)
        if not m:
            return text
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {'{': 1, '}': -1}.get(text[j], 0)
            j += 1
        text = text[:m.start()] + text[j:]

def use_paths(text):
    """Every path a use declaration or expression names, as lists of segments, use trees expanded."""
    out = []
    def expand(prefix, tree):
        tree = tree.strip()
        if not tree:
            return
        if tree.startswith('{') and tree.endswith('}'):
            depth, start = 0, 1
            for i, ch in enumerate(tree[1:-1], 1):
                if ch == '{': depth += 1
                elif ch == '}': depth -= 1
                elif ch == ',' and depth == 0:
                    expand(prefix, tree[start:i]); start = i + 1
            expand(prefix, tree[start:-1])
            return
        m = re.match(r'(\w+)\s*(?:::\s*(.*))?$', tree, re.S)
        if not m:
            return
        head, rest = m.group(1), m.group(2)
        if rest is None:
            out.append(prefix + ([] if head == 'self' else [head.split(' ')[0]]))
        else:
            expand(prefix + [head], rest)
    for m in re.finditer(r'\buse\s+([^;]*);', text):
        tree = re.sub(r'\s+as\s+\w+', '', m.group(1))
        expand([], tree)
    for m in re.finditer(r'\b(?:crate|super)(?:\s*::\s*\w+)+', text):
        out.append(re.sub(r'\s', '', m.group(0)).split('::'))
    return out

def absolute(mp, path, is_dir_module):
    if not path:
        return None
    if path[0] == 'crate':
        return path[1:]
    if path[0] == 'super':
        cur = list(mp)[:-1]
        rest = path[1:]
        while rest and rest[0] == 'super':
            cur, rest = cur[:-1], rest[1:]
        return cur + rest
    if path[0] == 'self':
        return list(mp) + path[1:]
    return None

def reexports(mods, texts):
    """(module, name) -> module path the name is re-exported from."""
    table = {}
    for mp, text in texts.items():
        for m in re.finditer(r'\bpub(?:\([^)]*\))?\s+use\s+([^;]*);', text):
            for path in use_paths('use ' + m.group(1) + ';'):
                if path[0] not in ('crate', 'super', 'self'):
                    path = ['self'] + path
                target = absolute(mp, path, True)
                if target:
                    table[(mp, target[-1])] = target
    return table

def resolve(mods, table, path, seen=()):
    for n in range(len(path), -1, -1):
        head = tuple(path[:n])
        if head in mods:
            if n < len(path) and (head, path[n]) in table and (head, path[n]) not in seen:
                return resolve(mods, table, table[(head, path[n])], seen + ((head, path[n]),))
            return head
    return None

def cycles(crate):
    src = os.path.join(crate, 'src')
    mods = modules(src)
    texts = {mp: strip(open(f).read()) for mp, f in mods.items()}
    table = reexports(mods, texts)
    graph = defaultdict(set)
    for mp, text in texts.items():
        for path in use_paths(text):
            target = absolute(mp, path, True)
            if target is None:
                continue
            t = resolve(mods, table, target)
            if t is None or t[:len(mp)] == mp or mp[:len(t)] == t:
                continue
            graph[mp].add(t)
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)
    def visit(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)
    for v in sorted(mods):
        if v not in index:
            visit(v)
    return mods, graph, comps

def main(crates, verbose):
    found = 0
    for crate in crates:
        mods, graph, comps = cycles(crate)
        found += len(comps)
        print(f"{os.path.basename(os.path.normpath(crate))}: {len(mods)} modules, {len(comps)} cycles, {sum(map(len, comps))} modules in cycles")
        for comp in comps:
            names = {c: '::'.join(c) or 'lib' for c in comp}
            print('   ', ' '.join(sorted(names.values())))
            if verbose:
                for c in sorted(comp):
                    inner = sorted(names[t] for t in graph[c] if t in names)
                    print(f'        {names[c]} -> {", ".join(inner)}')
    return 1 if found else 0

def workspace_crates():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    return sorted(os.path.join(root, d) for d in os.listdir(root)
                  if os.path.isfile(os.path.join(root, d, 'Cargo.toml'))
                  and os.path.isdir(os.path.join(root, d, 'src')))

if __name__ == '__main__':
    # .ci/cycles.py [-v] [CRATE_DIR...]: every crate of the workspace when none is named;
    # -v prints the edges inside each cycle.
    args = sys.argv[1:]
    verbose = '-v' in args
    args = [a for a in args if a != '-v'] or workspace_crates()
    sys.exit(main(args, verbose))
