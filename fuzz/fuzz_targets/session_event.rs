#![no_main]
//! `./run.sh session_event` or `cargo fuzz run -s none --features libfuzzer session_event` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::session::event(data));
