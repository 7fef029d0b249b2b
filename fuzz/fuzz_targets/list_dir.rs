#![no_main]
//! `./run.sh list_dir` or `cargo fuzz run -s none --features libfuzzer list_dir` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::list::dir(data));
