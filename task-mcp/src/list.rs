//! `TaskCreate`, `TaskGet`, `TaskUpdate` and `TaskList` over the task-list store (SPEC §12):
//! the store does the work and renders the reference's texts; this module converts shapes.

use task_list::{
    ClaimOptions, ClaimResult, CreateRequest, TaskId, TaskList, UpdateRequest, UpdateStatus,
};

use crate::context::{Failure, Reply, blocking};
use crate::error::McpError;

use crate::schema::{
    TaskClaimInput, TaskCreateInput, TaskGetInput, TaskUpdateInput, UpdateStatusInput,
};

/// Runs a blocking list operation; its error is a [`Failure`].
async fn on_list<T: Send + 'static>(
    list: &TaskList,
    operation: impl FnOnce(&TaskList) -> std::result::Result<T, task_list::Error> + Send + 'static,
) -> std::result::Result<T, Failure> {
    let list = list.clone();
    let outcome = blocking(move || Ok::<_, McpError>(operation(&list))).await?;
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
        // The reference's `TaskUpdate` schema has no way to remove an edge (`TaskClaim` does),
        // nor to move a task (metadata.position can be set).
        remove_blocks: None,
        remove_blocked_by: None,
        place: None,
    };
    let updated = on_list(list, move |list| list.update(&request)).await?;
    Reply::new(updated.model_text(), &updated)
}

/// `TaskClaim`: with an owner, `taskId` or `next: true` (exactly one); nothing ready answers
/// `{success: false}` with no reason. With `removeBlockedBy`/`removeBlocks` instead of an owner,
/// the dependencies of `taskId` are removed, answered as `TaskUpdate` answers.
pub(crate) async fn claim(
    list: &TaskList,
    input: TaskClaimInput,
) -> std::result::Result<Reply, Failure> {
    if input.remove_blocked_by.is_some() || input.remove_blocks.is_some() {
        return remove_edges(list, input).await;
    }
    let options = ClaimOptions {
        check_agent_busy: input.check_busy,
    };
    let Some(owner) = input.owner else {
        return Err(Failure::Tool(
            "TaskClaim takes an owner to claim (or removeBlockedBy/removeBlocks with taskId)"
                .into(),
        ));
    };
    match (input.task_id, input.next) {
        (Some(raw), false) => {
            let id = TaskId::parse(raw.strip_prefix('#').unwrap_or(&raw))?;
            let who = owner.clone();
            let result = on_list(list, move |list| list.claim(id, &who, options)).await?;
            Reply::new(result.claim_text(&raw, &owner), &result)
        }
        (None, true) => {
            let who = owner.clone();
            let result = on_list(list, move |list| list.claim_next(&who, options)).await?;
            let text = ClaimResult::next_text(&owner, result.as_ref());
            Reply::new(text, &result.unwrap_or_else(nothing_ready))
        }
        _ => Err(Failure::Tool(
            "TaskClaim takes either taskId or next: true".into(),
        )),
    }
}

/// `TaskClaim {taskId, removeBlockedBy?, removeBlocks?}`: both ends of each edge in one
/// transaction, audit-logged, as `tasks list update --remove-blocked-by/--remove-blocks`.
async fn remove_edges(
    list: &TaskList,
    input: TaskClaimInput,
) -> std::result::Result<Reply, Failure> {
    let (Some(task_id), None, false) = (input.task_id, input.owner, input.next) else {
        return Err(Failure::Tool(
            "removeBlockedBy/removeBlocks take a taskId, and no owner or next".into(),
        ));
    };
    let request = UpdateRequest {
        remove_blocked_by: input.remove_blocked_by,
        remove_blocks: input.remove_blocks,
        ..UpdateRequest::new(task_id)
    };
    let updated = on_list(list, move |list| list.update(&request)).await?;
    Reply::new(updated.model_text(), &updated)
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
