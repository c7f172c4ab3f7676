#!/usr/bin/env python3
"""Builds the byte-level token file the tiny GPT trains on (standard library only).

The corpus is the license texts in /usr/share/common-licenses (Debian's
base-files, so present on every Debian/Ubuntu machine, minimal ones included):
about 250 KB of real English. Symlinks (GPL -> GPL-3, ...) are skipped so no
text is counted twice. Each byte is one token (vocab 256), stored as
little-endian uint16, the nanoGPT / llm.c `.bin` layout that `tc-run --data`
reads.

    python3 examples/tiny-gpt/make_data.py OUT.bin
"""
import array
import os
import sys

SRC = "/usr/share/common-licenses"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_data.py OUT.bin")
    names = sorted(n for n in os.listdir(SRC)
                   if os.path.isfile(os.path.join(SRC, n)) and not os.path.islink(os.path.join(SRC, n)))
    data = b"".join(open(os.path.join(SRC, n), "rb").read() for n in names)
    tokens = array.array("H", list(data))  # one uint16 per byte
    if sys.byteorder != "little":
        tokens.byteswap()
    with open(sys.argv[1], "wb") as f:
        tokens.tofile(f)
    print(f"{sys.argv[1]}: {len(tokens)} tokens from {len(names)} files in {SRC}")


if __name__ == "__main__":
    main()
