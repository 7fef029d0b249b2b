//! Running totals a CLI reports, turned into the usage since its previous report.
//!
//! Codex's `turn.completed.usage` and Gemini's `result.stats` are not one model request's
//! usage: they are sums over every request so far (Codex: the whole thread, across `codex exec
//! resume`; Gemini: the whole run, its model router included). Feeding them to
//! task-core's `AgentProgress::record_usage` as if they were one
//! message's would count every earlier request's input again. The difference between two
//! reports is the usage of the requests made between them: that is what is recorded.
//!
//! Both CLIs also keep their own record of a session, which itemises every request's usage
//! (Codex's rollout file, Gemini's chat file: [`crate::session_file`]). Fed those records,
//! a parser counts each request as one message, exactly as SPEC §7 asks ([`Ledger`]).

use crate::event::Usage;

/// The totals of the previous report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    input: u64,
    output: u64,
}

impl Totals {
    /// The usage since the previous report, given the new totals; `None` when nothing was used
    /// (a repeated report). Totals that went back (a counter the CLI restarted) count whole.
    pub(crate) fn since(&mut self, input: u64, output: u64) -> Option<Usage> {
        let (input_delta, output_delta) = if input < self.input || output < self.output {
            tracing::debug!(
                previous_input = self.input,
                previous_output = self.output,
                input,
                output,
                "usage totals went back: counted from zero"
            );
            (input, output)
        } else {
            (input - self.input, output - self.output)
        };
        self.input = input;
        self.output = output;
        (input_delta > 0 || output_delta > 0).then(|| Usage {
            input_tokens: input_delta,
            output_tokens: output_delta,
            ..Usage::default()
        })
    }
}

impl Totals {
    /// Whether these totals are past `other`: none went back and one grew.
    fn is_past(&self, other: &Totals) -> bool {
        self.input >= other.input && self.output >= other.output && self != other
    }
}

/// A stream's running totals reconciled with the per-request records of the CLI's session
/// file ([`LineParser::parse_session_line`](super::LineParser::parse_session_line)).
///
/// A record says what one request used: its input (the latest input, SPEC §7) and, with the
/// running totals after it, every output so far. A record counts once: one whose totals are
/// not past what was counted (a record read again, or one a report already covered) adds
/// nothing. Once a record was seen, a report of totals in the stream adds only what the
/// records did not cover, as one message that keeps the latest input unless it had more:
/// requests the session file does not record (Gemini's model router) add their output, and a
/// last request whose record was not written yet (Codex writes its rollout from a task of its
/// own) counts whole. Without records a report counts as [`Totals::since`] does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Ledger {
    /// The running totals counted so far.
    counted: Totals,
    /// The input of the latest request counted from a record or a report's rest, once a
    /// record was seen.
    latest_input: Option<u64>,
}

impl Ledger {
    /// Forgets everything: the next report or record counts from zero (a new thread or
    /// process).
    pub(crate) fn reset(&mut self) {
        *self = Ledger::default();
    }

    /// Whether a session record was counted since the last reset.
    pub(crate) fn has_records(&self) -> bool {
        self.latest_input.is_some()
    }

    /// One request's record: its `input`, and the running totals after it.
    pub(crate) fn record(
        &mut self,
        input: u64,
        total_input: u64,
        total_output: u64,
    ) -> Option<Usage> {
        let total = Totals {
            input: total_input,
            output: total_output,
        };
        if !total.is_past(&self.counted) {
            return None;
        }
        let output = total.output.saturating_sub(self.counted.output);
        self.counted = total;
        self.latest_input = Some(input);
        Some(Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        })
    }

    /// A report of running totals in the stream: the usage it adds.
    pub(crate) fn report(&mut self, input: u64, output: u64) -> Option<Usage> {
        let Some(latest) = self.latest_input else {
            return self.counted.since(input, output);
        };
        let total = Totals { input, output };
        if !total.is_past(&self.counted) {
            return None;
        }
        let rest_input = total.input.saturating_sub(self.counted.input);
        let rest_output = total.output.saturating_sub(self.counted.output);
        self.counted = total;
        let input = latest.max(rest_input);
        self.latest_input = Some(input);
        Some(Usage {
            input_tokens: input,
            output_tokens: rest_output,
            ..Usage::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64) -> Option<Usage> {
        Some(Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        })
    }

    #[test]
    fn each_report_counts_what_was_used_since_the_previous_one() {
        let mut totals = Totals::default();
        assert_eq!(totals.since(2300, 84), usage(2300, 84));
        assert_eq!(totals.since(3600, 126), usage(1300, 42));
        assert_eq!(totals.since(3600, 126), None);
        assert_eq!(totals.since(10, 1), usage(10, 1), "a restarted count");
        let mut totals = Totals::default();
        assert_eq!(totals.since(5, 5), usage(5, 5));
    }

    #[test]
    fn records_count_each_request_and_a_report_adds_only_what_they_did_not() {
        let mut ledger = Ledger::default();
        // Three requests, recorded; the report's totals are theirs.
        assert_eq!(ledger.record(1100, 1100, 42), usage(1100, 42));
        assert_eq!(ledger.record(1100, 1100, 42), None, "read again");
        assert_eq!(ledger.record(1200, 2300, 84), usage(1200, 42));
        assert_eq!(ledger.report(2300, 84), None);
        assert_eq!(ledger.record(1300, 3600, 126), usage(1300, 42));
        // A request the records do not show (a router's 10 in, 1 out): its output counts,
        // the latest input stays the latest request's.
        assert_eq!(ledger.report(3610, 127), usage(1300, 1));
        assert_eq!(
            ledger.record(1300, 3600, 126),
            None,
            "a late record of a counted request"
        );
    }

    #[test]
    fn a_report_ahead_of_its_records_counts_the_rest_as_one_message() {
        let mut ledger = Ledger::default();
        assert_eq!(ledger.record(1100, 1100, 42), usage(1100, 42));
        assert_eq!(ledger.record(1200, 2300, 84), usage(1200, 42));
        // The last request's record is not written yet: the rest is that request.
        assert_eq!(ledger.report(3600, 126), usage(1300, 42));
        assert_eq!(ledger.record(1300, 3600, 126), None, "written late");
        // Two records missing: their inputs summed (an over-count, never an under-count).
        let mut two_missing = Ledger::default();
        assert_eq!(two_missing.record(1100, 1100, 42), usage(1100, 42));
        assert_eq!(two_missing.report(3600, 126), usage(2500, 84));
    }

    #[test]
    fn without_records_a_report_counts_at_once() {
        let mut ledger = Ledger::default();
        assert_eq!(ledger.report(3600, 126), usage(3600, 126));
        assert_eq!(ledger.record(1300, 3600, 126), None, "already reported");
        assert_eq!(
            ledger.record(1300, 4900, 168),
            usage(1300, 42),
            "a later request"
        );
    }
}
