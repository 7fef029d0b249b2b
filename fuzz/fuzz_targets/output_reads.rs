#![no_main]
//! `./run.sh output_reads` or `cargo fuzz run -s none --features libfuzzer output_reads` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::output::reads(data));
