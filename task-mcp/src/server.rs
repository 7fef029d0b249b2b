//! The MCP server: the tool router, and the handler that adds notifications to tool results,
//! serves task outputs as resources and starts the push watcher.
#![allow(deprecated)] // logging and resources/subscribe: see the `notify` module

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::handler::server::tool::{ToolCallContext, ToolRouter};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, RequestId, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_router};

use crate::client::{self, Forwarding};
use crate::context::{Context, into_response};
use crate::notify::{self, Interest, Outlet, WatchSettings};
use crate::schema::{
    AgentInput, BashInput, BashOutput, MonitorInput, MonitorOutput, SendMessageInput,
    TaskClaimInput, TaskCreateInput, TaskGetInput, TaskListInput, TaskOutputInput,
    TaskOutputResult, TaskStopInput, TaskStopOutput, TaskUpdateInput,
};
use crate::{McpOptions, agent, list, resources, shell};
use task_list::TaskList;
use task_session::session::Session;

const INSTRUCTIONS: &str = "Background tasks and task lists. Start commands with Bash \
(run_in_background for long ones), read them with TaskOutput, stop them with TaskStop. \
When a background task ends, stalls on a prompt, or a Monitor emits, a <task-notification> \
is appended to the result of your next tool call (and announced as a notifications/message \
log message). Task outputs are resources at tasks://{id}/output.";

/// The MCP server: [`TasksServer::new`], then [`serve`](crate::serve) it.
#[derive(Debug, Clone)]
pub struct TasksServer {
    context: Arc<Context>,
    interest: Arc<Interest>,
    watch: WatchSettings,
    watching: Arc<AtomicBool>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl TasksServer {
    /// A server over `session` and `list`, delivering and running as `options` say.
    pub fn new(session: Session, list: TaskList, options: McpOptions) -> Self {
        let McpOptions {
            delivery,
            watch,
            settings,
        } = options;
        let context = Context::new(session, list, delivery, settings);
        let mut tool_router = Self::tool_router();
        let config = &context.settings;
        if let Err(why) = &config.agent
            && config.remote.is_none()
        {
            tracing::debug!("no Agent tool: {why}");
            tool_router.remove_route("Agent");
            tool_router.remove_route("Workflow");
        }
        Self {
            context,
            interest: Arc::default(),
            watch,
            watching: Arc::default(),
            tool_router,
        }
    }

    /// Launches an agent (the agent CLI configured in TASKS_AGENT_COMMAND) to work on the prompt.
    /// In the foreground its final result is the answer; with run_in_background it works on its
    /// own and a notification follows when it stops. SendMessage continues it.
    #[tool(name = "Agent")]
    async fn agent(
        &self,
        Parameters(input): Parameters<AgentInput>,
    ) -> Result<CallToolResult, ErrorData> {
        into_response(agent::agent(&self.context, input).await)
    }

    /// Executes a workflow script that orchestrates multiple subagents deterministically, in the
    /// background: agent(prompt, opts) spawns a sub-agent (null if it dies; opts.schema gives a
    /// validated object), parallel(thunks) is a barrier, pipeline(items, ...stages) has none,
    /// phase(title), log(msg), args, budget, workflow(nameOrRef, args) one level deep. The
    /// script begins with a pure-literal `export const meta = {name, description, phases?}`.
    /// Date.now(), Math.random() and argless new Date() throw (resume depends on it); no
    /// filesystem or process access. At most min(16, cores - 2) agents run at once, 1000 per
    /// run, 4096 items per parallel/pipeline call. resumeFromRunId answers unchanged agent()
    /// calls from that run's journal. A task-notification arrives when it completes.
    #[tool(name = "Workflow")]
    async fn workflow(
        &self,
        Parameters(input): Parameters<crate::workflow::WorkflowInput>,
    ) -> Result<CallToolResult, ErrorData> {
        into_response(crate::workflow::workflow(&self.context, input).await)
    }

    /// Sends a message to an agent by name or id: queued for its next turn while it works; an
    /// agent that stopped is resumed with it (same id, and it notifies again).
    #[tool(name = "SendMessage")]
    async fn send_message(
        &self,
        Parameters(input): Parameters<SendMessageInput>,
    ) -> Result<CallToolResult, ErrorData> {
        into_response(agent::send_message(&self.context, input).await)
    }

    /// Runs a shell command. In the foreground the output (at most BASH_MAX_OUTPUT_LENGTH
    /// characters, default 30000, the end kept) is the result; with run_in_background the
    /// task id is, and a notification follows when the command ends.
    #[tool(name = "Bash", output_schema = rmcp::handler::server::tool::schema_for_output::<BashOutput>())]
    async fn bash(
        &self,
        Parameters(input): Parameters<BashInput>,
    ) -> Result<CallToolResult, ErrorData> {
        into_response(shell::bash(&self.context, input).await)
    }

    /// Retrieves the output of a background task. Waits for it to end when block is true (up
    /// to timeout ms); retrieval_status is success, timeout or not_ready.
    #[tool(name = "TaskOutput", output_schema = rmcp::handler::server::tool::schema_for_output::<TaskOutputResult>())]
    async fn task_output(
        &self,
        Parameters(input): Parameters<TaskOutputInput>,
    ) -> Result<CallToolResult, ErrorData> {
        into_response(shell::task_output(&self.context, input).await)
    }

    /// Stops a running background task and its whole process tree.
    #[tool(name = "TaskStop", output_schema = rmcp::handler::server::tool::schema_for_output::<TaskStopOutput>())]
    async fn task_stop(
        &self,
        Parameters(input): Parameters<TaskStopInput>,
    ) -> Result<CallToolResult, ErrorData> {
        into_response(shell::task_stop(&self.context, input).await)
    }

    /// Starts a background watch: every line the command prints on stdout, or every message the
    /// WebSocket (ws) sends, is delivered as an event notification, until the command exits or
    /// the socket closes, the timeout passes, or TaskStop.
    #[tool(name = "Monitor", output_schema = rmcp::handler::server::tool::schema_for_output::<MonitorOutput>())]
    async fn monitor(
        &self,
        Parameters(input): Parameters<MonitorInput>,
    ) -> Result<CallToolResult, ErrorData> {
        into_response(shell::monitor(&self.context, input).await)
    }

    /// Creates a task in the task list.
    #[tool(name = "TaskCreate")]
    async fn task_create(
        &self,
        Parameters(input): Parameters<TaskCreateInput>,
    ) -> Result<CallToolResult, ErrorData> {
        into_response(list::create(&self.context.list, input).await)
    }

    /// Retrieves a task from the task list by its ID.
    #[tool(name = "TaskGet")]
    async fn task_get(
        &self,
        Parameters(input): Parameters<TaskGetInput>,
    ) -> Result<CallToolResult, ErrorData> {
        into_response(list::get(&self.context.list, input).await)
    }

    /// Updates a task in the task list: fields, status (deleted removes it), owner,
    /// dependencies (addBlocks, addBlockedBy) and metadata.
    #[tool(name = "TaskUpdate")]
    async fn task_update(
        &self,
        Parameters(input): Parameters<TaskUpdateInput>,
    ) -> Result<CallToolResult, ErrorData> {
        into_response(list::update(&self.context.list, input).await)
    }

    /// Claims a task of the task list for an owner, atomically: the task taskId, or with
    /// next: true the best ready task (highest priority, then position, then lowest ID; a
    /// parent waits for its children). Nothing ready is not an error: the result says so, with
    /// success false and no reason. Without an owner, removeBlockedBy/removeBlocks remove
    /// dependencies of taskId instead (TaskUpdate can only add them), and before/after move
    /// taskId just before or after another task in the queue order.
    #[tool(name = "TaskClaim")]
    async fn task_claim(
        &self,
        Parameters(input): Parameters<TaskClaimInput>,
    ) -> Result<CallToolResult, ErrorData> {
        into_response(list::claim(&self.context.list, input).await)
    }

    /// Lists all tasks in the task list.
    #[tool(name = "TaskList")]
    async fn task_list(
        &self,
        Parameters(_input): Parameters<TaskListInput>,
    ) -> Result<CallToolResult, ErrorData> {
        into_response(list::list(&self.context.list).await)
    }
}

impl TasksServer {
    /// What holds the notifications of the results this server answers with, until the
    /// transport has written them.
    pub(crate) fn outbox(&self) -> Arc<crate::outbox::Outbox> {
        Arc::clone(&self.context.outbox)
    }

    /// Adds every pending notification to a finished call's result, in the part of it that
    /// `forwarding` shows the model; they are marked delivered once the answer to `request`
    /// is written out. A result whose forwarded part cannot carry them claims none.
    async fn with_notifications(
        &self,
        response: CallToolResponse,
        request: RequestId,
        forwarding: Forwarding,
    ) -> CallToolResponse {
        let CallToolResponse::Complete(mut result) = response else {
            return response;
        };
        let placement = forwarding.placement(&result);
        if placement.reaches_model()
            && let Some(leased) = notify::lease_for_result(&self.context).await
        {
            let texts: Vec<String> = leased.notices().map(notify::for_model).collect();
            client::attach(&mut result, placement, &texts);
            self.context.outbox.hold(request, leased);
        }
        CallToolResponse::Complete(result)
    }

    fn unknown_tool(&self, name: &str) -> ErrorData {
        let known: Vec<String> = self
            .tool_router
            .list_all()
            .into_iter()
            .map(|tool| tool.name.to_string())
            .collect();
        ErrorData::invalid_params(
            format!(
                "unknown tool {name:?}; this server has: {}",
                known.join(", ")
            ),
            None,
        )
    }
}

impl ServerHandler for TasksServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tools()
            .build();
        // Claude Code listens for channel events only from a server that says it sends them.
        capabilities.experimental = Some(
            [(notify::CHANNEL_CAPABILITY.to_owned(), JsonObject::new())]
                .into_iter()
                .collect(),
        );
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("tasks", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    /// Every protocol version rmcp speaks; when pushes deliver (`--deliver push|channel`), only
    /// the session ones: 2026-07-28 has no unsolicited logging message, and Claude Code takes
    /// channel events on no connection of it.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        if self.context.delivery.pushes() {
            Cow::Borrowed(ProtocolVersion::known_up_to(
                &ProtocolVersion::LATEST_WITH_INITIALIZE,
            ))
        } else {
            Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.tool_router.has_route(&request.name) {
            return Err(self.unknown_tool(&request.name));
        }
        let id = context.id.clone();
        let forwarding = Forwarding::of(context.client_info().as_ref());
        let response = self
            .tool_router
            .call(ToolCallContext::new(self, request, context))
            .await?;
        Ok(self.with_notifications(response, id, forwarding).await)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, ErrorData> {
        Ok(rmcp::model::ListToolsResult::with_all_items(
            self.tool_router.list_all(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.tool_router.get(name).cloned()
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if !self.watching.swap(true, Ordering::SeqCst) {
            tokio::spawn(notify::watch(
                Arc::clone(&self.context),
                Arc::clone(&self.interest),
                Outlet::Session(context.peer),
                self.watch,
            ));
        }
    }

    /// A 2026-07-28 subscription: resource list changes, and the updates of the subscribed
    /// `tasks://{id}/output` resources (others are not accepted).
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = requested.supported_by(&self.get_info().capabilities);
        if let Some(uris) = accepted.resource_subscriptions.as_mut() {
            uris.retain(|uri| resources::parse_uri(uri).is_ok());
        }
        Some(accepted)
    }

    /// Pushes what the subscription accepted until the client cancels it or goes.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let interest = Arc::new(Interest::default());
        let uris = context.accepted().resource_subscriptions.iter().flatten();
        for id in uris.filter_map(|uri| resources::parse_uri(uri).ok()) {
            interest.subscribe(id);
        }
        let outlet = Outlet::Subscription(context.sink().clone());
        let watching = notify::watch(Arc::clone(&self.context), interest, outlet, self.watch);
        tokio::select! {
            () = watching => {}
            () = context.cancelled() => {}
        }
        Ok(())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.interest.set_level(request.level);
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        resources::list(&self.context).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        resources::read(&self.context, &request.uri)
            .await
            .map(Into::into)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.interest.subscribe(resources::parse_uri(&request.uri)?);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.interest
            .unsubscribe(&resources::parse_uri(&request.uri)?);
        Ok(())
    }
}
