#!/usr/bin/env bash
# Coverage-guided fuzzing with AFL++ (cargo-afl, stable toolchain).
#
#   scripts/fuzz.sh TARGET SECONDS     build TARGET and fuzz it for SECONDS
#   scripts/fuzz.sh all SECONDS        every target in turn, SECONDS each
#   scripts/fuzz.sh list               the targets
#   scripts/fuzz.sh stats TARGET       the figures of TARGET's last run
#
# Targets live in fuzz/ (its own cargo workspace; docs/fuzzing.md). Needs
# cargo-afl: `cargo install cargo-afl && cargo afl config --build`.
# One fuzzer runs at a time, on one core. Findings go to
# fuzz/out/TARGET/default/{crashes,hangs}; each one becomes a regression
# test in the owning crate. Prints executions, coverage and findings, and
# exits 1 when the run found a crash or a hang. FUZZ_NO_BUILD=1 fuzzes
# the binary already in fuzz/target (while another build holds its lock).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FUZZ="$ROOT/fuzz"
CORE_TARGETS=(clamp stream rescue transcript)
EDGE_TARGETS=(proxy_sse server_bodies)
ALL=("${CORE_TARGETS[@]}" "${EDGE_TARGETS[@]}")

usage() { echo "usage: scripts/fuzz.sh TARGET|all SECONDS  (targets: ${ALL[*]})" >&2; exit 2; }

[[ $# -ge 1 ]] || usage
if [[ $1 == list ]]; then printf '%s\n' "${ALL[@]}"; exit 0; fi
if [[ $1 == stats && $# -eq 2 ]]; then
    TARGET=$2
else
    [[ $# -eq 2 && $2 =~ ^[1-9][0-9]*$ ]] || usage
    TARGET=$1 SECONDS_EACH=$2
fi

if ! cargo afl --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-afl is missing; install it with \`cargo install cargo-afl && cargo afl config --build\`" >&2
    exit 2
fi

features_of() {
    case $1 in
        proxy_sse) echo "--features proxy" ;;
        server_bodies) echo "--features server" ;;
        *) echo "" ;;
    esac
}

# The server's target links the whole server (the oracle, its index and
# embedders): it builds in its own directory, so that its long build does
# not hold the lock of the other targets' builds.
target_dir_of() {
    case $1 in
        server_bodies) echo "$FUZZ/target-server" ;;
        *) echo "$FUZZ/target" ;;
    esac
}

stat_of() { # FILE KEY
    sed -n "s/^$2 *: *//p" "$1" | head -n 1
}

run_one() {
    local target=$1 secs=$2
    local known=0 t
    for t in "${ALL[@]}"; do [[ $t == "$target" ]] && known=1; done
    [[ $known == 1 ]] || usage
    local tdir
    tdir=$(target_dir_of "$target")
    if [[ ${FUZZ_NO_BUILD:-} == 1 && -x $tdir/release/$target ]]; then
        echo "== $target: FUZZ_NO_BUILD=1, using the binary already built" >&2
    else
        echo "== $target: building" >&2
        # The wrapper instruments deloop's crates only (fuzz/rustc-wrapper.sh).
        # shellcheck disable=SC2046
        (cd "$FUZZ" && CARGO_TARGET_DIR="$tdir" CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}" \
            RUSTC_WRAPPER="$FUZZ/rustc-wrapper.sh" \
            cargo afl build --release --quiet --bin "$target" $(features_of "$target"))
    fi
    local out="$FUZZ/out/$target"
    local input="$FUZZ/corpus/$target"
    # Resume an earlier run's queue when there is one (`-i -`).
    if [[ -d $out/default/queue ]]; then input=-; fi
    echo "== $target: fuzzing for ${secs}s" >&2
    (cd "$FUZZ" && AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
        AFL_NO_AFFINITY=1 AFL_AUTORESUME=1 \
        cargo afl fuzz -V "$secs" -t 2000 -i "$input" -o "$out" "$tdir/release/$target" \
        > "$FUZZ/out/$target.log" 2>&1) || true
    report "$target"
}

report() { # TARGET: prints the figures of its last run; 1 when it found something
    local target=$1
    local out="$FUZZ/out/$target"
    local stats="$out/default/fuzzer_stats"
    if [[ ! -f $stats ]]; then
        echo "fuzz.sh: $target: no fuzzer_stats; see fuzz/out/$target.log" >&2
        tail -n 20 "$FUZZ/out/$target.log" >&2 || true
        return 2
    fi
    local crashes hangs
    crashes=$(stat_of "$stats" saved_crashes)
    hangs=$(stat_of "$stats" saved_hangs)
    printf '%-14s execs %-12s exec/s %-8s edges %s/%s bitmap %-7s corpus %-6s crashes %s hangs %s\n' \
        "$target" "$(stat_of "$stats" execs_done)" "$(stat_of "$stats" execs_per_sec)" \
        "$(stat_of "$stats" edges_found)" "$(stat_of "$stats" total_edges)" \
        "$(stat_of "$stats" bitmap_cvg)" "$(stat_of "$stats" corpus_count)" "$crashes" "$hangs"
    if [[ $crashes != 0 || $hangs != 0 ]]; then
        echo "findings: $out/default/crashes $out/default/hangs" >&2
        return 1
    fi
}

mkdir -p "$FUZZ/out"
if [[ $1 == stats ]]; then report "$TARGET"; exit; fi
if [[ $TARGET == all ]]; then
    status=0
    for t in "${ALL[@]}"; do run_one "$t" "$SECONDS_EACH" || status=1; done
    exit $status
fi
run_one "$TARGET" "$SECONDS_EACH"
