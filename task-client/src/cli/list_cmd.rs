//! `tasks list …`: the task-list store (SPEC §12), printed as the reference shows it to its model
//! (or as the reference's JSON shapes with `--json`).

use std::io::{Read as _, Write as _};
use std::path::Path;

use serde::Serialize;
use task_list::{
    Actor, ClaimOptions, ClaimResult, CreateRequest, EnvValues, Layout, ListExport, ListFilter,
    ListIdHints, Metadata, NotReadyReason, Placement, TaskId, TaskList, UpdateRequest,
};

use crate::cli::args::{ListArgs, ListLsArgs, ListOp, ListUpdateArgs, UnassignReason};
use crate::cli::error::{CliError, Result, exit};
use crate::cli::list_open::{Opener, session_list};
use crate::cli::list_text;
use crate::cli::printer::Printer;
use crate::cli::render;
use task_output::open::NoFollow;
use task_session::paths::SessionPaths;

/// Runs one `tasks list` operation.
pub fn execute(
    paths: &SessionPaths,
    args: ListArgs,
    printer: Printer,
    opener: Opener,
) -> Result<u8> {
    let list = open(paths, &args, opener)?;
    match args.op {
        ListOp::Create {
            subject,
            subject_flag,
            quiet,
            description,
            active_form,
            metadata,
            priority,
            labels,
            parent,
        } => {
            let request = CreateRequest {
                active_form,
                metadata: metadata_with(metadata.as_deref(), priority, &labels, parent)?,
                ..CreateRequest::new(subject.or(subject_flag).unwrap_or_default(), description)
            };
            let created = list.create(&request).map_err(list_error)?;
            let text = if quiet {
                created.task.id.to_string()
            } else {
                created.model_text()
            };
            print(printer, &created, &text, true)
        }
        ListOp::Ls(filters) => {
            let listing = list
                .list_where(&list_filter(filters)?)
                .map_err(list_error)?;
            // Priorities and labels are the queue's, not TaskList's: read beside the listing.
            let tasks = list.snapshot().map_err(list_error)?.tasks;
            let (value, text) = list_text::listing(&listing, &tasks);
            print(printer, &value, &text, true)
        }
        ListOp::Get { id } => get(&list, &id, printer),
        ListOp::Update(update) => {
            let result = list.update(&update_request(update)?).map_err(list_error)?;
            print(printer, &result, &result.model_text(), result.success)
        }
        ListOp::Delete { id } => {
            let result = list.delete(parse_id(&id)?).map_err(list_error)?;
            print(printer, &result, &result.model_text(), result.success)
        }
        ListOp::Claim {
            id,
            next,
            owner,
            check_busy,
            start,
        } => {
            let options = ClaimOptions {
                check_agent_busy: check_busy,
                start,
            };
            // clap refuses an id with --next, and requires one without.
            match id.filter(|_| !next) {
                Some(id) => claim(&list, &id, &owner, options, printer),
                None => claim_next(&list, &owner, options, printer),
            }
        }
        ListOp::Unassign { owner, reason } => {
            let reason = match reason {
                UnassignReason::Terminated => task_list::UnassignReason::Terminated,
                UnassignReason::Shutdown => task_list::UnassignReason::Shutdown,
            };
            let result = list.unassign(&owner, reason).map_err(list_error)?;
            // For a person: what changed (the lead's message stays in the JSON).
            let text = if result.unassigned_tasks.is_empty() {
                format!("{owner} had no unfinished task")
            } else {
                let lines: Vec<String> = result
                    .unassigned_tasks
                    .iter()
                    .map(|t| format!("#{} {}: back to pending, no owner", t.id, t.subject))
                    .collect();
                lines.join("\n")
            };
            print(printer, &result, &text, true)
        }
        ListOp::Ready => {
            let report = list.ready().map_err(list_error)?;
            let mut text: Vec<String> = report.ready.iter().map(list_text::ready_line).collect();
            if report.ready.is_empty() {
                text.push(task_list::NOTHING_READY.to_owned());
            }
            // A completed task is done, not "not ready".
            let open = report
                .not_ready
                .iter()
                .filter(|t| !t.reasons.contains(&NotReadyReason::Completed));
            text.extend(open.map(|t| {
                let reasons: Vec<String> = t.reasons.iter().map(not_ready).collect();
                format!(
                    "#{} not ready: {} ({})",
                    t.id,
                    t.subject,
                    reasons.join("; ")
                )
            }));
            text.extend(report.problems.iter().map(ToString::to_string));
            print(printer, &report, &text.join("\n"), true)
        }
        ListOp::Graph { dot } => {
            let graph = list.graph().map_err(list_error)?;
            let text = if dot {
                graph.to_dot(list.list_id())
            } else {
                graph.to_text()
            };
            let value = serde_json::json!({ "tasks": graph.tasks(), "edges": graph.edges() });
            print(printer, &value, &text, true)
        }
        ListOp::Doctor { fix } => {
            let report = list.doctor(fix).map_err(list_error)?;
            let text = list_text::doctor_report(&report);
            print(printer, &report, &text, report.is_clean() || report.fixed)
        }
        ListOp::Watch => watch(&list, printer),
        ListOp::Export { output } => export(&list, output.as_deref()),
        ListOp::Import { file } => {
            let imported = list.import(&read_export(&file)?).map_err(list_error)?;
            let text = format!("Imported {imported} task(s) into {}", list.list_id());
            print(
                printer,
                &serde_json::json!({ "imported": imported }),
                &text,
                true,
            )
        }
    }
}

/// `tasks list claim ID`.
fn claim(
    list: &TaskList,
    id: &str,
    owner: &str,
    options: ClaimOptions,
    printer: Printer,
) -> Result<u8> {
    let result = list
        .claim(parse_id(id)?, owner, options)
        .map_err(list_error)?;
    print(
        printer,
        &result,
        &result.claim_text(id, owner),
        result.success,
    )
}

/// `tasks list claim --next`: nothing ready is a result (`null`), not a failure.
fn claim_next(list: &TaskList, owner: &str, options: ClaimOptions, printer: Printer) -> Result<u8> {
    let result = list.claim_next(owner, options).map_err(list_error)?;
    let success = result.as_ref().is_none_or(|claimed| claimed.success);
    print(
        printer,
        &result,
        &ClaimResult::next_text(owner, result.as_ref()),
        success,
    )
}

fn export(list: &TaskList, output: Option<&Path>) -> Result<u8> {
    let document = list.export().map_err(list_error)?;
    let text = serde_json::to_string_pretty(&document)
        .map_err(|e| CliError::invalid(format!("export: {e}")))?;
    match output {
        None => render::out(&render::with_newline(&text))?,
        Some(path) => {
            let mut file = NoFollow::write()
                .create()
                .truncate()
                .open(path)
                .map_err(|e| CliError::io("create", path, e.into()))?;
            file.write_all(render::with_newline(&text).as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|e| CliError::io("write", path, e))?;
        }
    }
    Ok(exit::OK)
}

fn read_export(file: &Path) -> Result<ListExport> {
    let bytes = if file == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| CliError::io("read", "stdin", e))?;
        bytes
    } else {
        std::fs::read(file).map_err(|e| CliError::io("read", file, e))?
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| CliError::invalid(format!("{}: not a tasks list export: {e}", file.display())))
}

fn open(paths: &SessionPaths, args: &ListArgs, opener: Opener) -> Result<TaskList> {
    let mut env = EnvValues::from_env();
    env.tasks_root = Some(paths.root().to_string_lossy().into_owned());
    if let Some(root) = &args.lists_root {
        env.tasks_list_root = Some(root.to_string_lossy().into_owned());
    }
    let layout = if args.claude {
        Layout::Claude
    } else {
        Layout::Auto
    };
    let hints = ListIdHints {
        explicit: session_list(args.list.as_deref(), args.claude, paths),
        ..ListIdHints::default()
    };
    let id = task_list::resolve_list_id(&env, layout, hints).map_err(list_error)?;
    let list = opener(args.store.as_deref(), &env, layout, &id).map_err(list_error)?;
    Ok(match &args.actor {
        Some(actor) => list.with_actor(Actor::new(actor.clone())),
        None => list,
    })
}

/// `tasks list get`: the reference's fields, the owner, and the task's place in the tree (its
/// parent and children, when it has them), as text and JSON.
fn get(list: &TaskList, id: &str, printer: Printer) -> Result<u8> {
    let id = parse_id(id)?;
    let tree = list.get_in_tree(id).map_err(list_error)?;
    let found = tree.details();
    let Some(task) = &tree.task else {
        return print(printer, &found, "Task not found", false);
    };
    // The JSON is the reference's, with the owner and the tree added.
    let mut value = serde_json::to_value(&found)
        .map_err(|e| CliError::invalid(format!("cannot encode output: {e}")))?;
    value["task"]["owner"] = serde_json::json!(task.owner);
    tree.add_tree(&mut value);
    let text = format!(
        "{}\nOwner: {}{}",
        found.model_text(),
        task.owner.as_deref().unwrap_or("(none)"),
        tree.tree_text()
    );
    print(printer, &value, &text, true)
}

fn list_filter(args: ListLsArgs) -> Result<ListFilter> {
    Ok(ListFilter {
        status: args
            .status
            .map(|s| parse_status(s, "pending, in_progress or completed"))
            .transpose()?,
        owner: args.owner,
        labels: args.labels,
        priority: args.priority,
        ready: args.ready,
        blocked: args.blocked,
        parent: args.parent.as_deref().map(parse_id).transpose()?,
    })
}

/// A status word (`task_list::TaskStatus` or `task_list::UpdateStatus`); a wrong one is refused naming `choices`.
fn parse_status<T: serde::de::DeserializeOwned>(text: String, choices: &str) -> Result<T> {
    serde_json::from_value(serde_json::Value::String(text.clone()))
        .map_err(|_| CliError::invalid(format!("invalid status {text:?}: use {choices}")))
}

fn update_request(args: ListUpdateArgs) -> Result<UpdateRequest> {
    let status = args
        .status
        .map(|s| parse_status(s, "pending, in_progress, completed or deleted"))
        .transpose()?;
    let edges = |ids: Vec<String>| (!ids.is_empty()).then_some(ids);
    Ok(UpdateRequest {
        subject: args.subject,
        description: args.description,
        active_form: args.active_form,
        status,
        owner: args.owner,
        add_blocks: edges(args.add_blocks),
        add_blocked_by: edges(args.add_blocked_by),
        remove_blocks: edges(args.remove_blocks),
        remove_blocked_by: edges(args.remove_blocked_by),
        metadata: metadata_with(
            args.metadata.as_deref(),
            args.priority,
            &args.labels,
            args.parent,
        )?,
        place: match (args.before, args.after) {
            (Some(before), _) => Some(Placement::Before(parse_id(&before)?)),
            (None, Some(after)) => Some(Placement::After(parse_id(&after)?)),
            (None, None) => None,
        },
        ..UpdateRequest::new(parse_id(&args.id)?)
    })
}

fn watch(list: &TaskList, printer: Printer) -> Result<u8> {
    let mut watcher = list.watch().map_err(list_error)?;
    // A person sees the list as it is now, then again at every change; `--json` is a stream
    // of changes only.
    if !printer.is_json() {
        let listing = list.list().map_err(list_error)?;
        render::out(&format!("{}\n\n", listing.model_text()))?;
    }
    loop {
        // Without a timeout, no change means the filesystem watch itself has ended.
        let Some(change) = watcher.next_change(None).map_err(list_error)? else {
            return Err(CliError::List(format!(
                "the watch of list {} ended",
                list.list_id()
            )));
        };
        if printer.is_json() {
            printer.emit(&change, "")?;
        } else {
            let listing = list.list().map_err(list_error)?;
            render::out(&format!("{}\n\n", listing.model_text()))?;
        }
    }
}

/// Prints a list operation's result through `printer` (its text ends in a newline) and
/// returns the exit status: [`exit::OK`] on `success`, [`exit::OTHER`] when the list refused.
fn print(printer: Printer, value: &impl Serialize, text: &str, success: bool) -> Result<u8> {
    printer.emit_line(value, text)?;
    Ok(if success { exit::OK } else { exit::OTHER })
}

fn not_ready(reason: &NotReadyReason) -> String {
    let ids = task_list::hash_ids;
    match reason {
        NotReadyReason::Completed => "completed".to_owned(),
        NotReadyReason::InProgress => "in progress".to_owned(),
        NotReadyReason::Owned { owner } => format!("owned by {owner}"),
        NotReadyReason::BlockedBy { tasks } => format!("blocked by {}", ids(tasks)),
        NotReadyReason::MissingBlocker { task } => format!("blocker #{task} does not exist"),
        NotReadyReason::OpenChildren { tasks } => format!("open children {}", ids(tasks)),
        other => to_word(other),
    }
}

/// A compact one-line rendering of a serializable value (a reason, a problem).
fn to_word(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(e) => e.to_string(),
    }
}

/// A list task id as `tasks list` prints it (`#2`) or bare (`2`).
fn parse_id(text: &str) -> Result<TaskId> {
    TaskId::parse(text.strip_prefix('#').unwrap_or(text)).map_err(|_| CliError::MalformedListId {
        input: text.to_owned(),
    })
}

/// `--metadata JSON` with `--priority N`, the `--label`s and `--parent N` set in it (an empty
/// parent is `null`: the key is removed).
fn metadata_with(
    text: Option<&str>,
    priority: Option<u8>,
    labels: &[String],
    parent: Option<String>,
) -> Result<Option<Metadata>> {
    let mut metadata = text.map(parse_metadata).transpose()?;
    let mut set = |key: &str, value: serde_json::Value| {
        metadata
            .get_or_insert_with(Metadata::new)
            .insert(key.into(), value);
    };
    if let Some(priority) = priority {
        set(task_list::PRIORITY_KEY, priority.into());
    }
    if !labels.is_empty() {
        set(task_list::LABELS_KEY, labels.into());
    }
    match parent.as_deref() {
        None => {}
        Some("") => set(task_list::PARENT_KEY, serde_json::Value::Null),
        Some(id) => set(task_list::PARENT_KEY, parse_id(id)?.to_string().into()),
    }
    Ok(metadata)
}

fn parse_metadata(text: &str) -> Result<Metadata> {
    serde_json::from_str(text)
        .map_err(|e| CliError::invalid(format!("--metadata must be a JSON object: {e}")))
}

fn list_error(error: task_list::Error) -> CliError {
    match error {
        task_list::Error::Io { op, path, source } => CliError::io(op, path, source),
        task_list::Error::InvalidId(input) => CliError::MalformedListId { input },
        task_list::Error::Corrupt { path, message } => task_session::Error::CorruptState {
            path,
            reason: message,
        }
        .into(),
        task_list::Error::InvalidParent(message) => CliError::invalid(message),
        other => CliError::List(other.to_string()),
    }
}
