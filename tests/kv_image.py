#!/usr/bin/env python3
"""tests/kv_image.py - makes the images the kv-server tests need from an
image kv-server wrote (a full, uncompressed version 2 image: SAVE without
--compress):

  kv_image.py v1 IN OUT [--store-v1]
      the same data as a version 1 image (the format trapkit wrote before:
      every page held, one CRC-32C per page, no zero bitmap); --store-v1
      also marks the store inside as kv-server's format 1 (KVSTR01), which
      this kv-server refuses
  kv_image.py damage IN OUT FRACTION
      the image with one byte of one data page flipped (the data page at
      FRACTION of them, 0..1), its CRC left as it was: a damaged page the
      header and directory checks cannot see
  kv_image.py pages IN
      prints the count of data pages

The format is src/apps/checkpoint/image.h's."""
import struct
import sys

HDR = struct.Struct("<8sIIII9Q16Q")  # up to area_len, shared by versions 1 and 2
V2_TAIL = struct.Struct("<QQII")     # nzero, data_len, dir_crc, header_crc
V1_TAIL = struct.Struct("<II")       # dir_crc, header_crc
KV_MAGIC_V1 = 0x31305254534b564b

_T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _T.append(c)


def crc32c(seed, data):
    c = ~seed & 0xffffffff
    t = _T
    for b in data:
        c = t[(c ^ b) & 0xff] ^ (c >> 8)
    return ~c & 0xffffffff


def read(path):
    raw = open(path, "rb").read()
    f = HDR.unpack_from(raw, 0)
    (magic, version, ps, flags, nareas, lineage, seq, parent, npages, nsaved, data_off, dir_off,
     dir_len, created) = f[:14]
    area_len = f[14:30]
    nzero, data_len, dir_crc, hcrc = V2_TAIL.unpack_from(raw, HDR.size)
    if magic != b"TKCKPT\r\n" or version != 2 or flags != 0:
        sys.exit("kv_image.py: want a full, uncompressed version 2 image")
    words = (npages + 63) // 64
    d = raw[dir_off:dir_off + dir_len]
    held = struct.unpack_from(f"<{words}Q", d, 0)
    zero = struct.unpack_from(f"<{words}Q", d, words * 8)
    pages, rank = [], 0
    for i in range(npages):
        bit = 1 << (i % 64)
        if zero[i // 64] & bit or not held[i // 64] & bit:
            pages.append(None)
        else:
            pages.append(data_off + rank * ps)
            rank += 1
    return dict(raw=raw, ps=ps, nareas=nareas, lineage=lineage, seq=seq, npages=npages,
                created=created, area_len=area_len, data_off=data_off, dir_off=dir_off,
                words=words, pages=pages, ndata=rank)


def v1(src, dst, store_v1):
    im = read(src)
    ps, n = im["ps"], im["npages"]
    data, crcs = [], []
    for i, off in enumerate(im["pages"]):
        page = bytearray(ps) if off is None else bytearray(im["raw"][off:off + ps])
        if i == 0 and store_v1:
            struct.pack_into("<Q", page, 0, KV_MAGIC_V1)
        data.append(bytes(page))
        crcs.append(crc32c(i, page))
    held = [0] * im["words"]
    for i in range(n):
        held[i // 64] |= 1 << (i % 64)
    d = struct.pack(f"<{im['words']}Q", *held) + struct.pack(f"<{n}I", *crcs)
    data_off = 4096
    dir_off = data_off + n * ps
    h = HDR.pack(b"TKCKPT\r\n", 1, ps, 0, im["nareas"], im["lineage"], im["seq"], 0, n, n,
                 data_off, dir_off, len(d), im["created"], *im["area_len"])
    h += struct.pack("<I", crc32c(0, d))
    h += struct.pack("<I", crc32c(0, h))
    with open(dst, "wb") as f:
        f.write(h.ljust(4096, b"\0"))
        f.write(b"".join(data))
        f.write(d)


def damage(src, dst, fraction):
    im = read(src)
    offs = [o for o in im["pages"] if o is not None]
    off = offs[min(len(offs) - 1, int(len(offs) * fraction))] + 100
    raw = bytearray(im["raw"])
    raw[off] ^= 0x5a
    open(dst, "wb").write(raw)


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) >= 3 and a[0] == "v1":
        v1(a[1], a[2], "--store-v1" in a[3:])
    elif len(a) == 4 and a[0] == "damage":
        damage(a[1], a[2], float(a[3]))
    elif len(a) == 2 and a[0] == "pages":
        print(read(a[1])["ndata"])
    else:
        sys.exit(__doc__)
