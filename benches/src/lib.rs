//! Shared helpers for the benchmarks of the task system.
