//! task-agent's workflows: the script's `meta` literal, the run's journal lines and record.

use serde_json::Value;
use task_workflow::{JournalRecord, call_key, check_run_id, load_record, render_tree};

use crate::included::meta::{self, Meta};
use crate::scratch;

/// A workflow script's source (as `tasks workflow run` and a child `workflow()` read it): what
/// parses has a non-empty name and description, a body that is the rest of the source, and a
/// `meta` whose JSON re-parses, as a script of its own, to the same meta.
pub fn meta(data: &[u8]) {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = match meta::parse(source) {
        Ok(parsed) => parsed,
        Err(error) => {
            let _ = error.to_string();
            return;
        }
    };
    assert!(!parsed.meta.name.trim().is_empty() && !parsed.meta.description.trim().is_empty());
    assert!(
        source.ends_with(&parsed.body),
        "the body is the rest of the script"
    );
    let again: Meta = serde_json::from_value(parsed.meta_value.clone()).unwrap();
    assert_eq!(again, parsed.meta);
    let script = format!("export const meta = {}\n{}", parsed.meta_value, parsed.body);
    let reparsed = meta::parse(&script).expect("a meta written as JSON parses");
    assert_eq!(
        reparsed.meta, parsed.meta,
        "a meta written as JSON reads back"
    );
    assert_eq!(reparsed.body, format!("\n{}", parsed.body));
}

/// A run's files as `tasks workflow show` and a resume read them: each line as a journal
/// record (what parses re-serializes to an equal record; its call key is stable), the whole as
/// the run record, rendered as a tree.
pub fn files(data: &[u8]) {
    for line in data.split(|&b| b == b'\n') {
        if let Ok(record) = serde_json::from_slice::<JournalRecord>(line) {
            let encoded = serde_json::to_vec(&record).unwrap();
            let decoded: JournalRecord = serde_json::from_slice(&encoded).unwrap();
            assert_eq!(decoded, record, "a journal record reads back as written");
            if let JournalRecord::Result { key, result, .. } = &record {
                let first = call_key(key, result, 0);
                assert_eq!(first, call_key(key, result, 0), "a call key is stable");
                assert!(first.starts_with("v2:") && first.len() == 67);
            }
        }
    }
    let _ = check_run_id(&String::from_utf8_lossy(data));
    let output_dir = scratch::fresh("workflow-output");
    let run_id = "wf_fuzz000";
    let workflows = output_dir.join("workflows");
    scratch::create_private_dir(&workflows);
    scratch::write(&workflows.join(format!("{run_id}.json")), data);
    if let Ok(record) = load_record(&output_dir, run_id) {
        let _ = render_tree(&record);
    }
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        let _ = render_tree(&value);
    }
}
