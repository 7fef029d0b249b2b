//! `TaskCreate`, `TaskGet`, `TaskUpdate` and `TaskList` over the task-list store (SPEC §12):
//! the store does the work and renders the reference's texts; this module converts shapes.

use task_list::{
    Actor, ClaimOptions, ClaimResult, CreateRequest, EnvValues, Layout, ListIdHints, TaskId,
    TaskList, UpdateRequest, UpdateStatus,
};

use super::McpArgs;
use super::context::{Failure, Reply, blocking};
use crate::error::{CliError, Result};
use task_session::session::Session;

/// The list the `Task*` list tools use: resolved as `tasks list` resolves it, in the store
/// `--store` / `$TASKS_LIST_STORE` names (files by default).
pub(crate) fn open_list(session: &Session, args: &McpArgs) -> Result<TaskList> {
    let list_error = |e: task_list::Error| CliError::List(e.to_string());
    let mut env = EnvValues::from_env();
    env.tasks_root = Some(session.paths().root().to_string_lossy().into_owned());
    env.tasks_list_root = args
        .lists_root
        .as_ref()
        .map(|root| root.to_string_lossy().into_owned());
    let layout = if args.claude {
        Layout::Claude
    } else {
        Layout::Auto
    };
    let hints = ListIdHints {
        explicit: crate::list_cmd::session_list(args.list.as_deref(), args.claude, session.paths()),
        ..ListIdHints::default()
    };
    let id = task_list::resolve_list_id(&env, layout, hints).map_err(list_error)?;
    Ok(
        crate::list_cmd::open_in(args.store.as_deref(), &env, layout, &id)
            .map_err(list_error)?
            .with_actor(Actor::new(args.actor.clone())),
    )
}
use super::schema::{
    TaskClaimInput, TaskCreateInput, TaskGetInput, TaskUpdateInput, UpdateStatusInput,
};
use crate::list_cmd::{claim_next_text, claim_text};

/// Runs a blocking list operation; its error is a [`Failure`].
async fn on_list<T: Send + 'static>(
    list: &TaskList,
    operation: impl FnOnce(&TaskList) -> std::result::Result<T, task_list::Error> + Send + 'static,
) -> std::result::Result<T, Failure> {
    let list = list.clone();
    let outcome = blocking(move || Ok::<_, CliError>(operation(&list))).await?;
    outcome.map_err(Failure::from)
}

/// `TaskCreate`.
pub(crate) async fn create(
    list: &TaskList,
    input: TaskCreateInput,
) -> std::result::Result<Reply, Failure> {
    let request = CreateRequest {
        subject: input.subject,
        description: input.description,
        active_form: input.active_form,
        metadata: input.metadata,
    };
    let created = on_list(list, move |list| list.create(&request)).await?;
    Reply::new(created.model_text(), &created)
}

/// `TaskGet`.
pub(crate) async fn get(
    list: &TaskList,
    input: TaskGetInput,
) -> std::result::Result<Reply, Failure> {
    let id = TaskId::parse(&input.task_id)?;
    let found = on_list(list, move |list| list.get_details(id)).await?;
    Reply::new(found.model_text(), &found)
}

/// `TaskUpdate`. A refused update (unknown task, a cycle) is a result with `success: false`,
/// as in the reference, not a failed call.
pub(crate) async fn update(
    list: &TaskList,
    input: TaskUpdateInput,
) -> std::result::Result<Reply, Failure> {
    let request = UpdateRequest {
        task_id: input.task_id,
        subject: input.subject,
        description: input.description,
        active_form: input.active_form,
        status: input.status.map(status),
        add_blocks: input.add_blocks,
        add_blocked_by: input.add_blocked_by,
        owner: input.owner,
        metadata: input.metadata,
        // The reference's `TaskUpdate` schema has no way to remove an edge.
        remove_blocks: None,
        remove_blocked_by: None,
    };
    let updated = on_list(list, move |list| list.update(&request)).await?;
    Reply::new(updated.model_text(), &updated)
}

/// `TaskClaim`: `taskId`, or `next: true` (exactly one). Nothing ready answers
/// `{success: false}` with no reason.
pub(crate) async fn claim(
    list: &TaskList,
    input: TaskClaimInput,
) -> std::result::Result<Reply, Failure> {
    let options = ClaimOptions {
        check_agent_busy: input.check_busy,
    };
    let owner = input.owner;
    match (input.task_id, input.next) {
        (Some(raw), false) => {
            let id = TaskId::parse(raw.strip_prefix('#').unwrap_or(&raw))?;
            let who = owner.clone();
            let result = on_list(list, move |list| list.claim(id, &who, options)).await?;
            Reply::new(claim_text(&raw, &owner, &result), &result)
        }
        (None, true) => {
            let who = owner.clone();
            let result = on_list(list, move |list| list.claim_next(&who, options)).await?;
            let text = claim_next_text(&owner, result.as_ref());
            Reply::new(text, &result.unwrap_or_else(nothing_ready))
        }
        _ => Err(Failure::Tool(
            "TaskClaim takes either taskId or next: true".into(),
        )),
    }
}

/// The answer of a `claim_next` that found nothing ready.
fn nothing_ready() -> ClaimResult {
    ClaimResult {
        success: false,
        reason: None,
        task: None,
        busy_with_tasks: Vec::new(),
        blocked_by_tasks: Vec::new(),
    }
}

/// `TaskList`.
pub(crate) async fn list(list: &TaskList) -> std::result::Result<Reply, Failure> {
    let listed = on_list(list, TaskList::list).await?;
    Reply::new(listed.model_text(), &listed)
}

fn status(input: UpdateStatusInput) -> UpdateStatus {
    match input {
        UpdateStatusInput::Pending => UpdateStatus::Pending,
        UpdateStatusInput::InProgress => UpdateStatus::InProgress,
        UpdateStatusInput::Completed => UpdateStatus::Completed,
        UpdateStatusInput::Deleted => UpdateStatus::Deleted,
    }
}
