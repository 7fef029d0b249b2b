//! Every JSON document `tasks` prints is valid for a strict reader: one value per key in every
//! object (serde_json alone keeps the last of two, so these documents are read by a parser
//! that refuses a repeated key), one document per line for streams.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::sandbox::Sandbox;

/// A JSON value whose objects never repeat a key (a repeat fails the parse).
struct Strict;

impl<'de> de::Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Strict;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_str<E>(self, _: &str) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        while seq.next_element::<Strict>()?.is_some() {}
        Ok(Strict)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        let mut keys = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !keys.insert(key.clone()) {
                return Err(de::Error::custom(format!("the key {key:?} appears twice")));
            }
            map.next_value::<Strict>()?;
        }
        Ok(Strict)
    }
}

/// Parses every JSON document of `text` (one, or a stream of lines) strictly; names the
/// command on failure.
fn strictly(args: &[&str], text: &str) {
    assert!(!text.trim().is_empty(), "tasks {args:?} printed nothing");
    for document in serde_json::Deserializer::from_str(text).into_iter::<Strict>() {
        if let Err(error) = document {
            panic!("tasks {args:?}: {error}: {text}");
        }
    }
}

#[test]
fn the_strict_parser_refuses_a_repeated_key() {
    assert!(serde_json::from_str::<Strict>(r#"{"a": 1, "b": {"a": 2}}"#).is_ok());
    assert!(serde_json::from_str::<Strict>(r#"{"a": 1, "b": 2, "a": 3}"#).is_err());
    assert!(serde_json::from_str::<Strict>(r#"[{"n": true, "n": false}]"#).is_err());
}

#[test]
fn every_json_output_of_every_command_is_strict_json() {
    let sandbox = Sandbox::new();
    let done = sandbox.start("echo one; echo two");
    let failed = sandbox.start("exit 3");
    let live = sandbox.start("sleep 1000");
    let mut commands: Vec<Vec<String>> = Vec::new();
    let mut add = |args: &[&str]| commands.push(args.iter().map(|&a| a.to_owned()).collect());
    add(&["wait", "--no-deliver", &done, &failed]);
    add(&["ps"]);
    add(&["ps", "--all"]);
    add(&["status"]);
    add(&["output", &done]);
    add(&["output", &done, "--tail", "1"]);
    add(&["output", &done, "--for-model"]);
    add(&["notifications"]);
    add(&["run", "--", "true"]);
    add(&["run", "--wait", "--", "echo waited"]);
    add(&["wait", &done]);
    add(&["kill", &live]);
    add(&["restart", &done]);
    add(&["list", "create", "Write the API"]);
    add(&["list", "create", "Test it"]);
    add(&["list", "update", "2", "--add-blocked-by", "1"]);
    add(&["list", "claim", "1", "--owner", "me"]);
    add(&["list", "ls"]);
    add(&["list", "get", "1"]);
    add(&["list", "ready"]);
    add(&["list", "graph"]);
    add(&["list", "update", "1", "--status", "completed"]);
    add(&["list", "doctor"]);
    add(&["list", "export"]);
    add(&["team", "ls"]);
    add(&["prune", "--keep-last", "100"]);
    for args in &commands {
        let args: Vec<&str> = std::iter::once("--json")
            .chain(args.iter().map(String::as_str))
            .collect();
        let ran = sandbox.run(&args);
        assert!(
            ran.status.success() || args[1] == "wait",
            "tasks {args:?}: {ran:?}"
        );
        strictly(&args, &String::from_utf8_lossy(&ran.stdout));
    }
}

#[test]
fn wait_delivers_the_completion_it_reports_so_rm_can_follow_it() {
    let sandbox = Sandbox::new();
    let id = sandbox.start("echo hi");
    let waited = sandbox.json(&["wait", &id]);
    let text = waited["tasks"][0]["notification"].as_str().unwrap();
    assert!(text.contains(&format!("<task-id>{id}</task-id>")), "{text}");
    // Delivered: no reader gets it again, and the task may be removed at once it settles.
    assert_eq!(sandbox.ok(&["notifications"]), "");
    let listed = sandbox.json(&["ps", "--all"]);
    assert_eq!(listed[0]["notified"], true, "{listed}");
    crate::support::eventually("the task removable", || {
        sandbox.run(&["rm", &id]).status.success().then_some(())
    });
    // With --no-deliver the completion stays for `tasks notifications`.
    let other = sandbox.start("echo there");
    sandbox.ok(&["wait", "--no-deliver", &other]);
    let notices = sandbox.ok(&["notifications"]);
    assert!(
        notices.contains(&format!("<task-id>{other}</task-id>")),
        "{notices}"
    );
}
