#!/usr/bin/env bash
# Bounded fuzzing for CI: builds every fuzz target of fuzz/ with libFuzzer's instrumentation (the
# flags cargo-fuzz uses, on stable Rust through RUSTC_BOOTSTRAP=1, no cargo-fuzz needed) and runs
# each for FUZZ_SECONDS on a scratch copy of its seed corpus (fuzz/corpus/<target>/) plus its
# committed crashes (fuzz/regressions/<target>/), with its dictionary (fuzz/dicts/<target>.dict).
# The committed corpus never grows.
#
#   scripts/fuzz.sh                      # every target, 20 s each
#   FUZZ_SECONDS=300 scripts/fuzz.sh bill_page state_file
#   scripts/fuzz.sh --build-only         # only build them (a later run then starts at once)
#
# Environment: FUZZ_SECONDS (20) per target; FUZZ_SANITIZER (address, or none); FUZZ_TIMEOUT (10)
# seconds one input may take before it counts as a hang; FUZZ_TARGET_DIR (target/fuzz).
# On a crash it prints the target, the input and how to commit it, and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-20}
sanitizer=${FUZZ_SANITIZER:-address}
timeout=${FUZZ_TIMEOUT:-10}
target_dir=${FUZZ_TARGET_DIR:-target/fuzz}
build_only=false
if [ "${1:-}" = --build-only ]; then
    build_only=true
    shift
fi
if [ $# -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for source in fuzz/fuzz_targets/*.rs; do
        name=$(basename "$source" .rs)
        targets+=("$name")
    done
fi

triple=$(rustc -vV | sed -n 's/^host: //p')
flags=(
    -Cpasses=sancov-module
    -Cllvm-args=-sanitizer-coverage-level=4
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
    -Cllvm-args=-sanitizer-coverage-pc-table
    -Cllvm-args=-sanitizer-coverage-trace-compares
    --cfg fuzzing
    -Cdebug-assertions
    -Coverflow-checks
    -Cforce-frame-pointers
)
[ "$sanitizer" = none ] || flags+=("-Zsanitizer=$sanitizer")

started=$(date +%s)
echo "fuzz: building ${#targets[@]} target(s) for $triple (sanitizer: $sanitizer) in $target_dir" >&2
bins=()
for target in "${targets[@]}"; do bins+=(--bin "$target"); done
# -Z flags need a nightly compiler or RUSTC_BOOTSTRAP=1. --target keeps the instrumentation off
# build scripts and proc macros, as cargo-fuzz does.
unset CARGO_ENCODED_RUSTFLAGS
RUSTC_BOOTSTRAP=1 RUSTFLAGS="${flags[*]}" \
    cargo build --manifest-path fuzz/Cargo.toml --release --target "$triple" --target-dir "$target_dir" "${bins[@]}"
built=$(date +%s)
echo "fuzz: build took $((built - started)) s" >&2
if $build_only; then
    exit 0
fi

passed=0
failed=0
summary=()
for target in "${targets[@]}"; do
    binary="$target_dir/$triple/release/$target"
    corpus="$target_dir/corpus/$target"
    artifacts="$target_dir/artifacts/$target"
    log="$target_dir/logs/$target.log"
    rm -rf "$corpus" "$artifacts"
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
    for folder in "fuzz/corpus/$target" "fuzz/regressions/$target"; do
        [ -d "$folder" ] || continue
        find "$folder" -maxdepth 1 -type f ! -name '.*' ! -name 'README*' -exec cp {} "$corpus/" \;
    done
    seeds=$(find "$corpus" -type f | wc -l)
    echo "fuzz: running $target for ${seconds} s on $seeds seed input(s)" >&2
    begin=$(date +%s.%N)
    status=0
    options=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout="$timeout" -print_final_stats=1)
    [ -f "fuzz/dicts/$target.dict" ] && options+=(-dict="fuzz/dicts/$target.dict")
    "$binary" "${options[@]}" -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || status=$?
    elapsed=$(awk -v begin="$begin" -v end="$(date +%s.%N)" 'BEGIN { printf "%.1f", end - begin }')
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    entries=$(find "$corpus" -type f | wc -l)
    line=$(printf '%-14s %9s executions in %5s s, corpus %d -> %d inputs' \
        "$target" "${executions:-?}" "$elapsed" "$seeds" "$entries")
    input=$(find "$artifacts" -type f | head -n 1)
    if [ "$status" -eq 0 ] && [ -z "$input" ]; then
        passed=$((passed + 1))
        summary+=("fuzz: ok     $line")
        continue
    fi
    failed=$((failed + 1))
    summary+=("fuzz: FAILED $line (exit $status)")
    echo "fuzz: ---- $target FAILED (exit $status); the end of its log ($log):" >&2
    grep -v '^#[0-9]' "$log" | tail -n 40 >&2
    if [ -n "$input" ]; then
        echo "fuzz: target: $target" >&2
        echo "fuzz: crashing input: $input ($(wc -c <"$input") bytes)" >&2
        echo "fuzz: reproduce: $binary $input" >&2
        echo "fuzz: commit it as a regression (it then fails cargo test until fixed):" >&2
        echo "        mkdir -p fuzz/regressions/$target && cp $input fuzz/regressions/$target/" >&2
        echo "        cargo test --test it fuzz_regressions $target" >&2
        if [ "$(wc -c <"$input")" -le 4096 ]; then
            echo "fuzz: the input, base64 (for a CI log: base64 -d > fuzz/regressions/$target/$(basename "$input")):" >&2
            base64 -w 0 "$input" >&2
            echo >&2
        fi
    fi
done

echo "fuzz: total $(($(date +%s) - started)) s (build $((built - started)) s), ${seconds} s per target"
printf '%s\n' "${summary[@]}"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
