#![no_main]
//! `./run.sh session_record` or `cargo fuzz run -s none --features libfuzzer session_record` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::session::record(data));
