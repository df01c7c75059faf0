#!/usr/bin/env python3
"""Independent FITS/WCS side of tests/io/test_fits.cpp, with astropy (Debian's python3-astropy).

  fits_ref.py write DIR SEED   astropy writes DIR/int16.fits (BSCALE/BZERO/BLANK), the same
                               tile-compressed (rice.fits, gzip1.fits, gzip2.fits) and gzipped
                               (gzip.fits.gz), DIR/float32_cd.fits (CD-matrix WCS) and
                               DIR/float64_gzip2.fits (quantized, GZIP_2), and DIR/<name>.expected,
                               the values astropy reads back (float64 little-endian, NaN where blank)
  fits_ref.py check IN OUT S   the output pixel centres x' of OUT (1-based FITS pixel coordinates)
                               and the input pixel coordinates (x' - 0.5) / S + 0.5 of IN are the
                               same sky position: prints the largest distance in input pixels
                               and exits 1 if it exceeds 1e-3
"""
import gzip
import sys
import warnings

import numpy as np
from astropy.io import fits
from astropy.wcs import WCS


def write(d, seed):
    rng = np.random.default_rng(seed)
    # int16 with scaling and blanks: the raw values are written as they are, then the scaling
    # keywords are added without astropy rescaling the data.
    raw = rng.integers(-32767, 32767, size=(7, 11), dtype=np.int16)
    raw[2, 3] = raw[6, 10] = -32768
    path = f"{d}/int16.fits"
    fits.PrimaryHDU(raw).writeto(path, overwrite=True)
    with fits.open(path, mode="update", do_not_scale_image_data=True) as h:
        h[0].header["BSCALE"] = 0.25
        h[0].header["BZERO"] = 1000.0
        h[0].header["BLANK"] = -32768
        h[0].header["BUNIT"] = "MJy/sr"
        h[0].header["OBJECT"] = "test field"
    values = fits.getdata(path).astype("<f8")
    values.tofile(f"{d}/int16.expected")
    # The same image tile-compressed (RICE, lossless for integers) and gzip-compressed.
    with fits.open(path, do_not_scale_image_data=True) as h:
        comp = fits.CompImageHDU(h[0].data, header=h[0].header, compression_type="RICE_1")
        fits.HDUList([fits.PrimaryHDU(), comp]).writeto(f"{d}/rice.fits", overwrite=True)
        # GZIP_1 and GZIP_2 in 4 x 3 tiles: the last tile of each row and column is cut short.
        for kind in ("GZIP_1", "GZIP_2"):
            comp = fits.CompImageHDU(h[0].data, header=h[0].header, compression_type=kind, tile_shape=(3, 4))
            fits.HDUList([fits.PrimaryHDU(), comp]).writeto(f"{d}/{kind.lower().replace('_', '')}.fits",
                                                            overwrite=True)
    with open(path, "rb") as f, gzip.open(f"{d}/gzip.fits.gz", "wb") as g:
        g.write(f.read())

    data = rng.normal(1.0, 2.0, size=(9, 13)).astype(np.float32)
    data[4, 5] = np.nan
    hdr = fits.Header()
    hdr["CTYPE1"], hdr["CTYPE2"] = "RA---TAN", "DEC--TAN"
    hdr["CRPIX1"], hdr["CRPIX2"] = 6.5, 4.25
    hdr["CRVAL1"], hdr["CRVAL2"] = 83.633, 22.0145
    hdr["CD1_1"], hdr["CD1_2"], hdr["CD2_1"], hdr["CD2_2"] = -0.001, 0.0004, 0.0003, 0.0012
    hdr["RADESYS"] = "ICRS"
    # An empty primary HDU and the image as an extension.
    fits.HDUList([fits.PrimaryHDU(), fits.ImageHDU(data, header=hdr, name="DUST")]).writeto(
        f"{d}/float32_cd.fits", overwrite=True)
    fits.getdata(f"{d}/float32_cd.fits", ext=1).astype("<f8").tofile(f"{d}/float32_cd.expected")

    # A float64 image quantized to 4-byte integers (a ZSCALE column), GZIP_2 in tiles of 16 x 16.
    f64 = rng.normal(0.0, 5.0, size=(20, 37))
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(f64, compression_type="GZIP_2", tile_shape=(16, 16))]).writeto(
        f"{d}/float64_gzip2.fits", overwrite=True)
    fits.getdata(f"{d}/float64_gzip2.fits", ext=1).astype("<f8").tofile(f"{d}/float64_gzip2.expected")


def check(inp, out, s):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        win = WCS(fits.getheader(inp, 0))
        wout = WCS(fits.getheader(out, 0))
    nx, ny = fits.getheader(out, 0)["NAXIS1"], fits.getheader(out, 0)["NAXIS2"]
    x, y = np.meshgrid(np.arange(1, nx + 1, dtype=float), np.arange(1, ny + 1, dtype=float))
    x, y = x.ravel(), y.ravel()
    lon, lat = wout.all_pix2world(x, y, 1)
    xin, yin = (x - 0.5) / s + 0.5, (y - 0.5) / s + 0.5
    bx, by = win.all_world2pix(lon, lat, 1)
    err = float(np.max(np.hypot(bx - xin, by - yin)))
    # The same from the other side: sky positions of the input coordinates, in output pixels.
    lon2, lat2 = win.all_pix2world(xin, yin, 1)
    ox, oy = wout.all_world2pix(lon2, lat2, 1)
    err_out = float(np.max(np.hypot(ox - x, oy - y))) / s
    print(f"max distance {err:.3g} input pixels ({err_out:.3g} the other way), {x.size} pixels")
    return 0 if max(err, err_out) < 1e-3 else 1


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
        sys.exit(0)
    sys.exit(check(sys.argv[2], sys.argv[3], float(sys.argv[4])))
