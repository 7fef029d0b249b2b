#![no_main]
//! `./run.sh session_lease` or `cargo fuzz run -s none --features libfuzzer session_lease` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::session::lease(data));
