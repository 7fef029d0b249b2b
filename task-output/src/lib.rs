//! Append-only task output files: safe opens, a capped disk writer, pipe-mode buffering, and cheap incremental reads.
#![deny(missing_docs)]
