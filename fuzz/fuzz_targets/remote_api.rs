#![no_main]
//! `./run.sh remote_api` or `cargo fuzz run -s none --features libfuzzer remote_api` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::remote::api(data));
