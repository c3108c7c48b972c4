#!/usr/bin/env python3
"""Copies the kernel's BTF (the .BTF section, kept raw in an arm64 Image) out of an uncompressed
arm64 kernel Image, for `bpftool btf dump file OUT format c` (bpf/vmlinux_arm64.h; issue 31).

Usage: arm64-btf.py IMAGE OUT. The blob is the one whose header (magic 0xeb9f, version 1,
24-byte header) announces the largest type section: the kernel's own, not a module's sample."""
import struct
import sys

data = open(sys.argv[1], "rb").read()
best = None
at = 0
while True:
    at = data.find(b"\x9f\xeb\x01\x00\x18\x00\x00\x00", at)
    if at < 0:
        break
    _, _, _, hdr, _, type_len, str_off, str_len = struct.unpack_from("<HBBIIIII", data, at)
    if best is None or type_len > best[1]:
        best = (at, type_len, hdr + str_off + str_len)
    at += 1
if best is None:
    sys.exit(f"arm64-btf: no BTF in {sys.argv[1]}; is it an uncompressed arm64 Image?")
open(sys.argv[2], "wb").write(data[best[0] : best[0] + best[2]])
