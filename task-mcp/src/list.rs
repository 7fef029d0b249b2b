//! `TaskCreate`, `TaskGet`, `TaskUpdate` and `TaskList` over the task-list store (SPEC §12):
//! the store does the work and renders the reference's texts; this module converts shapes.

use task_list::{
    ClaimOptions, ClaimResult, CreateRequest, Placement, TaskId, TaskList, UpdateRequest,
    UpdateStatus,
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

/// `TaskGet`: the reference's answer, then the task's parent and children when it has them
/// (`Parent: #1`, `Children: #3, #4`; `parent` and `children` in the structured task).
pub(crate) async fn get(
    list: &TaskList,
    input: TaskGetInput,
) -> std::result::Result<Reply, Failure> {
    let id = TaskId::parse(&input.task_id)?;
    let tree = on_list(list, move |list| list.get_in_tree(id)).await?;
    let found = tree.details();
    let mut shape = serde_json::to_value(&found)
        .map_err(|e| Failure::Tool(format!("internal error: cannot encode a result: {e}")))?;
    tree.add_tree(&mut shape);
    Reply::new(
        format!("{}{}", found.model_text(), tree.tree_text()),
        &shape,
    )
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
        // The reference's `TaskUpdate` schema has no way to remove an edge nor to move a task
        // before or after another (`TaskClaim` does both).
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
    if input.remove_blocked_by.is_some()
        || input.remove_blocks.is_some()
        || input.before.is_some()
        || input.after.is_some()
    {
        return edit(list, input).await;
    }
    let options = ClaimOptions {
        check_agent_busy: input.check_busy,
        ..ClaimOptions::default()
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

/// `TaskClaim {taskId, removeBlockedBy?, removeBlocks?, before? | after?}`: both ends of each
/// edge removed and the task moved in one transaction, audit-logged, as `tasks list update
/// --remove-blocked-by/--remove-blocks/--before/--after`; answered as `TaskUpdate` answers.
async fn edit(list: &TaskList, input: TaskClaimInput) -> std::result::Result<Reply, Failure> {
    let (Some(task_id), None, false) = (input.task_id, input.owner, input.next) else {
        return Err(Failure::Tool(
            "removeBlockedBy/removeBlocks/before/after take a taskId, and no owner or next".into(),
        ));
    };
    let anchor = |raw: String| TaskId::parse(raw.strip_prefix('#').unwrap_or(&raw));
    let place = match (input.before, input.after) {
        (Some(before), None) => Some(Placement::Before(anchor(before)?)),
        (None, Some(after)) => Some(Placement::After(anchor(after)?)),
        (None, None) => None,
        (Some(_), Some(_)) => {
            return Err(Failure::Tool(
                "TaskClaim takes before or after, not both".into(),
            ));
        }
    };
    let request = UpdateRequest {
        remove_blocked_by: input.remove_blocked_by,
        remove_blocks: input.remove_blocks,
        place,
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
