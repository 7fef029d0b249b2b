//! The dependency graph: cycle search and text/DOT export (`tasks list graph`).

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::id::TaskId;
use crate::record::{Task, TaskStatus};
use crate::snapshot::Snapshot;

/// The tasks of a list as a graph whose edges are "blocker → blocked".
///
/// An edge is taken from either side (`blocks` of the blocker or `blockedBy` of the blocked),
/// so an asymmetric edge still counts; edges to tasks that do not exist are left out.
#[derive(Debug, Clone)]
pub struct Graph {
    tasks: Vec<Task>,
    out: Vec<Vec<usize>>,
}

impl Graph {
    /// Builds the graph of a snapshot.
    pub fn new(snapshot: &Snapshot) -> Self {
        Self::from_tasks(&snapshot.tasks)
    }

    pub(crate) fn from_tasks(tasks: &BTreeMap<TaskId, Task>) -> Self {
        let tasks: Vec<Task> = tasks.values().cloned().collect();
        let out = successors(&tasks, &ids_of(&tasks));
        Self { tasks, out }
    }

    /// The tasks, by id.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// Every edge `(blocker, blocked)`, sorted.
    pub fn edges(&self) -> Vec<(TaskId, TaskId)> {
        self.out
            .iter()
            .enumerate()
            .flat_map(|(i, outs)| {
                outs.iter()
                    .map(move |&j| (self.tasks[i].id, self.tasks[j].id))
            })
            .collect()
    }

    /// Cycles, each as a closed path `a → … → a` (one per back edge of a depth-first search,
    /// so every cycle of the graph shares an edge with a reported one).
    pub fn cycles(&self) -> Vec<Vec<TaskId>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            OnStack,
            Done,
        }
        let mut mark = vec![Mark::New; self.tasks.len()];
        let mut cycles = Vec::new();
        for root in 0..self.tasks.len() {
            if mark[root] != Mark::New {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            mark[root] = Mark::OnStack;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                let Some(&succ) = self.out[node].get(*next) else {
                    mark[node] = Mark::Done;
                    stack.pop();
                    continue;
                };
                *next += 1;
                match mark[succ] {
                    Mark::New => {
                        mark[succ] = Mark::OnStack;
                        stack.push((succ, 0));
                    }
                    Mark::OnStack => {
                        let start = stack.iter().position(|&(n, _)| n == succ).unwrap_or(0);
                        let mut cycle: Vec<TaskId> = stack[start..]
                            .iter()
                            .map(|&(n, _)| self.tasks[n].id)
                            .collect();
                        cycle.push(self.tasks[succ].id);
                        cycles.push(cycle);
                    }
                    Mark::Done => {}
                }
            }
        }
        cycles
    }

    /// One line per task (`#1 [pending] Set up schema (alice) → #2, #3`): tasks without a
    /// parent in the list by id, each followed by its children ([`Task::parent`]), indented
    /// two spaces a level, by id.
    pub fn to_text(&self) -> String {
        let ids = ids_of(&self.tasks);
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); self.tasks.len()];
        let mut roots = Vec::new();
        for (i, task) in self.tasks.iter().enumerate() {
            match task.parent().and_then(|p| position(&ids, p)) {
                Some(parent) if parent != i => children[parent].push(i),
                _ => roots.push(i),
            }
        }
        let mut text = String::new();
        let mut written = vec![false; self.tasks.len()];
        // Tasks in a parent loop (written by someone else) have no root: they start trees too.
        let starts: Vec<usize> = roots.into_iter().chain(0..self.tasks.len()).collect();
        for start in starts {
            let mut stack = vec![(start, 0_usize)];
            while let Some((i, depth)) = stack.pop() {
                if std::mem::replace(&mut written[i], true) {
                    continue;
                }
                self.write_line(&mut text, i, depth);
                stack.extend(children[i].iter().rev().map(|&c| (c, depth + 1)));
            }
        }
        text
    }

    /// Writes the line of `self.tasks[i]`, indented for `depth`.
    fn write_line(&self, text: &mut String, i: usize, depth: usize) {
        let task = &self.tasks[i];
        let _ = write!(
            text,
            "{:indent$}#{} [{}] {}",
            "",
            task.id,
            task.status,
            task.subject,
            indent = depth * 2
        );
        if let Some(owner) = &task.owner {
            let _ = write!(text, " ({owner})");
        }
        if !self.out[i].is_empty() {
            let targets: Vec<String> = self.out[i]
                .iter()
                .map(|&j| format!("#{}", self.tasks[j].id))
                .collect();
            let _ = write!(text, " → {}", targets.join(", "));
        }
        text.push('\n');
    }

    /// Graphviz DOT: one node per task (labelled, coloured by status), one edge per dependency.
    pub fn to_dot(&self, name: &str) -> String {
        let mut dot = format!(
            "digraph \"{}\" {{\n  rankdir=LR;\n  node [shape=box];\n",
            dot_escape(name)
        );
        for task in &self.tasks {
            let mut label = format!("#{} {}\n[{}]", task.id, task.subject, task.status);
            if let Some(owner) = &task.owner {
                let _ = write!(label, " {owner}");
            }
            let color = match task.status {
                TaskStatus::Pending => "gray",
                TaskStatus::InProgress => "blue",
                TaskStatus::Completed => "darkgreen",
            };
            let _ = writeln!(
                dot,
                "  \"{}\" [label=\"{}\", color={color}];",
                task.id,
                dot_escape(&label)
            );
        }
        for (from, to) in self.edges() {
            let _ = writeln!(dot, "  \"{from}\" -> \"{to}\";");
        }
        let ids = ids_of(&self.tasks);
        for task in &self.tasks {
            if let Some(parent) = task.parent().filter(|&p| position(&ids, p).is_some()) {
                let _ = writeln!(
                    dot,
                    "  \"{parent}\" -> \"{}\" [style=dashed, arrowhead=none];",
                    task.id
                );
            }
        }
        dot.push_str("}\n");
        dot
    }
}

/// The ids of `tasks`, in one contiguous array for [`position`] to search.
pub(crate) fn ids_of<T: Borrow<Task>>(tasks: &[T]) -> Vec<TaskId> {
    tasks.iter().map(|t| t.borrow().id).collect()
}

/// The position of `id` in `ids` (sorted).
pub(crate) fn position(ids: &[TaskId], id: TaskId) -> Option<usize> {
    ids.binary_search(&id).ok()
}

/// For each of `tasks` (sorted by id, no duplicates; `ids` their ids), the positions of the
/// tasks it blocks, ascending: the edges of [`Graph`], taken from either side, those to missing
/// tasks left out.
pub(crate) fn successors<T: Borrow<Task>>(tasks: &[T], ids: &[TaskId]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); tasks.len()];
    for (i, task) in tasks.iter().enumerate() {
        let task = task.borrow();
        for j in task.blocks.iter().filter_map(|&b| position(ids, b)) {
            out[i].push(j);
        }
        for j in task.blocked_by.iter().filter_map(|&b| position(ids, b)) {
            out[j].push(i);
        }
    }
    for targets in &mut out {
        targets.sort_unstable();
        targets.dedup();
    }
    out
}

/// Escapes text for a double-quoted DOT string.
fn dot_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn task(id: u64, blocks: &[u64]) -> Task {
        let mut t = Task::new(TaskId::new(id).unwrap(), format!("t{id}"), "");
        t.blocks = blocks.iter().map(|&b| TaskId::new(b).unwrap()).collect();
        t
    }

    fn graph(tasks: Vec<Task>) -> Graph {
        Graph::from_tasks(&tasks.into_iter().map(|t| (t.id, t)).collect())
    }

    #[test]
    fn finds_a_cycle_with_its_path() {
        let g = graph(vec![
            task(1, &[2]),
            task(2, &[3]),
            task(3, &[1]),
            task(4, &[]),
        ]);
        let cycles = g.cycles();
        assert_eq!(cycles.len(), 1);
        let ids: Vec<u64> = cycles[0].iter().map(|id| id.get()).collect();
        assert_eq!(ids, vec![1, 2, 3, 1]);
    }

    #[test]
    fn dag_has_no_cycles_and_exports() {
        let g = graph(vec![task(1, &[2, 3]), task(2, &[3]), task(3, &[])]);
        assert!(g.cycles().is_empty());
        assert_eq!(
            g.to_text(),
            "#1 [pending] t1 → #2, #3\n#2 [pending] t2 → #3\n#3 [pending] t3\n"
        );
        let dot = g.to_dot("l\"x");
        assert!(!dot.contains("dashed"));
        assert!(dot.starts_with("digraph \"l\\\"x\" {"));
        assert!(dot.contains("\"1\" -> \"3\";"));
    }

    #[test]
    fn children_are_indented_under_their_parent() {
        let mut child = task(3, &[]);
        child.metadata = Some(crate::Metadata::from_iter([("parent".into(), "1".into())]));
        let mut grandchild = task(4, &[]);
        grandchild.metadata = Some(crate::Metadata::from_iter([("parent".into(), "3".into())]));
        let g = graph(vec![task(1, &[2]), task(2, &[]), child, grandchild]);
        assert_eq!(
            g.to_text(),
            "#1 [pending] t1 → #2\n  #3 [pending] t3\n    #4 [pending] t4\n#2 [pending] t2\n"
        );
        assert!(
            g.to_dot("l")
                .contains("\"1\" -> \"3\" [style=dashed, arrowhead=none];")
        );
    }
}
