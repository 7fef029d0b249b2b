#![no_main]
//! `./run.sh workflow_files` or `cargo fuzz run -s none --features libfuzzer workflow_files` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::workflow::files(data));
