//! Budgets: an agent run stops once it has used its tokens, turns or time
//! ([`AgentBudget`], from `tasks agent --max-tokens N --max-turns N --timeout DUR`), or once
//! the agents of the session together have used the session's tokens
//! ([`AgentConfig::session_token_budget`](crate::AgentConfig::session_token_budget)).
//!
//! Tokens are counted as the agent's progress counts them (task-core's
//! [`AgentProgress::record_usage`](task_core::AgentProgress::record_usage): the latest
//! message's input with cache, plus every message's output); a turn is one model response (one
//! assistant message with its usage). The session's count is the sum of every run's count, the
//! runs that ended included. The run that reaches a budget is interrupted, then killed after
//! the kill grace, and ends `failed` with [`EndReason::BudgetExceeded`] naming the budget.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use task_core::{AgentBudget, BudgetLimit, EndReason, TaskId};

/// The session's token budget, shared by every agent run of one executor.
#[derive(Debug, Default)]
pub struct SessionTokens {
    limit: Option<u64>,
    /// The token count of each run (agent, run number), while there is a limit.
    used: Mutex<HashMap<(TaskId, u64), u64>>,
}

impl SessionTokens {
    /// A budget of `limit` tokens (none: unlimited, nothing counted).
    pub fn new(limit: Option<u64>) -> Self {
        Self {
            limit,
            used: Mutex::default(),
        }
    }

    /// Notes that run `run` of `id` has used `tokens` so far; the session's total and limit
    /// when the total has reached the limit.
    fn charge(&self, id: TaskId, run: u64, tokens: u64) -> Option<(u64, u64)> {
        let limit = self.limit?;
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        used.insert((id, run), tokens);
        let total = used.values().fold(0u64, |sum, n| sum.saturating_add(*n));
        (total >= limit).then_some((total, limit))
    }
}

/// The budgets of one run.
#[derive(Debug)]
pub struct RunBudget {
    limits: AgentBudget,
    session: Arc<SessionTokens>,
    started: Instant,
}

impl RunBudget {
    /// The budgets `limits` (none: only the session's) of a run started at `started`.
    pub fn new(limits: Option<AgentBudget>, session: Arc<SessionTokens>, started: Instant) -> Self {
        Self {
            limits: limits.unwrap_or_default(),
            session,
            started,
        }
    }

    /// When the run's time is up, if it has a time budget.
    pub fn deadline(&self) -> Option<Instant> {
        let limit = Duration::from_millis(self.limits.timeout_ms?);
        self.started.checked_add(limit)
    }

    /// The end of a run whose time is up.
    pub fn timed_out(&self) -> EndReason {
        let max = self.limits.timeout_ms.unwrap_or_default();
        let used = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        EndReason::BudgetExceeded {
            limit: BudgetLimit::Time,
            used: used.max(max),
            max,
        }
    }

    /// The end of a run that has used `tokens` and `turns`, if that reaches one of its budgets
    /// (its own first, then the session's).
    pub fn check(&self, id: TaskId, run: u64, tokens: u64, turns: u64) -> Option<EndReason> {
        let own = [
            (BudgetLimit::Tokens, tokens, self.limits.max_tokens),
            (BudgetLimit::Turns, turns, self.limits.max_turns),
        ];
        let reached = own.into_iter().find_map(|(limit, used, max)| {
            let max = max?;
            (used >= max).then_some(EndReason::BudgetExceeded { limit, used, max })
        });
        reached.or_else(|| {
            let (used, max) = self.session.charge(id, run, tokens)?;
            Some(EndReason::BudgetExceeded {
                limit: BudgetLimit::SessionTokens,
                used,
                max,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_first_budget_reached_ends_the_run_and_the_session_counts_every_run() {
        let session = Arc::new(SessionTokens::new(Some(1_000)));
        let limits = AgentBudget {
            max_tokens: Some(500),
            max_turns: Some(3),
            ..AgentBudget::default()
        };
        let one = RunBudget::new(Some(limits), Arc::clone(&session), Instant::now());
        let a = TaskId::parse("a12345678").unwrap();
        let b = TaskId::parse("a87654321").unwrap();
        assert_eq!(one.check(a, 1, 100, 1), None);
        let tokens = one.check(a, 1, 500, 1).unwrap();
        assert_eq!(tokens.short(), "budget: tokens 500 of 500");
        assert_eq!(
            one.check(a, 1, 100, 3).unwrap().short(),
            "budget: turns 3 of 3"
        );
        let other = RunBudget::new(None, Arc::clone(&session), Instant::now());
        assert_eq!(one.check(a, 1, 400, 1), None);
        assert_eq!(other.check(b, 1, 500, 9), None);
        let crossed = other.check(b, 1, 600, 9).unwrap();
        assert_eq!(crossed.short(), "budget: session tokens 1000 of 1000");
        assert_eq!(other.deadline(), None);
        let unlimited = RunBudget::new(None, Arc::new(SessionTokens::default()), Instant::now());
        assert_eq!(unlimited.check(a, 2, u64::MAX, u64::MAX), None);
    }
}
