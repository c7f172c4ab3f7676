#!/usr/bin/env bash
# cuDNN's frontend (header-only C++ over cuDNN's graph API: cudnn_frontend.h
# and its nlohmann/json) from PyPI's nvidia-cudnn-frontend wheel into
# build/cudnn-frontend/include, for bench/cudnn_attention.cpp. cuDNN itself
# (libcudnn.so.9, headers) is CUDA's: /usr/local/cuda here, the PyTorch
# wheel's nvidia/cudnn/lib on the GPU machine. Idempotent.
#
#   scripts/fetch-cudnn-frontend.sh [DEST]   (default: build/cudnn-frontend)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${1:-$ROOT/build/cudnn-frontend}"
VERSION=1.32.0
[ -f "$DEST/include/cudnn_frontend.h" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download "nvidia-cudnn-frontend==$VERSION" --no-deps -d "$tmp" >/dev/null
python3 - "$tmp"/nvidia_cudnn_frontend-*.whl "$DEST" <<'PY'
import sys, zipfile, os
whl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith("include/") and not n.endswith("/"):
            out = os.path.join(dest, n)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as f:
                f.write(z.read(n))
PY
echo "cuDNN frontend $VERSION headers in $DEST/include"
