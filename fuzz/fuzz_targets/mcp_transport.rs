#![no_main]
//! `./run.sh mcp_transport` or `cargo fuzz run -s none --features libfuzzer mcp_transport` (see fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz::targets::mcp::transport(data));
