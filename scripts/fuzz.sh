#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) into build-fuzz/ and runs each for N seconds on
# a seed corpus generated here; findings land in build-fuzz/artifacts/.
#   scripts/fuzz.sh                 every target, 60 s each
#   scripts/fuzz.sh 300 gguf json   the named targets, 300 s each
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(json safetensors gguf)

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DGENPERF_FUZZ=ON -DGENPERF_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
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
PY

mkdir -p build-fuzz/artifacts
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  mkdir -p "$corpus"
  echo "== fuzz_$t for ${secs}s" >&2
  build-fuzz/fuzz/fuzz_$t -max_total_time="$secs" -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/artifacts/$t-" "$corpus" "build-fuzz/seeds/$t"
done
