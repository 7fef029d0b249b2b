#![no_main]
//! `./run.sh list_task_file` or `cargo fuzz run -s none --features libfuzzer list_task_file` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::list::task_file(data));
