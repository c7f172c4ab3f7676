#!/usr/bin/env python3
"""Real text for the precision benchmark: the Linux kernel documentation, byte-level tokens.

    python3 scripts/make_text_data.py corpus --out build/text    # here: needs apt (Debian 12)
    python3 scripts/make_text_data.py tokens --corpus build/text --out /tmp/text   # anywhere

`corpus` fetches Debian's linux-doc-6.1 package (`apt-get download`, no root needed beyond apt's
cache; a .deb given with --deb is used instead), takes every Documentation/**/*.rst.gz and *.txt.gz
in sorted path order and writes two xz files: linux-doc.val.xz holds every 20th file (a held-out
split by file, so no document is in both), linux-doc.train.xz the rest, each file's bytes followed
by one blank line. manifest.json records the package version, the deb's sha256 and the byte
counts. About 28.5 MB of text compress to about 6 MB, small enough to carry to the GPU machine.

`tokens` turns the two xz files into flat uint16 token files train.bin / val.bin (one token per
byte, vocabulary 256: BPE vocabularies cannot be fetched here), the format of tc-run --data and
--val-data (nanoGPT/llm.c .bin, no header). Standard library and numpy only.
"""
import argparse
import glob
import gzip
import hashlib
import json
import lzma
import os
import subprocess
import sys
import tempfile

PACKAGE = "linux-doc-6.1"
HOLD_OUT_EVERY = 20


def fetch_deb(workdir):
    """Downloads the package into workdir; returns its path."""
    r = subprocess.run(["apt-get", "download", PACKAGE], cwd=workdir, capture_output=True, text=True)
    debs = glob.glob(os.path.join(workdir, PACKAGE + "_*.deb"))
    if r.returncode != 0 or not debs:
        sys.exit(f"make_text_data: 'apt-get download {PACKAGE}' failed (is this Debian 12 with its "
                 f"package lists? run apt-get update):\n{r.stderr.strip()}")
    return debs[0]


def corpus(args):
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        deb = args.deb or fetch_deb(tmp)
        if not os.path.isfile(deb):
            sys.exit(f"make_text_data: {deb}: no such file")
        tree = os.path.join(tmp, "x")
        r = subprocess.run(["dpkg-deb", "-x", deb, tree], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"make_text_data: dpkg-deb -x {deb} failed: {r.stderr.strip()}")
        version = subprocess.run(["dpkg-deb", "-f", deb, "Version"], capture_output=True,
                                 text=True).stdout.strip()
        with open(deb, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        root = os.path.join(tree, "usr/share/doc", PACKAGE, "Documentation")
        files = sorted(p for p in glob.glob(os.path.join(root, "**", "*"), recursive=True)
                       if p.endswith((".rst.gz", ".txt.gz")))
        if not files:
            sys.exit(f"make_text_data: {deb} has no Documentation/**/*.rst.gz or *.txt.gz")
        parts = {"train": [], "val": []}
        for i, p in enumerate(files):
            with gzip.open(p, "rb") as f:
                parts["val" if i % HOLD_OUT_EVERY == 0 else "train"].append(f.read() + b"\n\n")
    manifest = {"package": PACKAGE, "version": version, "deb_sha256": sha, "files": len(files),
                "hold_out": f"every {HOLD_OUT_EVERY}th file in sorted path order"}
    for split, chunks in parts.items():
        data = b"".join(chunks)
        path = os.path.join(args.out, f"linux-doc.{split}.xz")
        with lzma.open(path, "wb", preset=6) as f:
            f.write(data)
        manifest[split] = {"files": len(chunks), "bytes": len(data),
                           "sha256": hashlib.sha256(data).hexdigest()}
        print(f"{path}: {len(chunks)} files, {len(data):,} bytes ({os.path.getsize(path):,} compressed)")
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


def tokens(args):
    import numpy as np
    os.makedirs(args.out, exist_ok=True)
    for split in ("train", "val"):
        src = os.path.join(args.corpus, f"linux-doc.{split}.xz")
        if not os.path.isfile(src):
            sys.exit(f"make_text_data: {src}: no such file (run 'make_text_data.py corpus' first)")
        with lzma.open(src, "rb") as f:
            data = f.read()
        dst = os.path.join(args.out, f"{split}.bin")
        np.frombuffer(data, dtype=np.uint8).astype(np.uint16).tofile(dst)
        print(f"{dst}: {len(data):,} tokens")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus", help="the package's text as two xz files")
    c.add_argument("--out", required=True)
    c.add_argument("--deb", help="a downloaded linux-doc-6.1 .deb (default: apt-get download)")
    t = sub.add_parser("tokens", help="the xz files as uint16 byte tokens")
    t.add_argument("--corpus", required=True)
    t.add_argument("--out", required=True)
    args = ap.parse_args()
    (corpus if args.cmd == "corpus" else tokens)(args)


if __name__ == "__main__":
    main()
