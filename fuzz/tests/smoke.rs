//! Every fuzz target over its corpus, its regressions and a fixed number of mutations of them
//! (`FUZZ_SMOKE_RUNS`, or a time with `FUZZ_SMOKE_SECS`): what CI runs of the fuzzing. Long coverage-guided
//! runs are `./run.sh` (README.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

macro_rules! smoke {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let report = fuzz::smoke::run_from_env(stringify!($name));
                assert!(report.files > 0, "{} has no corpus", stringify!($name));
            }
        )*

        /// The names the tests above cover.
        const TESTED: &[&str] = &[$(stringify!($name)),*];
    };
}

smoke!(
    session_record,
    session_event,
    session_protocol,
    session_config,
    session_lease,
    list_task_file,
    list_dir,
    agent_stream,
    agent_tail,
    workflow_meta,
    workflow_files,
    output_reads,
    mcp_transport,
    remote_api,
);

#[test]
fn every_target_has_a_smoke_test_a_libfuzzer_binary_and_a_corpus() {
    let dir = fuzz::smoke::crate_dir();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let targets: BTreeSet<&str> = fuzz::TARGETS.iter().map(|t| t.name).collect();
    assert_eq!(
        targets,
        TESTED.iter().copied().collect(),
        "smoke tests and targets differ"
    );
    for name in targets {
        let binary = dir.join("fuzz_targets").join(format!("{name}.rs"));
        let source = std::fs::read_to_string(&binary)
            .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
        assert!(
            source.contains("fuzz_target!"),
            "{} is no fuzz target",
            binary.display()
        );
        assert!(
            manifest.contains(&format!(
                "name = \"{name}\"\npath = \"fuzz_targets/{name}.rs\""
            )),
            "Cargo.toml has no [[bin]] for {name}"
        );
        assert!(
            !fuzz::smoke::inputs(name).is_empty(),
            "corpus/{name}/ is empty"
        );
    }
}
