#!/usr/bin/env bash
# RUSTC_WRAPPER of the fuzz builds (scripts/fuzz.sh sets it): AFL++'s
# coverage instrumentation for deloop's own crates only.
#
# cargo-afl passes its flags to every crate through RUSTFLAGS: SanitizerCoverage
# (a call per edge and per comparison), one codegen unit, opt-level 3. This
# wrapper keeps them for deloop's crates and the fuzz targets, and takes the
# coverage flags off every other crate (serde_json, regex, tokio, hyper, ...):
# their edges told the fuzzer little about deloop's code, cost a call each on
# every execution and filled the coverage map (229,505 instrumented edges in
# proxy_sse, 21,379 without them). Those crates build with 16 codegen
# units (cargo-afl's single unit works around link errors of instrumented
# code; uninstrumented crates link fine with 16).
# Crates that only the documentation oracle runs (embedders, tensors, SQL
# clients), linked into server_bodies but never called by its routes, build
# at opt-level 0, so that the server's target builds (25 CPU-minutes).
#
# Debug assertions and overflow checks stay on everywhere. After editing the
# lists, `rm -rf fuzz/target*`: cargo does not see a wrapper's changes.
set -euo pipefail

rustc=$1
shift

name=
prev=
for a in "$@"; do
    if [[ $prev == --crate-name ]]; then
        name=$a
        break
    fi
    prev=$a
done

case $name in
    # deloop's crates, the fuzz library and its targets: instrumented as
    # cargo-afl asks.
    deloop_* | clamp | stream | rescue | transcript | proxy_sse | server_bodies | "")
        exec "$rustc" "$@"
        ;;
esac

args=()
prev=
for a in "$@"; do
    if [[ $a == -C ]]; then
        # Look at the value before keeping the pair.
        prev=$a
        continue
    fi
    if [[ $prev == -C ]]; then
        case $a in
            passes=sancov* | llvm-args=-sanitizer-coverage*) prev=$a; continue ;;
            *) args+=(-C "$a") ;;
        esac
        prev=$a
        continue
    fi
    case $a in
        -Cpasses=sancov* | -Cllvm-args=-sanitizer-coverage*) ;;
        *) args+=("$a") ;;
    esac
    prev=$a
done
args+=(-C codegen-units=16)

case $name in
    candle_core | candle_nn | candle_transformers | gemm | gemm_common | gemm_f16 | \
    gemm_f32 | gemm_f64 | gemm_c32 | gemm_c64 | pulp | tokenizers | ort | ort_sys | \
    safetensors | half | float8 | dyn_stack | rayon | rayon_core | esaxx_rs | \
    spm_precompiled | unicode_normalization_alignments | daachorse | fancy_regex | \
    rusqlite | libsqlite3_sys | tokio_postgres | postgres_protocol | postgres_types | \
    deadpool_postgres | pgvector | zip | zlib_rs | rand_distr | num_complex | monostate)
        args+=(-C opt-level=0)
        ;;
esac

exec "$rustc" "${args[@]}"
