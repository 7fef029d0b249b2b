#!/usr/bin/env python3
"""Tests of .ci/cycles.py: small crates written to a temporary directory, each with a cycle
planted (or none), and the checker run on them as .ci/run runs it on the workspace.

    "$(.ci/cycles-deps.sh)" .ci/cycles_test.py

The python running this must have tree-sitter (the checker is run with the same python).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'cycles.py')

MANIFEST = '[package]\nname = "planted"\nversion = "0.1.0"\nedition = "2024"\n'

# String literals continued with `\` at the end of a line. The old checker's regular-expression
# string stripper lost sync on the first: it took the code after it for string (and missed the
# path that closes a cycle there). The second holds text that reads like paths into the crate,
# which are not code and must make no edge.
CONTINUED_PLAIN = r'''pub const HELP: &str = "a string continued \
    with a backslash";
'''
CONTINUED = r'''pub const HELP: &str = "a string continued \
    with a backslash: use crate::b::B; crate::b::g() \" still the string \
    and crate::b::B::new() too";
'''


def crate(test, files):
    """A crate in a new temporary directory, removed after the test: {relative path: source}."""
    d = tempfile.mkdtemp(prefix='cycles-test-')
    test.addCleanup(shutil.rmtree, d)
    files = {'Cargo.toml': MANIFEST, **files}
    for rel, src in files.items():
        path = os.path.join(d, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(textwrap.dedent(src) if rel.endswith('.rs') else src)
    return d


def check(d):
    """(exit code, stdout) of the checker run on the crate, from its directory."""
    r = subprocess.run([sys.executable, CHECKER, '-v', d], cwd=d, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    return r.returncode, r.stdout


class Cycles(unittest.TestCase):
    def assertClean(self, d, summary):
        code, out = check(d)
        self.assertEqual(code, 0, out)
        self.assertIn(summary, out)
        self.assertIn('0 file cycles, 0 subtree cycles', out)
        self.assertNotIn('warning', out)
        self.assertTrue(out.rstrip().endswith('no cycles'), out)

    def assertCycle(self, d, lines):
        code, out = check(d)
        self.assertEqual(code, 1, out)
        for line in lines:
            self.assertIn(line, out)
        self.assertNotIn('warning', out)

    def test_clean_crate(self):
        # Every construct the checker reads, and no cycle: a -> (nothing), b -> a, m's children
        # through m's re-exports, a #[path] module and an inline module calling down, test
        # modules calling back up (left out), a continued string naming b inside a.
        d = crate(self, {
            'src/lib.rs': '''
                pub mod a;
                pub mod b;
                pub mod m;
                #[path = "other/c_impl.rs"]
                pub mod c;
                pub mod inl {
                    pub fn g() -> u32 { crate::a::f() + self::h() }
                    fn h() -> u32 { 1 }
                }
                pub use m::{X, Y};
                ''',
            'src/a.rs': CONTINUED + '''
                pub fn f() -> u32 {
                    let s = "crate::b::g()";
                    s.len() as u32 // crate::b::g()
                }
                /* use crate::b::B; */
                #[cfg(test)]
                mod tests {
                    use crate::b::B;
                    #[test]
                    fn t() { let _ = B; }
                }
                #[cfg(test)]
                fn helper() -> u32 { crate::b::g() }
                ''',
            'src/b.rs': '''
                use crate::a;
                pub struct B;
                pub fn g() -> u32 { a::f() }
                ''',
            'src/m/mod.rs': '''
                mod x;
                mod y;
                pub use x::X;
                pub use self::y::Y;
                ''',
            'src/m/x.rs': 'pub struct X;\n',
            # A child using its sibling through the parent's re-export: an edge to x, none to m.
            'src/m/y.rs': '''
                use super::X;
                pub struct Y(pub X);
                ''',
            'src/other/c_impl.rs': '''
                pub fn c() -> u32 { crate::b::g() + super::inl::g() }
                ''',
        })
        self.assertClean(d, 'planted (lib: src/lib.rs): 8 modules in 7 files')

    def test_cycle_after_continued_string(self):
        # The path that closes the cycle comes right after a continued string, in an expression.
        d = crate(self, {
            'src/lib.rs': 'pub mod a;\npub mod b;\n',
            'src/a.rs': CONTINUED_PLAIN + '''
                pub fn f() -> u32 {
                    crate::b::g()
                }
                pub const OTHER: &str = "x";
                ''',
            'src/b.rs': '''
                use crate::a::HELP;
                pub fn g() -> u32 { HELP.len() as u32 }
                ''',
        })
        self.assertCycle(d, [
            'file cycle: src/a.rs -> src/b.rs -> src/a.rs',
            'src/a.rs -> src/b.rs    src/a.rs:5: crate::b::g()',
            'src/b.rs -> src/a.rs    src/b.rs:2: use crate::a::HELP;',
            'subtree cycle under crate: a -> b -> a',
        ])

    def test_cycle_through_mod_rs(self):
        # error names workflow's re-export of engine's item; workflow's files uses error. No two
        # files use each other, but the workflow subtree and error do.
        d = crate(self, {
            'src/lib.rs': 'pub mod error;\npub mod workflow;\n',
            'src/error.rs': '''
                pub enum AgentError {
                    Workflow(crate::workflow::WorkflowError),
                    Io,
                }
                ''',
            'src/workflow/mod.rs': '''
                mod engine;
                mod files;
                pub use engine::WorkflowError;
                pub use files::read;
                ''',
            'src/workflow/engine.rs': 'pub struct WorkflowError;\n',
            'src/workflow/files.rs': '''
                use crate::error::AgentError;
                pub fn read() -> Result<(), AgentError> { Err(AgentError::Io) }
                ''',
        })
        self.assertCycle(d, [
            '0 file cycles, 1 subtree cycles',
            'subtree cycle under crate: error -> workflow -> error',
            'error -> workflow    src/error.rs:3: Workflow(crate::workflow::WorkflowError),',
            'workflow -> error    src/workflow/files.rs:2: use crate::error::AgentError;',
        ])

    def test_cycle_through_a_reexport(self):
        # c names X through a's re-export of b's X, and a calls c: a and c depend on each other
        # although the item c names is defined in b.
        d = crate(self, {
            'src/lib.rs': 'pub mod a;\npub mod b;\npub mod c;\n',
            'src/a.rs': '''
                pub use crate::b::X;
                pub fn h() -> u32 { crate::c::k() }
                ''',
            'src/b.rs': 'pub struct X;\n',
            'src/c.rs': '''
                use crate::a::X;
                pub fn k() -> u32 { let _x = X; 1 }
                ''',
        })
        self.assertCycle(d, [
            'file cycle: src/a.rs -> src/c.rs -> src/a.rs',
            'src/c.rs -> src/a.rs    src/c.rs:2: use crate::a::X;',
            'src/a.rs -> src/c.rs    src/a.rs:3: pub fn h() -> u32 { crate::c::k() }',
        ])

    def test_cycle_through_path_attribute_and_inline_module(self):
        # p.rs (a #[path] file) holds an inline module that reaches q with super::super::; q
        # names it through p's `pub use self::inner::f`.
        d = crate(self, {
            'src/lib.rs': '#[path = "impl/p.rs"]\npub mod p;\npub mod q;\n',
            'src/impl/p.rs': '''
                pub mod inner {
                    pub fn f() -> u32 { super::super::q::g() }
                }
                pub use self::inner::f;
                ''',
            'src/q.rs': '''
                pub fn g() -> u32 { 1 }
                pub fn r() -> u32 { crate::p::f() }
                ''',
        })
        self.assertCycle(d, [
            'file cycle: src/impl/p.rs -> src/q.rs -> src/impl/p.rs',
            'src/q.rs -> src/impl/p.rs    src/q.rs:3: pub fn r() -> u32 { crate::p::f() }',
            'subtree cycle under crate: p -> q -> p',
        ])

    def test_cycle_through_a_glob_import(self):
        # a calls b's g by its bare name, imported with b::*.
        d = crate(self, {
            'src/lib.rs': 'pub mod a;\npub mod b;\n',
            'src/a.rs': '''
                use crate::b::*;
                pub fn f() -> u32 { g() }
                ''',
            'src/b.rs': '''
                pub fn g() -> u32 { 1 }
                pub fn k() -> u32 { super::a::f() }
                ''',
        })
        self.assertCycle(d, [
            'file cycle: src/a.rs -> src/b.rs -> src/a.rs',
            'src/a.rs -> src/b.rs    src/a.rs:3: pub fn f() -> u32 { g() }',
        ])

    def test_cycle_through_macro_tokens_and_types(self):
        # a reaches b only inside a macro invocation's tokens, b reaches a only in a type.
        d = crate(self, {
            'src/lib.rs': 'pub mod a;\npub mod b;\n',
            'src/a.rs': '''
                pub struct T;
                pub fn f() -> String {
                    format!("{}", crate::b::g().len())
                }
                ''',
            'src/b.rs': '''
                pub fn g() -> Vec<crate::a::T> { Vec::new() }
                ''',
        })
        self.assertCycle(d, [
            'src/a.rs -> src/b.rs    src/a.rs:4: format!("{}", crate::b::g().len())',
            'src/b.rs -> src/a.rs    src/b.rs:2: pub fn g() -> Vec<crate::a::T> { Vec::new() }',
        ])

    def test_cycle_through_a_macro_defined_item_and_a_serde_string(self):
        # a names CELL, which b's thread_local! defines; b reaches a only through the function a
        # serde attribute's string names (serde's derive calls it).
        d = crate(self, {
            'src/lib.rs': 'pub mod a;\npub mod b;\n',
            'src/a.rs': '''
                pub fn zero() -> u32 { crate::b::CELL.with(|c| *c) }
                ''',
            'src/b.rs': '''
                thread_local! { pub static CELL: u32 = 0; }
                #[derive(serde::Deserialize)]
                pub struct S {
                    #[serde(default = "crate::a::zero")]
                    pub n: u32,
                }
                ''',
        })
        self.assertCycle(d, [
            'src/a.rs -> src/b.rs    src/a.rs:2: pub fn zero() -> u32 { crate::b::CELL.with(|c| *c) }',
            'src/b.rs -> src/a.rs    src/b.rs:5: #[serde(default = "crate::a::zero")]',
        ])

    def test_cycle_in_a_binary(self):
        # A binary is a crate of its own: main.rs's modules are checked apart from the library's.
        d = crate(self, {
            'src/lib.rs': 'pub fn lib() {}\n',
            'src/main.rs': 'mod cli;\nmod run;\nfn main() { run::go() }\n',
            'src/cli.rs': 'pub struct Args;\npub fn parse() { crate::run::go() }\n',
            'src/run.rs': 'use crate::cli::Args;\npub fn go() { let _a = Args; }\n',
        })
        code, out = check(d)
        self.assertEqual(code, 1, out)
        self.assertIn('planted (lib: src/lib.rs): 1 modules in 1 files, 0 file cycles', out)
        self.assertIn('planted (bin planted: src/main.rs): 3 modules in 3 files, 1 file cycles',
                      out)
        self.assertIn('file cycle: src/cli.rs -> src/run.rs -> src/cli.rs', out)

    def test_nesting_is_no_cycle(self):
        # A parent that re-exports its child's item and a child that uses its parent's item (the
        # registry::executor shape ARCHITECTURE.md allows) make no cycle at either level.
        d = crate(self, {
            'src/lib.rs': 'pub mod registry;\npub use registry::{Registry, Task};\n',
            'src/registry/mod.rs': '''
                mod executor;
                pub use executor::Task;
                pub struct Registry(pub Vec<Box<dyn Task>>);
                ''',
            'src/registry/executor.rs': '''
                use super::Registry;
                pub trait Task { fn run(&self, registry: &Registry); }
                ''',
        })
        self.assertClean(d, 'planted (lib: src/lib.rs): 3 modules in 3 files')

    def test_unresolved_crate_path_is_a_warning(self):
        # A crate path the checker cannot resolve is named, so a gap in the checker shows.
        d = crate(self, {'src/lib.rs': 'pub mod a;\n', 'src/a.rs': 'pub fn f() { crate::nowhere::g() }\n'})
        code, out = check(d)
        self.assertEqual(code, 0, out)
        self.assertIn('warning: src/a.rs:1: crate::nowhere::g: no `nowhere` in crate', out)


if __name__ == '__main__':
    unittest.main(verbosity=2)
