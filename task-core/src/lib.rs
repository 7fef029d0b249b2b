//! The semantic core of an AI-agent task system: ids, lifecycle, registry, exactly-once notifications.
#![deny(missing_docs)]
