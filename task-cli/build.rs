//! Links the `tasks` binary as a position-dependent executable on Linux.
//!
//! `tasks` is started anew for every command (`tasks output ID --tail 5`, one `tasks run` per task
//! in a script), so its start-up is most of what a short command costs. As a position-independent
//! executable the dynamic loader applies about 20 000 relative relocations at every start, writing
//! (and so copying) about 100 pages of `.data.rel.ro`: measured, a quarter of the start-up time of
//! `tasks output ID --tail 5` (BENCHMARKS.md, task-cli). Linked with `-no-pie`, those addresses are
//! fixed at link time. The price is that the executable's own code and data are not at a random
//! address; the stack, heap, `mmap` regions and shared libraries still are.

fn main() {
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if linux {
        println!("cargo::rustc-link-arg-bin=tasks=-no-pie");
    }
}
