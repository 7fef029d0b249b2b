//! Running totals a CLI reports, turned into the usage since its previous report.
//!
//! Codex's `turn.completed.usage` and Gemini's `result.stats` are not one model request's
//! usage: they are sums over every request so far (Codex: the whole thread, across `codex exec
//! resume`; Gemini: the whole run, its model router included). Feeding them to
//! task-core's `AgentProgress::record_usage` as if they were one
//! message's would count every earlier request's input again. The difference between two
//! reports is the usage of the requests made between them: that is what is recorded.

use crate::event::Usage;

/// The totals of the previous report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    input: u64,
    output: u64,
}

impl Totals {
    /// Forgets the previous report: the next one counts from zero (a new thread or process).
    pub(crate) fn reset(&mut self) {
        *self = Totals::default();
    }

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
        totals.reset();
        assert_eq!(totals.since(5, 5), usage(5, 5));
    }
}
