#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) into build-fuzz/ and runs each for N seconds on
# a seed corpus generated here; findings land in build-fuzz/artifacts/, each run's log in
# build-fuzz/logs/. Every target runs even when one fails; the script then exits non-zero, so a
# target that does not build or a run that finds a crash, leak or timeout fails CI (scripts/test.sh
# runs it for 5 s a target when CI is set). GENPERF_WERROR=ON makes compiler warnings errors.
#   scripts/fuzz.sh                 every target, 60 s each
#   scripts/fuzz.sh 300 gguf json   the named targets, 300 s each
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(json safetensors gguf fits png tokenizer jsonl checkpoint hf train)

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DGENPERF_FUZZ=ON -DGENPERF_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGENPERF_WERROR="${GENPERF_WERROR:-OFF}" >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

# Seeds: small valid files of each format, written with Python's struct (independent of genperf).
python3 - build-fuzz/seeds <<'PY'
import json, os, struct, sys
root = sys.argv[1]
def put(kind, name, data):
    os.makedirs(os.path.join(root, kind), exist_ok=True)
    with open(os.path.join(root, kind, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

docs = ['{}', '[]', '0', '-1.5e-7', '"a\\u00e9\\ud83d\\ude00\\n"', 'true', 'null',
        '{"architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "rope_scaling": null, "eos_token_id": [1, 2]}',
        '[[[[{"a": [1, 2, {"b": "c"}]}]]]]', '{"model": {"type": "BPE", "vocab": {"a": 0, "\\u0120b": 1}, "merges": ["a b"]}}']
for i, d in enumerate(docs):
    put("json", f"seed{i}", d)

def safetensors(tensors, meta=None):
    header, data = {}, b""
    if meta: header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data
put("safetensors", "seed0", safetensors([("w", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))], {"format": "pt"}))
put("safetensors", "seed1", safetensors([("a", "BF16", [3], b"\x80\x3f" * 3), ("b", "F16", [1, 1, 2], b"\x00\x3c" * 2),
                                         ("c", "I32", [0], b"")]))
put("safetensors", "seed2", safetensors([]))
# genperf's quantized tensors: U8 bytes described by "genperf.quant.<name>" = "<format> <dims>"
# (Q8_0: 34-byte blocks of 32, an f16 scale then 32 int8; Q4_K: 144-byte blocks of 256).
q8 = struct.pack("<e", 0.5) + bytes(range(32))
put("safetensors", "seed3", safetensors([("q", "U8", [2, 34], q8 * 2), ("k", "U8", [1, 144], b"\1" * 144),
                                         ("n", "F32", [2], struct.pack("<2f", 1, 1))],
                                        {"format": "pt", "genperf.quant.q": "q8_0 2 32", "genperf.quant.k": "q4_k 1 256"}))
# Hugging Face FP8: F8_E4M3 / F8_E5M2 codes with their scales.
put("safetensors", "seed4", safetensors([("w", "F8_E4M3", [2, 32], bytes(range(64))),
                                         ("w_scale", "F32", [2, 1], struct.pack("<2f", 0.5, 2)),
                                         ("v", "F8_E5M2", [1, 32], bytes(range(100, 132))),
                                         ("v_scale_inv", "BF16", [], b"\x80\x3f")]))

def gstr(s): b = s.encode(); return struct.pack("<Q", len(b)) + b
def kv(key, t, payload): return gstr(key) + struct.pack("<I", t) + payload
def gguf(kvs, tensors, align=32):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    infos, data = b"", b""
    for name, dims, t, raw in tensors:
        data += b"\0" * (-len(data) % align)
        infos += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", t, len(data))
        data += raw
    out += infos
    return out + b"\0" * (-len(out) % align) + data
kvs = [kv("general.architecture", 8, gstr("llama")), kv("general.alignment", 4, struct.pack("<I", 32)),
       kv("a.u8", 0, b"\x07"), kv("a.i8", 1, b"\xf9"), kv("a.u16", 2, struct.pack("<H", 7)),
       kv("a.i16", 3, struct.pack("<h", -7)), kv("a.i32", 5, struct.pack("<i", -7)),
       kv("a.f32", 6, struct.pack("<f", 0.5)), kv("a.bool", 7, b"\x01"), kv("a.u64", 10, struct.pack("<Q", 7)),
       kv("a.i64", 11, struct.pack("<q", -7)), kv("a.f64", 12, struct.pack("<d", 0.25)),
       kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 2) + gstr("a") + gstr("b")),
       kv("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 2) + struct.pack("<2f", 0, -1)),
       kv("nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 8, 1) + gstr("x"))]
put("gguf", "seed0", gguf(kvs, [("token_embd.weight", [2, 3], 0, struct.pack("<6f", *range(6))),
                               ("h", [4], 1, b"\x00\x3c" * 4), ("b", [2], 30, b"\x80\x3f" * 2),
                               ("q", [256], 12, b"\0" * 144)]))
put("gguf", "seed1", gguf(kvs[:1], []))
# Tokenizers (fuzz_tokenizer: the first byte picks the reader, even SentencePiece, odd tokenizer.json).
def varint(v):
    v &= (1 << 64) - 1
    out = b""
    while v >= 0x80:
        out += bytes([0x80 | (v & 0x7F)]); v >>= 7
    return out + bytes([v])
def pvar(f, v): return varint(f << 3) + varint(v)
def pbytes(f, b): b = b.encode() if isinstance(b, str) else b; return varint(f << 3 | 2) + varint(len(b)) + b
def pf32(f, x): return varint(f << 3 | 5) + struct.pack("<f", x)
def spm(model_type, normal):
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    pieces += [("<0x%02X>" % b, 0.0, 6) for b in range(256)]
    pieces += [(t, -float(i), 1) for i, t in enumerate(normal)]
    out = b"".join(pbytes(1, pbytes(1, t) + pf32(2, sc) + pvar(3, ty)) for t, sc, ty in pieces)
    trainer = pvar(3, model_type) + pvar(35, 1) + pvar(40, 0) + pvar(41, 1) + pvar(42, 2) + pvar(43, -1)
    norm = pbytes(1, "identity") + pvar(3, 1) + pvar(4, 0) + pvar(5, 1)
    return out + pbytes(2, trainer) + pbytes(3, norm)
words = ["\u2581", "\u2581H", "\u2581w", "e", "l", "o", "r", "d", "ll", "\u2581Hello", "\u2581world", "a", "\u2581t", "he"]
put("tokenizer", "seed0", b"\0" + spm(1, words))   # unigram
put("tokenizer", "seed1", b"\2" + spm(2, words))   # BPE
def byte_chars():
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, n = {}, 0
    for b in range(256):
        if b in keep: out[b] = chr(b)
        else: out[b] = chr(256 + n); n += 1
    return out
bc = byte_chars()
vocab = {bc[b]: b for b in range(256)}
merges = ["t h", "th e", "\u0120 t", "a n", "\u0120 w", "o r"]
for m in merges: vocab[m.replace(" ", "")] = len(vocab)
eot = len(vocab)
bpe = {"version": "1.0", "model": {"type": "BPE", "vocab": vocab, "merges": merges},
       "added_tokens": [{"id": eot, "content": "<|endoftext|>", "special": True}],
       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
       "decoder": {"type": "ByteLevel"}}
put("tokenizer", "seed2", b"\1" + json.dumps(bpe).encode())
bpe2 = dict(bpe, pre_tokenizer={"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\s?\\p{L}+|\\s?\\p{N}{1,3}|\\s+"}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
    normalizer={"type": "NFC"},
    post_processor={"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                                             {"Sequence": {"id": "A", "type_id": 0}}]})
put("tokenizer", "seed3", b"\3" + json.dumps(bpe2).encode())

# JSONL readers (fuzz_jsonl: the first byte picks 0 MC tasks, 1 and 2 prompt/response, 3 config.json).
mc = "\n".join(json.dumps(r) for r in [{"context": "The sky is", "choices": [" blue", " green"], "gold": 0},
                                       {"context": "2 + 2 =", "choices": [" 3", " 4", " 5"], "gold": 1}]) + "\n"
put("jsonl", "seed0", b"\0" + mc.encode())
pr = "\n".join(json.dumps(r) for r in [{"prompt": "Q: the capital of France?\nA:", "response": " Paris"},
                                       {"prompt": "", "response": "the the an " * 8}]) + "\n\n"
put("jsonl", "seed1", b"\1" + pr.encode())
put("jsonl", "seed2", b"\2" + pr.encode())
cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 128,
       "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
       "bos_token_id": 1, "eos_token_id": [2, 3],
       "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 64}}
put("jsonl", "seed3", b"\3" + json.dumps(cfg).encode())
# A sensitivity map as `genperf sensitivity` writes it: 4 tensors x 3 formats.
sm_tensors = [("model.embed_tokens.weight", -1, "embed", 1024), ("model.layers.0.self_attn.q_proj.weight", 0, "q", 1024),
              ("model.layers.0.mlp.down_proj.weight", 0, "down", 2048), ("lm_head.weight", -1, "head", 1024)]
sm_formats = [("q2_k", 2.625), ("q4_k", 4.5), ("q8_0", 8.5)]
sm = {"kind": "genperf-sensitivity", "version": 1, "model": "m", "calib": "c.txt", "method": "imatrix", "ctx": 128,
      "tokens": 512, "reference_nll": 3.5, "reference_ppl": 33.1, "formats": [f for f, _ in sm_formats], "measured": True,
      "anchor": "", "total_source_bytes": 2 * 5120 + 256, "quantizable_elements": 5120,
      "correlation": {"measure": "spearman(proxy, kl)", "all": 0.8, "by_format": {f: 0.7 for f, _ in sm_formats}},
      "seconds": 1.5, "notes": [],
      "tensors": [{"name": n, "layer": l, "kind": k, "elements": e, "source_dtype": "bf16", "source_bytes": 2 * e}
                  for n, l, k, e in sm_tensors],
      "entries": [{"tensor": n, "layer": l, "kind": k, "format": f, "bpw": b, "bytes": int(e * b / 8),
                   "kl": 0.1 / b ** 3 * (i + 1), "dloss": 0.01 / b, "proxy": 0.2 / b ** 3, "measured": True}
                  for i, (n, l, k, e) in enumerate(sm_tensors) for f, b in sm_formats]}
put("jsonl", "seed4", b"\4" + json.dumps(sm, indent=1).encode())

# A whole model (fuzz_checkpoint): a one-layer llama GGUF, d = 32, 2 heads of 16 (one KV head),
# FFN 32, a 32-token SentencePiece vocabulary; Q8_0 or Q4_0 matrices, F32 norms.
import random
rng = random.Random(1)
def q8_rows(rows, cols):
    return b"".join(struct.pack("<e", 0.02) + bytes(rng.randrange(256) for _ in range(32))
                    for _ in range(rows * cols // 32))
def q4_rows(rows, cols):
    return b"".join(struct.pack("<e", 0.05) + bytes(rng.randrange(256) for _ in range(16))
                    for _ in range(rows * cols // 32))
def u32(key, v): return kv(key, 4, struct.pack("<I", v))
def f32(key, v): return kv(key, 6, struct.pack("<f", v))
def model(quant, tied):
    enc, qt = (q8_rows, 8) if quant == "q8_0" else (q4_rows, 2)
    toks = ["<unk>", "<s>", "</s>", "\u2581"] + [chr(c) for c in range(ord("a"), ord("a") + 28 - 2)] + ["\u2581a", "\u2581t"]
    keys = [kv("general.architecture", 8, gstr("llama")), u32("llama.embedding_length", 32), u32("llama.block_count", 1),
            u32("llama.feed_forward_length", 32), u32("llama.attention.head_count", 2),
            u32("llama.attention.head_count_kv", 1), u32("llama.context_length", 64),
            f32("llama.attention.layer_norm_rms_epsilon", 1e-5), f32("llama.rope.freq_base", 10000.0),
            kv("tokenizer.ggml.model", 8, gstr("llama")),
            kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, len(toks)) + b"".join(gstr(t) for t in toks)),
            kv("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, len(toks)) + b"".join(struct.pack("<f", -i) for i in range(len(toks)))),
            kv("tokenizer.ggml.token_type", 9, struct.pack("<IQ", 5, len(toks)) + struct.pack("<%di" % len(toks), 2, 3, 3, *[1] * (len(toks) - 3))),
            u32("tokenizer.ggml.bos_token_id", 1), u32("tokenizer.ggml.eos_token_id", 2)]
    norm = struct.pack("<32f", *[1.0] * 32)
    t = [("token_embd.weight", [32, 32], qt, enc(32, 32)), ("blk.0.attn_norm.weight", [32], 0, norm),
         ("blk.0.attn_q.weight", [32, 32], qt, enc(32, 32)), ("blk.0.attn_k.weight", [32, 16], qt, enc(16, 32)),
         ("blk.0.attn_v.weight", [32, 16], qt, enc(16, 32)), ("blk.0.attn_output.weight", [32, 32], qt, enc(32, 32)),
         ("blk.0.ffn_norm.weight", [32], 0, norm), ("blk.0.ffn_gate.weight", [32, 32], qt, enc(32, 32)),
         ("blk.0.ffn_up.weight", [32, 32], qt, enc(32, 32)), ("blk.0.ffn_down.weight", [32, 32], qt, enc(32, 32)),
         ("output_norm.weight", [32], 0, norm)]
    if not tied: t.append(("output.weight", [32, 32], qt, enc(32, 32)))
    return gguf(keys, t)
put("checkpoint", "seed0", model("q8_0", False))
put("checkpoint", "seed1", model("q4_0", True))
# A Hugging Face directory (fuzz_hf: a 2-byte length, config.json, then model.safetensors): the
# same one-layer shape in BF16, in genperf's Q8_0 blocks (safetensors metadata), and in FP8 with
# per-channel scales.
hf_cfg = json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 32, "intermediate_size": 32,
                     "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 32,
                     "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
                     "tie_word_embeddings": False, "torch_dtype": "bfloat16"}).encode()
def bf16(n): return b"".join(struct.pack("<H", 0x3C00 + rng.randrange(256)) for _ in range(n))  # about 0.01
hf_mats = [("model.layers.0.self_attn.q_proj.weight", 32), ("model.layers.0.self_attn.k_proj.weight", 16),
           ("model.layers.0.self_attn.v_proj.weight", 16), ("model.layers.0.self_attn.o_proj.weight", 32),
           ("model.layers.0.mlp.gate_proj.weight", 32), ("model.layers.0.mlp.up_proj.weight", 32),
           ("model.layers.0.mlp.down_proj.weight", 32), ("lm_head.weight", 32)]
hf_norms = [("model.layers.0.input_layernorm.weight", "F32", [32], struct.pack("<32f", *[1.0] * 32)),
            ("model.layers.0.post_attention_layernorm.weight", "F32", [32], struct.pack("<32f", *[1.0] * 32)),
            ("model.norm.weight", "F32", [32], struct.pack("<32f", *[1.0] * 32)),
            ("model.embed_tokens.weight", "BF16", [32, 32], bf16(32 * 32))]
def hf(kind):
    tensors, meta = list(hf_norms), {"format": "pt"}
    for name, rows in hf_mats:
        if kind == "bf16":
            tensors.append((name, "BF16", [rows, 32], bf16(rows * 32)))
        elif kind == "q8_0":
            tensors.append((name, "U8", [rows, 34], q8_rows(rows, 32)))
            meta["genperf.quant." + name] = "q8_0 %d 32" % rows
        else:
            tensors.append((name, "F8_E4M3", [rows, 32], bytes(rng.randrange(0x30, 0x48) | rng.randrange(2) << 7
                                                              for _ in range(rows * 32))))
            tensors.append((name + "_scale", "F32", [rows, 1], struct.pack("<%df" % rows, *[0.01] * rows)))
    return struct.pack("<H", len(hf_cfg)) + hf_cfg + safetensors(tensors, meta)
for i, kind in enumerate(["bf16", "q8_0", "f8"]):
    put("hf", "seed%d" % i, hf(kind))
# FITS images: 80-character cards in 2880-byte header blocks, big-endian data padded to 2880.
def fits_hdu(cards, data=b""):
    h = b"".join(c.ljust(80).encode() for c in cards + ["END"])
    h += b" " * (-len(h) % 2880)
    return h + data + b"\0" * (-len(data) % 2880)
def fits_image(bitpix, shape, data, extra=(), ext=False):
    first = ["XTENSION= 'IMAGE   '"] if ext else ["SIMPLE  =                    T"]
    cards = first + ["BITPIX  = %d" % bitpix, "NAXIS   = %d" % len(shape)]
    cards += ["NAXIS%d  = %d" % (i + 1, n) for i, n in enumerate(shape)]
    if ext: cards += ["PCOUNT  = 0", "GCOUNT  = 1"]
    return fits_hdu(cards + list(extra), data)
wcs = ["CTYPE1  = 'RA---TAN'", "CTYPE2  = 'DEC--TAN'", "CRPIX1  = 2.5", "CRPIX2  = 2.0", "CRVAL1  = 83.6",
       "CRVAL2  = 22.0", "CD1_1   = -0.001", "CD1_2   = 0.0", "CD2_1   = 0.0", "CD2_2   = 0.001", "BUNIT   = 'MJy/sr  '"]
put("fits", "seed0", fits_image(-32, [4, 3], struct.pack(">12f", *[i * 0.5 for i in range(11)], float("nan")), wcs))
put("fits", "seed1", fits_image(16, [3, 2], struct.pack(">6h", -32768, 1, 2, 3, -4, 5),
                                ["BSCALE  = 0.25", "BZERO   = 100.0", "BLANK   = -32768", "CDELT1  = -0.05",
                                 "CDELT2  = 0.05", "CROTA2  = 10.0", "HISTORY seed", "OBJECT  = 'seed'"]))
put("fits", "seed2", fits_image(8, [0], b"", ["EXTEND  = T"]) +
    fits_image(-64, [2, 2], struct.pack(">4d", 1, 2, 3, 4), ["EXTNAME = 'DUST    '"], ext=True))
put("fits", "seed3", fits_image(32, [2, 2], struct.pack(">4i", 1, -2, 3, 1 << 30), ["BZERO   = 2147483648"]) +
    fits_image(64, [2, 1], struct.pack(">2q", -1, 1 << 40), ext=True))
put("fits", "seed4", fits_image(-32, [2, 2, 2], struct.pack(">8f", *range(8))))
# A tile-compressed image (GZIP_1, one tile): a binary table with one variable-length byte column.
import gzip
tile = gzip.compress(struct.pack(">6h", 1, 2, -3, 4, 5, -32768), mtime=0)
put("fits", "seed5", fits_image(8, [0], b"", ["EXTEND  = T"]) + fits_hdu(
    ["XTENSION= 'BINTABLE'", "BITPIX  = 8", "NAXIS   = 2", "NAXIS1  = 8", "NAXIS2  = 1", "PCOUNT  = %d" % len(tile),
     "GCOUNT  = 1", "TFIELDS = 1", "TTYPE1  = 'COMPRESSED_DATA'", "TFORM1  = '1PB(%d)'" % len(tile),
     "ZIMAGE  = T", "ZBITPIX = 16", "ZNAXIS  = 2", "ZNAXIS1 = 3", "ZNAXIS2 = 2", "ZTILE1  = 3", "ZTILE2  = 2",
     "ZCMPTYPE= 'GZIP_1  '", "BLANK   = -32768", "EXTNAME = 'COMPRESSED_IMAGE'"],
    struct.pack(">2i", len(tile), 0) + tile))
# PNG images: the signature, then chunks (length, type, data, CRC-32 of type and data); IDAT holds
# the zlib-deflated rows, each a filter byte and its samples.
import zlib
def png_chunk(kind, data): return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
def png(w, h, depth, color, rows, extra=b""):
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra + png_chunk(b"IDAT", zlib.compress(rows)) +
            png_chunk(b"IEND", b""))
put("png", "seed0", png(3, 2, 8, 0, b"\0\x00\x80\xff\x01\x10\x10\x10"))                   # 8-bit gray, Sub filter
put("png", "seed1", png(2, 2, 16, 2, b"\0" + bytes(range(12)) + b"\2" + bytes(range(12, 24))))  # 16-bit RGB, Up filter
put("png", "seed2", png(4, 1, 2, 3, b"\0\x1b", png_chunk(b"PLTE", bytes(range(12))) + png_chunk(b"tRNS", b"\x80")))
put("png", "seed3", png(2, 1, 8, 6, b"\0" + bytes(range(8)), png_chunk(b"tEXt", b"Title\0seed")))  # RGBA, text
PY

# genperf's own training files (a LoRA adapter, a trainer state) are written by genperf's writers.
if [[ " ${targets[*]} " == *" train "* ]]; then
  GENPERF_FUZZ_SEEDS=build-fuzz/seeds/train build-fuzz/fuzz/fuzz_train -runs=0 >/dev/null 2>&1
fi

mkdir -p build-fuzz/artifacts build-fuzz/logs
summary=() failed=()
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t log=build-fuzz/logs/$t.log
  mkdir -p "$corpus"
  echo "== fuzz_$t for ${secs}s" >&2
  status=0
  # cfitsio sizes its buffers from the header with malloc/calloc and reports a failed allocation
  # as an error (MEMORY_ALLOCATION): let a request beyond ASan's limit fail as it would without
  # ASan, instead of aborting. C++ allocations (genperf's own) still abort when too large.
  asan=""; [ "$t" = fits ] && asan="allocator_may_return_null=1"
  ASAN_OPTIONS="${asan}${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  LSAN_OPTIONS="suppressions=$PWD/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
    build-fuzz/fuzz/fuzz_$t -max_total_time="$secs" -rss_limit_mb=2048 -max_len=32768 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/artifacts/$t-" "$corpus" "build-fuzz/seeds/$t" 2>&1 | tee "$log" >&2 ||
    status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ "$status" -ne 0 ]; then failed+=("$t"); fi
  summary+=("$(printf '%-16s %5ss %12s executions  %s' "fuzz_$t" "$secs" "${execs:-?}" \
    "$([ "$status" -eq 0 ] && echo ok || echo "FAILED (exit $status, see $log)")")")
done
printf '%s\n' "== fuzz summary" "${summary[@]}" >&2
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${failed[*]} failed; inputs that reproduce it are in build-fuzz/artifacts/" >&2
  exit 1
fi
