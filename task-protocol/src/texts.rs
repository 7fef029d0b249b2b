//! What a front end tells its model when a task it started runs in the background: the
//! reference's words (`fixtures/reference/model-facing/observed.md`), handed back verbatim by
//! every front end (the MCP tools; the executors re-export them under their old names).

use std::path::Path;

use crate::TaskId;

/// The result of a background `Agent` call.
pub fn agent_launch(id: &TaskId, output_file: &Path) -> String {
    format!(
        "Async agent launched successfully.\n\
agentId: {id} (internal ID - do not mention to user. Use SendMessage with to: '{id}', summary: '<5-10 word recap>' to continue this agent.)\n\
The agent is working in the background. You will be notified automatically when it completes.\n\
Do not duplicate this agent's work — avoid working with the same files or topics it is using.\n\
output_file: {}\n\
Do NOT Read or tail this file via the shell tool — it is the full subagent JSONL transcript and reading it will overflow your context. If the user asks for progress, say the agent is still running; you'll get a completion notification.",
        output_file.display()
    )
}

/// The result of a `Workflow` call: task id, summary, transcript directory, script file, run id and how to
/// resume. The last line points at `tasks workflow show` where the reference names its panel.
pub fn workflow_launch(
    task_id: &str,
    description: &str,
    run_dir: &Path,
    script_path: &Path,
    run_id: &str,
) -> String {
    let script = script_path.display();
    format!(
        "Workflow launched in background. Task ID: {task_id}\n\
         Summary: {description}\n\
         Transcript dir: {}\n\
         Script file: {script}\n\
         (Edit this file with Write/Edit and re-invoke Workflow with {{scriptPath: \"{script}\"}} to iterate without resending the script.)\n\
         Run ID: {run_id}\n\
         To resume after editing the script: Workflow({{scriptPath: \"{script}\", resumeFromRunId: \"{run_id}\"}}) — completed agents return cached results.\n\
         \n\
         You will be notified when it completes. Run `tasks workflow show {run_id}` to see its progress.",
        run_dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_like_the_reference() {
        let text = workflow_launch(
            "w765vv7by",
            "Count things in two places",
            Path::new("/s/workflows/wf_765vv7by"),
            Path::new("/s/workflows/scripts/count-things-wf_765vv7by.js"),
            "wf_765vv7by",
        );
        let observed = "Workflow launched in background. Task ID: w765vv7by\nSummary: Count things in two places\nTranscript dir: /s/workflows/wf_765vv7by\nScript file: /s/workflows/scripts/count-things-wf_765vv7by.js\n(Edit this file with Write/Edit and re-invoke Workflow with {scriptPath: \"/s/workflows/scripts/count-things-wf_765vv7by.js\"} to iterate without resending the script.)\nRun ID: wf_765vv7by\nTo resume after editing the script: Workflow({scriptPath: \"/s/workflows/scripts/count-things-wf_765vv7by.js\", resumeFromRunId: \"wf_765vv7by\"}) — completed agents return cached results.\n\n";
        assert!(text.starts_with(observed), "{text}");
    }
}
