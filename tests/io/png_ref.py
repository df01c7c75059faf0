#!/usr/bin/env python3
"""Independent PNG side of tests/io/test_png.cpp, with Pillow (Debian's python3-pil).

  png_ref.py write DIR SEED   Pillow writes DIR/<name>.png for rgb (8-bit RGB), rgba, la (gray +
                              alpha), palette (RGB palette with transparency), gray16 (16-bit
                              gray) and gray1 (1-bit gray), and DIR/<name>.values, the samples
                              without alpha divided by 2^depth - 1 ([h, w, channels] row-major,
                              float64 little-endian), and DIR/rgb.luma, 0.2126 R + 0.7152 G +
                              0.0722 B of rgb's values
  png_ref.py read FILE OUT    Pillow reads FILE (a gray PNG) and writes its samples to OUT
                              (float64 little-endian, as stored, not scaled); prints "mode w h"
"""
import random
import struct
import sys

from PIL import Image


def put(path, values):
    with open(path, "wb") as f:
        f.write(struct.pack("<%dd" % len(values), *values))


def write(d, seed):
    rng = random.Random(seed)
    w, h = 7, 5
    rgb = [tuple(rng.randrange(256) for _ in range(3)) for _ in range(w * h)]
    im = Image.new("RGB", (w, h))
    im.putdata(rgb)
    im.save(f"{d}/rgb.png")
    put(f"{d}/rgb.values", [c / 255 for p in rgb for c in p])
    put(f"{d}/rgb.luma", [0.2126 * (p[0] / 255) + 0.7152 * (p[1] / 255) + 0.0722 * (p[2] / 255) for p in rgb])

    rgba = [p + (rng.randrange(256),) for p in rgb]
    im = Image.new("RGBA", (w, h))
    im.putdata(rgba)
    im.save(f"{d}/rgba.png")
    put(f"{d}/rgba.values", [c / 255 for p in rgba for c in p[:3]])

    la = [(rng.randrange(256), rng.randrange(256)) for _ in range(w * h)]
    im = Image.new("LA", (w, h))
    im.putdata(la)
    im.save(f"{d}/la.png")
    put(f"{d}/la.values", [p[0] / 255 for p in la])

    palette = [rng.randrange(256) for _ in range(3 * 16)]
    index = [rng.randrange(16) for _ in range(w * h)]
    im = Image.new("P", (w, h))
    im.putpalette(palette)
    im.putdata(index)
    im.info["transparency"] = 3
    im.save(f"{d}/palette.png", transparency=3)
    put(f"{d}/palette.values", [palette[3 * i + c] / 255 for i in index for c in range(3)])

    g16 = [rng.randrange(65536) for _ in range(w * h)]
    im = Image.new("I;16", (w, h))
    im.putdata(g16)
    im.save(f"{d}/gray16.png")
    put(f"{d}/gray16.values", [v / 65535 for v in g16])

    g1 = [rng.randrange(2) * 255 for _ in range(w * h)]
    im = Image.new("1", (w, h))
    im.putdata(g1)
    im.save(f"{d}/gray1.png")
    put(f"{d}/gray1.values", [v / 255 for v in g1])


def read(path, out):
    im = Image.open(path)
    im.load()
    print(im.mode, im.size[0], im.size[1])
    put(out, [float(v) for v in im.getdata()])


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
    else:
        read(sys.argv[2], sys.argv[3])
