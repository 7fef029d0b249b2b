//! A concurrent-safe task-list store, file-compatible with the reference agent harness.
#![deny(missing_docs)]
