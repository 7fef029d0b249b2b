//! Property tests of the token arithmetic (SPEC §7) and the activity cap.

use proptest::prelude::*;
use serde_json::json;
use task_agent::{AgentEvent, ProgressTracker, ToolUse, Usage as MessageUsage};
use task_core::RECENT_ACTIVITIES_CAP;

fn usage() -> impl Strategy<Value = MessageUsage> {
    (0u64..1 << 40, 0u64..1 << 30, 0u64..1 << 30, 0u64..1 << 30).prop_map(|(i, cc, cr, o)| {
        MessageUsage {
            input_tokens: i,
            cache_creation_input_tokens: cc,
            cache_read_input_tokens: cr,
            output_tokens: o,
        }
    })
}

proptest! {
    #[test]
    fn tokens_are_latest_input_with_cache_plus_every_output(usages in prop::collection::vec(usage(), 1..60)) {
        let mut tracker = ProgressTracker::default();
        for u in &usages {
            tracker.apply(&AgentEvent::Usage(*u));
        }
        let last = usages.last().copied().unwrap_or_default();
        let latest = last.input_tokens + last.cache_creation_input_tokens + last.cache_read_input_tokens;
        let outputs: u64 = usages.iter().map(|u| u.output_tokens).sum();
        let p = tracker.progress();
        prop_assert_eq!(p.latest_input_tokens, latest);
        prop_assert_eq!(p.cumulative_output_tokens, outputs);
        prop_assert_eq!(p.token_count, latest + outputs);
    }

    #[test]
    fn earlier_inputs_never_count_twice(first in usage(), rest in prop::collection::vec(usage(), 0..20)) {
        // Replacing every earlier message's input changes nothing: only the latest counts.
        let mut a = ProgressTracker::default();
        let mut b = ProgressTracker::default();
        a.apply(&AgentEvent::Usage(first));
        b.apply(&AgentEvent::Usage(MessageUsage { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, ..first }));
        for u in &rest {
            a.apply(&AgentEvent::Usage(*u));
            b.apply(&AgentEvent::Usage(*u));
        }
        if !rest.is_empty() {
            prop_assert_eq!(a.progress().token_count, b.progress().token_count);
        }
    }

    #[test]
    fn tool_uses_are_all_counted_and_the_last_five_kept_in_order(n in 0usize..40) {
        let mut tracker = ProgressTracker::default();
        for i in 0..n {
            let tool = ToolUse { id: format!("t{i}"), name: "Read".into(), input: json!({"file_path": format!("/f{i}")}) };
            tracker.apply(&AgentEvent::ToolStarted(tool));
        }
        let p = tracker.progress();
        prop_assert_eq!(p.tool_use_count, n as u64);
        let kept: Vec<String> = p.recent_activities.iter().map(|a| a.activity_description.clone().unwrap_or_default()).collect();
        let expected: Vec<String> = (n.saturating_sub(RECENT_ACTIVITIES_CAP)..n).map(|i| format!("Reading /f{i}")).collect();
        prop_assert_eq!(kept, expected);
    }
}
