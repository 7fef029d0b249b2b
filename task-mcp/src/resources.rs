//! Task outputs as MCP resources: `tasks://{id}/output`, plain text, the last 8 MiB at most
//! (with the `[{N}KB of earlier output omitted]` marker when cut).

use rmcp::ErrorData;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use task_protocol::TaskId;

use crate::error::McpError;
use task_session::session::Session;

use crate::context::{Context, blocking};

const SCHEME: &str = "tasks://";
const SUFFIX: &str = "/output";
const MIME: &str = "text/plain";

/// The URI of a task's output.
pub(crate) fn output_uri(id: &TaskId) -> String {
    format!("{SCHEME}{id}{SUFFIX}")
}

/// The task a URI names; a URI of another form, or with a malformed id, is an invalid-params
/// error that says which form is expected.
pub(crate) fn parse_uri(uri: &str) -> Result<TaskId, ErrorData> {
    let id = uri
        .strip_prefix(SCHEME)
        .and_then(|rest| rest.strip_suffix(SUFFIX))
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!("unknown resource {uri:?}: task outputs are tasks://{{id}}/output"),
                None,
            )
        })?;
    Session::parse_id(id).map_err(|e| ErrorData::invalid_params(e.to_string(), None))
}

/// `resources/list`: the output of every task of the session.
pub(crate) async fn list(context: &Context) -> Result<ListResourcesResult, ErrorData> {
    let session = context.session.clone();
    let resources = blocking(move || {
        let listing = session.tasks()?;
        let positions = task_session::queue::positions(&listing.tasks);
        Ok::<_, McpError>(
            listing
                .tasks
                .iter()
                .map(|task| {
                    let id = task.id();
                    let base = &task.task.base;
                    let size = std::fs::metadata(session.output_path(&id)).map_or(0, |m| m.len());
                    let status = match (positions.get(&id), &task.queue) {
                        (Some(position), Some(queue)) => {
                            format!("queued #{position} in {}", queue.group)
                        }
                        _ => base.status.as_str().to_owned(),
                    };
                    Resource::new(output_uri(&id), format!("{id} output"))
                        .with_description(format!(
                            "{} ({}, {status})",
                            base.description,
                            base.task_type.as_str(),
                        ))
                        .with_mime_type(MIME)
                        .with_size(size)
                })
                .collect(),
        )
    })
    .await
    .map_err(internal)?;
    Ok(ListResourcesResult::with_all_items(resources))
}

/// `resources/templates/list`: the one URI template.
pub(crate) fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(format!("{SCHEME}{{id}}{SUFFIX}"), "task output")
            .with_description("The output of a background task of this session")
            .with_mime_type(MIME),
    ])
}

/// `resources/read`.
pub(crate) async fn read(context: &Context, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let id = parse_uri(uri)?;
    let session = context.session.clone();
    let text = blocking(move || session.task(&id).and_then(|_| session.output_tail(&id)))
        .await
        .map_err(|error| match error {
            McpError::Session(task_session::Error::UnknownTask { .. }) => {
                ErrorData::resource_not_found(error.to_string(), None)
            }
            other => internal(other),
        })?;
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type(MIME),
    ]))
}

fn internal(error: McpError) -> ErrorData {
    ErrorData::internal_error(error.to_string(), None)
}
