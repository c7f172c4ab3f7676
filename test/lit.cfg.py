# -*- Python -*-
# lit configuration for tc: every pass, the importer and the tools.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "TC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "runtime", "conformance", "fixtures", "fuzz"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tc_obj_root, "test")
config.substitutions.append(("%fixtures", os.path.join(config.tc_src_root, "test", "fixtures")))

llvm_config.use_default_substitutions()
# The tools' compile cache (compiler/Cache.h) lives in the build's test folder,
# never in the user's ~/.cache/tc; a test that checks the cache sets its own.
config.environment["TC_CACHE_DIR"] = os.path.join(config.test_exec_root, "tc-cache")
# %py3: the python3 on PATH, which scripts/setup.sh gives the pinned test
# packages (numpy, onnx, tensorboard, matplotlib); %python is lit's own.
import shutil as _shutil
config.substitutions.append(("%py3", _shutil.which("python3") or "python3"))
config.substitutions.append(("%tc_conformance", os.path.join(config.tc_tools_dir, "tc-conformance")))
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.tc_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["not", "count", "split-file"], [config.llvm_tools_dir])
tools = ["tc-opt", "tc-compile", "tc-run"]
llvm_config.add_tool_substitutions(tools, [config.tc_tools_dir])

# CUDA codegen (test/codegen): NVRTC when tc-cuda-codegen was built with it;
# NVIDIA's cuobjdump / nvdisasm when installed (PATH, CUDA's bin, or the PyPI
# wheels scripts/setup.sh installs).
import shutil
if getattr(config, "tc_have_nvrtc", "0") in ("1", "ON", "TRUE", "True"):
    config.available_features.add("nvrtc")
llvm_config.add_tool_substitutions(["tc-cuda-codegen"], [config.tc_tools_dir])
config.substitutions.append(("%run_generated",
                             os.path.join(config.tc_obj_root, "test", "codegen", "run_generated")))
# The CUDA runtime library (its hand-written kernels' SASS), when built.
_runtime_cuda_lib = getattr(config, "tc_runtime_cuda_lib", "")
if _runtime_cuda_lib and os.path.exists(_runtime_cuda_lib):
    config.available_features.add("tc-runtime-cuda")
    config.substitutions.append(("%tc_runtime_cuda_lib", _runtime_cuda_lib))
_cuda_bin = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin")


def _pypi_cuda_bins():
    """The bin folders of NVIDIA's PyPI tool wheels (nvidia-cuda-cuobjdump,
    nvidia-cuda-nvdisasm: nvidia/cu13/bin), which scripts/setup.sh installs
    into the python3 on PATH (not necessarily lit's own interpreter)."""
    import glob
    import subprocess
    py = shutil.which("python3")
    if not py:
        return []
    try:
        out = subprocess.run(
            [py, "-c", "import importlib.util as u; s = u.find_spec('nvidia'); "
                       "print('\\n'.join(s.submodule_search_locations) if s else '')"],
            capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return sorted(d for loc in out.split("\n") if loc
                  for d in glob.glob(os.path.join(loc, "cu*", "bin")))


_cuda_bin = os.pathsep.join([_cuda_bin] + _pypi_cuda_bins())
_cuobjdump = shutil.which("cuobjdump") or shutil.which("cuobjdump", path=_cuda_bin)
if _cuobjdump:
    config.available_features.add("cuobjdump")
    config.substitutions.append(("%cuobjdump", _cuobjdump))
    _nvdisasm = shutil.which("nvdisasm") or shutil.which("nvdisasm", path=_cuda_bin)
    if _nvdisasm:
        config.available_features.add("nvdisasm")
        config.environment["PATH"] = os.path.dirname(_nvdisasm) + os.pathsep + config.environment.get("PATH", "")
