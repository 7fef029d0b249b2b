#![no_main]
//! `./run.sh session_protocol` or `cargo fuzz run -s none --features libfuzzer session_protocol` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::session::protocol(data));
