#!/usr/bin/env bash
# CUTLASS's headers (header-only C++: cutlass/, cute/, cutlass/util/) from
# PyPI's nvidia-cutlass wheel into build/cutlass/include, for bench/cutlass_gemm.cu.
# Idempotent: does nothing when the headers are there.
#
#   scripts/fetch-cutlass.sh [DEST]   (default: build/cutlass)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${1:-$ROOT/build/cutlass}"
VERSION=4.2.0.0
[ -f "$DEST/include/cutlass/util/packed_stride.hpp" ] && [ -f "$DEST/include/cute/tensor.hpp" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download "nvidia-cutlass==$VERSION" --no-deps -d "$tmp" >/dev/null
python3 - "$tmp"/nvidia_cutlass-*.whl "$DEST/include" <<'PY'
import sys, zipfile, os
whl, dest = sys.argv[1], sys.argv[2]
roots = ("cutlass_library/source/include/", "cutlass_library/source/tools/util/include/")
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        for r in roots:
            if n.startswith(r) and not n.endswith("/"):
                out = os.path.join(dest, n[len(r):])
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with open(out, "wb") as f:
                    f.write(z.read(n))
PY
echo "CUTLASS $VERSION headers in $DEST/include"
