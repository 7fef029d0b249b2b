//! `TaskCreate`, `TaskGet`, `TaskUpdate` and `TaskList` over the task-list store (SPEC §12):
//! the store does the work and renders the reference's texts; this module converts shapes.

use task_list::{CreateRequest, TaskId, TaskList, UpdateRequest, UpdateStatus};

use super::context::{Failure, Reply, blocking};
use super::schema::{TaskCreateInput, TaskGetInput, TaskUpdateInput, UpdateStatusInput};

/// Runs a blocking list operation; its error is a [`Failure`].
async fn on_list<T: Send + 'static>(
    list: &TaskList,
    operation: impl FnOnce(&TaskList) -> Result<T, task_list::Error> + Send + 'static,
) -> Result<T, Failure> {
    let list = list.clone();
    let outcome = blocking(move || Ok(operation(&list))).await?;
    outcome.map_err(Failure::from)
}

/// `TaskCreate`.
pub(crate) async fn create(list: &TaskList, input: TaskCreateInput) -> Result<Reply, Failure> {
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
pub(crate) async fn get(list: &TaskList, input: TaskGetInput) -> Result<Reply, Failure> {
    let id = TaskId::parse(&input.task_id)?;
    let found = on_list(list, move |list| list.get_details(id)).await?;
    Reply::new(found.model_text(), &found)
}

/// `TaskUpdate`. A refused update (unknown task, a cycle) is a result with `success: false`,
/// as in the reference, not a failed call.
pub(crate) async fn update(list: &TaskList, input: TaskUpdateInput) -> Result<Reply, Failure> {
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
    };
    let updated = on_list(list, move |list| list.update(&request)).await?;
    Reply::new(updated.model_text(), &updated)
}

/// `TaskList`.
pub(crate) async fn list(list: &TaskList) -> Result<Reply, Failure> {
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
