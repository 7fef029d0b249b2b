#!/usr/bin/env bash
# Long, coverage-guided runs of the fuzz targets with libFuzzer (cargo-fuzz), on the stable
# toolchain: `--sanitizer none` is the one mode of cargo-fuzz that passes no -Z flag (its
# coverage instrumentation, -Cpasses=sancov-module and -Cllvm-args=-sanitizer-coverage-*, is
# stable rustc). Needs a C++ compiler (libfuzzer-sys builds libFuzzer) and cargo-fuzz
# (`cargo install cargo-fuzz`).
#
#   fuzz/run.sh                       every target for $FUZZ_SECONDS (default 60) each
#   fuzz/run.sh agent_stream 3600     one target for an hour
#   fuzz/run.sh --list                the targets
#   fuzz/run.sh --cmin [target]       minimize the corpus after a run (before committing it)
#
# The corpus grows in fuzz/corpus/<target>/; a crash is saved in fuzz/artifacts/<target>/ and
# reproduced with `cargo fuzz run -s none --features libfuzzer --fuzz-dir fuzz <target> <file>`
# (then copy it into fuzz/regressions/<target>/ with the fix, so `cargo test -p fuzz` keeps it).
# Extra libFuzzer options go in $FUZZ_ARGS (e.g. FUZZ_ARGS="-jobs=2 -workers=2").
set -euo pipefail
cd "$(dirname "$0")/.."

targets() {
    sed -n 's/^name = "\([a-z_]*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^fuzz$'
}

fuzz() {
    cargo fuzz "$1" --sanitizer none --features libfuzzer --fuzz-dir fuzz "${@:2}"
}

# The workspace's release profile links with fat LTO and one codegen unit (for the shipped
# executables); a fuzz target needs neither, and with them each target takes minutes to link.
export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16

# File-reading targets write their input to a scratch directory: keep it in memory.
if [[ -d /dev/shm && -w /dev/shm ]]; then
    export TMPDIR=/dev/shm
fi

case "${1:-}" in
--list)
    targets
    exit 0
    ;;
--cmin)
    for target in ${2:-$(targets)}; do
        fuzz cmin "$target"
    done
    exit 0
    ;;
esac

seconds="${2:-${FUZZ_SECONDS:-60}}"
for target in ${1:-$(targets)}; do
    echo "== $target: ${seconds}s"
    # -timeout: one input may take 10 s at most (a hang); -rss_limit_mb: 2 GiB of memory at
    # most (unbounded memory); -max_len: inputs up to 64 KiB (long lines, deep nesting); -dict:
    # JSON structure, edge numbers and the formats' keys (fuzz/dict/json.dict).
    # shellcheck disable=SC2086 # FUZZ_ARGS is words
    fuzz run "$target" -- -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -dict=fuzz/dict/json.dict -print_final_stats=1 ${FUZZ_ARGS:-}
done
