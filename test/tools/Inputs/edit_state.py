#!/usr/bin/env python3
"""Copies checkpoint folder SRC to DST with one text replacement in state.json.

    edit_state.py SRC DST OLD NEW      (fails when OLD is not in state.json)
"""
import os
import shutil
import sys

src, dst, old, new = sys.argv[1:5]
if os.path.exists(dst):
    shutil.rmtree(dst)
shutil.copytree(src, dst)
path = os.path.join(dst, "state.json")
text = open(path).read()
if old not in text:
    sys.exit(f"edit_state.py: '{old}' is not in {path}")
open(path, "w").write(text.replace(old, new, 1))
