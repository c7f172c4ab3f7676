# Sourced by the scripts that run tc on a GPU (gpu-check.sh, bench/hf.sh):
# puts cuDNN 9 and NVRTC on the loader's path for tc's optional cuDNN plugin
# (libtc_cudnn.so) where the system has none but PyTorch's wheels bring them
# (site-packages/nvidia/cudnn/lib, nvidia/cu13/lib). Changes nothing where
# ldconfig already knows libcudnn.so.9 or no such wheel is installed.
if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9'; then
  _tc_cudnn_dirs=$(python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
dirs = set()
for root in nvidia.__path__:
    for lib in ("libcudnn.so.9", "libnvrtc.so.13"):
        for p in glob.glob(os.path.join(root, "**", lib), recursive=True):
            dirs.add(os.path.dirname(p))
print(":".join(sorted(dirs)))
PY
  )
  if [ -n "$_tc_cudnn_dirs" ]; then
    export LD_LIBRARY_PATH="$_tc_cudnn_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  unset _tc_cudnn_dirs
fi
