#![no_main]
//! `./run.sh workflow_meta` or `cargo fuzz run -s none --features libfuzzer workflow_meta` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::workflow::meta(data));
