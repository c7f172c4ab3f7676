# -*- Python -*-
# lit configuration for tc: every pass, the importer and the tools.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "TC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "runtime", "conformance", "fixtures"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tc_obj_root, "test")
config.substitutions.append(("%fixtures", os.path.join(config.tc_src_root, "test", "fixtures")))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.tc_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["not", "count", "split-file"], [config.llvm_tools_dir])
tools = ["tc-opt", "tc-compile", "tc-run"]
llvm_config.add_tool_substitutions(tools, [config.tc_tools_dir])
