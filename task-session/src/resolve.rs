//! What a person types for a task, resolved to its id against the session's records: the id
//! itself, a name (an agent's `--name`, a teammate's `name` or `name@team`), or a unique
//! prefix of an id of at least [`MIN_PREFIX`] characters, as git and docker take them.
//!
//! The input is checked before anything is looked up: [`task_core::Address`]'s rules (not
//! empty, no space or control character, at most one `@` between two names) and a plain name's
//! characters (`[A-Za-z0-9_.@-]`, not starting with a dot, as a teammate's mailbox requires:
//! `../etc` is refused, not looked up). Whatever it resolves to is an id read from a record,
//! validated when it was read: no path is ever built from the text itself. An agent whose
//! `--name` is not such a name is still reached by its id or a prefix of it.

use task_core::{Address, TaskId};

use crate::error::{Error, Result};
use crate::record::TaskRecord;

/// The shortest prefix of an id that is looked up (shorter ones match too many to be meant).
pub const MIN_PREFIX: usize = 3;

/// How many candidates an ambiguous prefix names at most.
const MAX_CANDIDATES: usize = 10;

/// Checks `input` as a reference to a task: the id it spells, or what is to be looked up.
///
/// # Errors
/// [`Error::MalformedReference`] for text that is none of an id, a name or a prefix.
pub fn parse(input: &str) -> Result<Address> {
    let refuse = |why: String| Error::MalformedReference {
        input: input.chars().take(64).collect(),
        why,
    };
    let address = input
        .parse::<Address>()
        .map_err(|error| refuse(error.to_string()))?;
    if !matches!(address, Address::Task(_)) {
        task_output::mailbox::validate_name(input).map_err(|_| {
            refuse(
                "a name is letters, digits, '_', '-', '.' and one '@', not starting with '.'"
                    .into(),
            )
        })?;
    }
    Ok(address)
}

/// The task `input` names among `records` (the session's, in any order): by id, else by name
/// (the live task of that name, else the newest that had it), else by a unique prefix of its
/// id.
///
/// # Errors
/// [`Error::MalformedReference`] as [`parse`]; [`Error::AmbiguousReference`] when several
/// live tasks have the name, or the prefix starts several ids (each named);
/// [`Error::UnknownTask`] when nothing matches (`session` names where it was looked for).
pub fn resolve(input: &str, records: &[TaskRecord], session: &str) -> Result<TaskId> {
    let address = parse(input)?;
    if let Address::Task(id) = address {
        return Ok(id);
    }
    if let Some(id) = by_name(input, &address, records)? {
        return Ok(id);
    }
    if let Address::Name(text) = &address
        && let Some(id) = by_prefix(text, records)?
    {
        return Ok(id);
    }
    Err(Error::UnknownTask {
        id: input.to_owned(),
        session: session.to_owned(),
    })
}

/// The task `address` names: the one live task that answers to it, else the newest that did.
fn by_name(input: &str, address: &Address, records: &[TaskRecord]) -> Result<Option<TaskId>> {
    let named: Vec<&TaskRecord> = records
        .iter()
        .filter(|record| record.task.kind.answers_to(address))
        .collect();
    let live: Vec<TaskId> = named
        .iter()
        .filter(|record| !record.is_terminal())
        .map(|record| record.id())
        .collect();
    match live.as_slice() {
        [id] => return Ok(Some(*id)),
        [] => {}
        several => return Err(ambiguous(input, several.to_vec())),
    }
    Ok(named
        .iter()
        .max_by_key(|record| (record.task.base.start_time, record.id().as_str().to_owned()))
        .map(|record| record.id()))
}

/// The one id `prefix` starts, if it is long enough to be a prefix and starts any.
fn by_prefix(prefix: &str, records: &[TaskRecord]) -> Result<Option<TaskId>> {
    if prefix.len() < MIN_PREFIX {
        return Ok(None);
    }
    let mut matching: Vec<TaskId> = records
        .iter()
        .map(TaskRecord::id)
        .filter(|id| id.as_str().starts_with(prefix))
        .collect();
    matching.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    matching.dedup();
    match matching.as_slice() {
        [] => Ok(None),
        [id] => Ok(Some(*id)),
        _ => Err(ambiguous(prefix, matching)),
    }
}

fn ambiguous(input: &str, mut candidates: Vec<TaskId>) -> Error {
    candidates.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    let more = candidates.len().saturating_sub(MAX_CANDIDATES);
    candidates.truncate(MAX_CANDIDATES);
    Error::AmbiguousReference {
        input: input.to_owned(),
        candidates,
        more,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use task_core::{
        AgentState, ShellState, TaskKind, TaskState, TaskStatus, TeammateIdentity, TeammateState,
    };

    fn record(id: &str, kind: TaskKind, status: TaskStatus, start: u64) -> TaskRecord {
        let id = TaskId::parse(id).unwrap();
        let mut state = TaskState::new(id, "d", "/o", kind).unwrap();
        state.base.status = status;
        state.base.start_time = start;
        TaskRecord::new(state)
    }

    fn shell(id: &str) -> TaskRecord {
        record(
            id,
            TaskKind::Shell(ShellState::default()),
            TaskStatus::Running,
            1,
        )
    }

    fn agent(id: &str, name: &str, status: TaskStatus, start: u64) -> TaskRecord {
        let agent = AgentState {
            name: Some(name.into()),
            ..AgentState::default()
        };
        record(id, TaskKind::Agent(Box::new(agent)), status, start)
    }

    fn teammate(id: &str, name: &str, team: &str) -> TaskRecord {
        let mate = TeammateState {
            identity: TeammateIdentity {
                agent_name: name.into(),
                team_name: team.into(),
                ..TeammateIdentity::default()
            },
            ..TeammateState::default()
        };
        record(
            id,
            TaskKind::Teammate(Box::new(mate)),
            TaskStatus::Running,
            1,
        )
    }

    fn id(text: &str) -> TaskId {
        TaskId::parse(text).unwrap()
    }

    #[test]
    fn an_id_is_itself_even_with_no_record() {
        assert_eq!(resolve("b12345678", &[], "s").unwrap(), id("b12345678"));
    }

    #[test]
    fn names_find_agents_and_teammates_the_live_one_first() {
        let records = [
            agent("a11111111", "writer", TaskStatus::Completed, 5),
            agent("a22222222", "writer", TaskStatus::Running, 1),
            agent("a33333333", "old", TaskStatus::Completed, 1),
            agent("a44444444", "old", TaskStatus::Failed, 9),
            teammate("t11111111", "ann", "crew"),
        ];
        assert_eq!(resolve("writer", &records, "s").unwrap(), id("a22222222"));
        assert_eq!(resolve("old", &records, "s").unwrap(), id("a44444444"));
        assert_eq!(resolve("ann", &records, "s").unwrap(), id("t11111111"));
        assert_eq!(resolve("ann@crew", &records, "s").unwrap(), id("t11111111"));
        assert!(matches!(
            resolve("ann@other", &records, "s"),
            Err(Error::UnknownTask { .. })
        ));
    }

    #[test]
    fn two_live_tasks_of_one_name_are_ambiguous() {
        let records = [
            agent("a11111111", "w", TaskStatus::Running, 1),
            teammate("t11111111", "w", "crew"),
        ];
        let Err(Error::AmbiguousReference { candidates, .. }) = resolve("w", &records, "s") else {
            panic!("not ambiguous");
        };
        assert_eq!(candidates, [id("a11111111"), id("t11111111")]);
    }

    #[test]
    fn a_unique_prefix_of_three_or_more_finds_its_task() {
        let records = [shell("babc12345"), shell("babd99999"), shell("bzzz00000")];
        assert_eq!(resolve("babc", &records, "s").unwrap(), id("babc12345"));
        assert_eq!(resolve("bzz", &records, "s").unwrap(), id("bzzz00000"));
        let Err(error) = resolve("bab", &records, "s") else {
            panic!("ambiguous");
        };
        assert!(
            matches!(&error, Error::AmbiguousReference { candidates, more: 0, .. }
            if *candidates == [id("babc12345"), id("babd99999")])
        );
        let text = error.to_string();
        assert!(
            text.contains("babc12345") && text.contains("babd99999"),
            "{text}"
        );
        // Too short to be a prefix, and no name: unknown.
        assert!(matches!(
            resolve("bz", &records, "s"),
            Err(Error::UnknownTask { .. })
        ));
        assert!(matches!(
            resolve("bq", &records, "s"),
            Err(Error::UnknownTask { .. })
        ));
    }

    #[test]
    fn a_name_wins_over_a_prefix() {
        let records = [
            shell("bab123456"),
            agent("a11111111", "bab", TaskStatus::Running, 1),
        ];
        assert_eq!(resolve("bab", &records, "s").unwrap(), id("a11111111"));
    }

    #[test]
    fn malformed_text_is_refused_before_any_lookup() {
        for input in ["", "a b", "x\n", "@crew", "a@b@c", &"x".repeat(300)] {
            assert!(
                matches!(
                    resolve(input, &[], "s"),
                    Err(Error::MalformedReference { .. })
                ),
                "{input:?}"
            );
        }
        let said = resolve("a b", &[], "s").unwrap_err().to_string();
        assert!(
            said.contains(&format!("({MIN_PREFIX} characters or more)")),
            "the message gives the shortest prefix: {said}"
        );
        // Path-like text is no name: refused before anything is looked up.
        for input in ["../../etc/passwd", "a/b", ".hidden", "..", "a\0b"] {
            assert!(
                matches!(
                    resolve(input, &[shell("b12345678")], "s"),
                    Err(Error::MalformedReference { .. })
                ),
                "{input:?}"
            );
        }
    }
}
