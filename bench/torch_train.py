#!/usr/bin/python3
"""The model `genperf bench train` trains, in PyTorch (Debian's python3-torch 1.13, eager), for
side-by-side training-speed comparisons (bench/compare_train.py). Never run in CI.

    /usr/bin/python3 bench/torch_train.py --shape default --batch 4 --seq 512 --precision f32 --threads 2

Benchmark mode prints one JSON record: full optimizer steps (zero grads, forward, loss, backward,
clip_grad_norm_ 1.0, AdamW betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices only, as
genperf) timed after --warmup steps: median/min/max of --reps, tokens/s, the FLOPs of a step by
genperf's train_step_flops formula, parameters, peak RSS, the BLAS library torch loaded (with
OpenBLAS's threading and thread count, and torch's), and torch's f32 and bf16 matmul GFLOP/s at
2048^3 measured after the steps.

Check mode (--check DIR) loads a HF directory of F32 weights that genperf wrote, runs --steps
steps at a constant --lr on given tokens/targets ([B, T] row-major, target -1 = not scored) and
prints the loss and gradient norm before each step, so that tests/bench/test_torch_train_parity
can hold this model to genperf's.

The model: HF Llama (RMSNorm, rotate-half RoPE, GQA, SwiGLU, untied head), initialized as
genperf's TrainModel: matrices N(0, 0.02^2), o_proj/down_proj scaled by 1/sqrt(2 L), norms 1.
Attention is the explicit formulation (scores, causal mask, float32 softmax as HF's eager
LlamaAttention): torch 1.13 has no scaled_dot_product_attention (it arrived in 2.0), so this is
the "naive" attention of genperf. bf16 is torch.autocast('cpu', dtype=torch.bfloat16), PyTorch's
mixed precision on CPU: matmuls in bf16, f32 master weights, gradients and optimizer state.

Which BLAS torch's f32 matmuls run on matters more than anything else here: Debian's torch calls
libblas.so.3, which is the netlib reference BLAS (a few GFLOP/s) unless an optimized one
(libopenblas0-openmp) is installed or put first on LD_LIBRARY_PATH. The record names the library
and "blas_reference" says when it is the reference one; bf16 matmuls go through oneDNN instead.
"""
import argparse, json, math, os, resource, statistics, struct, sys, time

# name: vocab, dim, ffn, layers, heads, kv_heads (src/models/llama/presets.cpp; the context only
# bounds sequence length, which this model does not check).
SHAPES = {
    "110m": (32000, 768, 2048, 12, 12, 12),
    "default": (4096, 256, 768, 6, 8, 4),
    "tiny": (256, 64, 176, 2, 4, 2),
}


def train_step_flops(vocab, dim, ffn, layers, heads, kv_heads, head_dim, B, T):
    """genperf's train_step_flops (include/genperf/train.h): 6 FLOPs per matmul parameter per
    token (forward and both backward products; embeddings are a lookup, the head a matmul) plus
    three times the causal attention forward, 4 H D per visible key."""
    q, kv = heads * head_dim, kv_heads * head_dim
    per_layer = dim * (q + 2 * kv) + q * dim + 3 * dim * ffn
    matmul_params = layers * per_layer + vocab * dim
    attn = 4.0 * heads * head_dim * (T * (T + 1) / 2.0)
    return 6.0 * matmul_params * B * T + 3.0 * B * layers * attn


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="default", choices=SHAPES)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--check", metavar="DIR", help="check mode: HF directory of F32 weights")
    ap.add_argument("--tokens", help="check mode: comma-separated token ids, [B, T]")
    ap.add_argument("--targets", help="check mode: comma-separated targets, [B, T], -1 = not scored")
    ap.add_argument("--steps", type=int, default=3, help="check mode: optimizer steps")
    ap.add_argument("--blas-only", action="store_true", help="only print the BLAS library torch loads")
    a = ap.parse_args()
    if a.threads < 1 or a.batch < 1 or a.seq < 1 or a.reps < 1 or a.warmup < 0:
        ap.error("--threads, --batch, --seq and --reps must be positive, --warmup not negative")
    return a


A = parse_args()
# Before torch loads: OpenMP and OpenBLAS read their thread counts when they start.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(A.threads)
import torch  # noqa: E402

F = torch.nn.functional


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Module(torch.nn.Module):  # a plain container, so names nest as HF's do
    pass


class Llama(torch.nn.Module):
    """Parameter names are Hugging Face's (model.layers.0.self_attn.q_proj.weight, ...)."""

    def __init__(self, vocab, dim, ffn, layers, heads, kv_heads, head_dim=None, eps=1e-5, theta=10000.0):
        super().__init__()
        self.h, self.kv = heads, kv_heads
        self.d = head_dim or dim // heads
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)
        self.model = Module()
        self.model.embed_tokens = torch.nn.Embedding(vocab, dim)
        self.model.layers = torch.nn.ModuleList()
        for _ in range(layers):
            l = Module()
            l.input_layernorm, l.post_attention_layernorm = RMSNorm(dim, eps), RMSNorm(dim, eps)
            l.self_attn = Module()
            at = l.self_attn
            at.q_proj, at.k_proj = lin(dim, heads * self.d), lin(dim, kv_heads * self.d)
            at.v_proj, at.o_proj = lin(dim, kv_heads * self.d), lin(heads * self.d, dim)
            l.mlp = Module()
            l.mlp.gate_proj, l.mlp.up_proj, l.mlp.down_proj = lin(dim, ffn), lin(dim, ffn), lin(ffn, dim)
            self.model.layers.append(l)
        self.model.norm = RMSNorm(dim, eps)
        self.lm_head = lin(dim, vocab)
        inv = 1.0 / (theta ** (torch.arange(0, self.d, 2, dtype=torch.float32) / self.d))
        self.register_buffer("inv_freq", inv, persistent=False)

    def init_like_genperf(self, seed):
        """TrainModel's scheme (not its random stream): N(0, 0.02^2), residual projections
        scaled by 1/sqrt(2 L), norm weights 1."""
        g = torch.Generator().manual_seed(seed)
        resid = 0.02 / math.sqrt(2 * len(self.model.layers))
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 1:
                    p.fill_(1.0)
                else:
                    std = resid if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                    p.normal_(0.0, std, generator=g)

    def rope(self, x, cos, sin):  # x [B, heads, T, D]; rotate-half pairing (i, i + D/2)
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

    def forward(self, ids):
        B, T = ids.shape
        ang = torch.arange(T, dtype=torch.float32)[:, None] * self.inv_freq[None, :]
        cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        x = self.model.embed_tokens(ids)
        for l in self.model.layers:
            at = l.self_attn
            h = l.input_layernorm(x)
            q = at.q_proj(h).view(B, T, self.h, self.d).transpose(1, 2)
            k = at.k_proj(h).view(B, T, self.kv, self.d).transpose(1, 2)
            v = at.v_proj(h).view(B, T, self.kv, self.d).transpose(1, 2)
            q, k = self.rope(q, cos.to(q.dtype), sin.to(q.dtype)), self.rope(k, cos.to(k.dtype), sin.to(k.dtype))
            if self.kv != self.h:  # GQA: query head i reads kv head i // (heads / kv_heads)
                k, v = k.repeat_interleave(self.h // self.kv, 1), v.repeat_interleave(self.h // self.kv, 1)
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d)
            p = s.masked_fill(mask, float("-inf")).softmax(-1, dtype=torch.float32).to(q.dtype)
            a = torch.matmul(p, v).transpose(1, 2).reshape(B, T, self.h * self.d)
            x = x + at.o_proj(a)
            h = l.post_attention_layernorm(x)
            x = x + l.mlp.down_proj(F.silu(l.mlp.gate_proj(h)) * l.mlp.up_proj(h))
        return self.lm_head(self.model.norm(x))


def make_optimizer(m, lr):
    # genperf decays matrices only (ParamInfo::decay); AdamW's 1.13 CPU default is the
    # single-tensor loop (foreach defaults on for CUDA only; no fused AdamW before 2.0).
    decay = [p for p in m.parameters() if p.dim() >= 2]
    rest = [p for p in m.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


def step(m, opt, ids, targets, precision):
    """One optimizer step as genperf's train_step; returns (loss, grad norm before clipping)."""
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        logits = m(ids)
    loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-1)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    opt.step()
    return float(loss), float(norm)


def blas_library():
    """The BLAS libraries mapped into this process (/proc/self/maps), by their real paths: what
    torch's f32 matmuls actually call, whatever update-alternatives or LD_LIBRARY_PATH say."""
    torch.ones(8, 8) @ torch.ones(8, 8)  # BLAS is linked at load; make sure it is mapped
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "blas" in os.path.basename(path).lower() or "libmkl" in path:
                libs.add(os.path.realpath(path))
    return sorted(libs)


def openblas_info(libs):
    """OpenBLAS's own account of itself where it is the BLAS: its kernel set (the CPU it took this
    one for), its threading (serial, pthreads or OpenMP: a pthreads OpenBLAS under torch's OpenMP
    threads puts two pools of spinning threads on the same cores) and its thread count."""
    import ctypes
    path = next((p for p in libs if "openblas" in os.path.basename(p)), None)
    if not path:
        return None
    lib = ctypes.CDLL(path)  # already loaded: the same handle
    lib.openblas_get_corename.restype = lib.openblas_get_config.restype = ctypes.c_char_p
    return {"core": lib.openblas_get_corename().decode(), "config": lib.openblas_get_config().decode(),
            "threading": {0: "serial", 1: "pthreads", 2: "openmp"}.get(lib.openblas_get_parallel(), "?"),
            "threads": lib.openblas_get_num_threads()}


def matmul_gflops(dtype, n=2048, reps=5):
    """GFLOP/s of torch.matmul at n^3 (best of reps after one warm-up): f32 runs on the BLAS, bf16
    on oneDNN. Set against genperf's measured GEMM peak, it shows a BLAS that runs far below the
    machine, whatever its name."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g).to(dtype), torch.randn(n, n, generator=g).to(dtype)
    a @ b
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2.0 * n ** 3 / best * 1e-9


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            sys.exit(f"torch_train: {path}: {name} is {info['dtype']}, expected F32")
        b, e = info["data_offsets"]
        out[name] = torch.frombuffer(bytearray(raw[8 + n + b:8 + n + e]), dtype=torch.float32).reshape(info["shape"])
    return out


def check(a):
    with open(os.path.join(a.check, "config.json")) as f:
        c = json.load(f)
    if c.get("tie_word_embeddings") or c.get("attention_bias") or c.get("rope_scaling"):
        sys.exit("torch_train: --check supports untied, bias-free models without rope scaling")
    shape = (c["vocab_size"], c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"],
             c["num_attention_heads"], c.get("num_key_value_heads") or c["num_attention_heads"])
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    m = Llama(*shape, head_dim=head_dim, eps=c["rms_norm_eps"], theta=c["rope_theta"])
    m.load_state_dict(read_safetensors(os.path.join(a.check, "model.safetensors")), strict=True)
    ids = torch.tensor([int(t) for t in a.tokens.split(",")]).view(a.batch, a.seq)
    targets = torch.tensor([int(t) for t in a.targets.split(",")]).view(a.batch, a.seq)
    opt = make_optimizer(m, a.lr)
    losses, norms = [], []
    for _ in range(a.steps):
        loss, norm = step(m, opt, ids, targets, a.precision)
        losses.append(loss)
        norms.append(norm)
    print(json.dumps({"losses": losses, "grad_norms": norms, "parameters": sum(p.numel() for p in m.parameters()),
                      "flops_per_step": train_step_flops(*shape, head_dim, a.batch, a.seq)}))


def blas_record(matmul=True):
    """The BLAS torch loaded, the thread counts in force, and (matmul) the measured f32 and bf16
    matmul GFLOP/s."""
    libs = blas_library()
    r = {"blas": libs, "blas_reference": any(os.path.dirname(p).endswith("/blas") for p in libs),  # Debian's netlib path
         "openblas": openblas_info(libs),
         "thread_settings": {"torch": torch.get_num_threads(), "torch_interop": torch.get_num_interop_threads(),
                             **{v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")},
                             "cpus_allowed": len(os.sched_getaffinity(0))}}
    if matmul:
        r["matmul_gflops"] = {"f32": matmul_gflops(torch.float32), "bf16": matmul_gflops(torch.bfloat16)}
    return r


def bench(a):
    torch.manual_seed(a.seed)
    shape = SHAPES[a.shape]
    m = Llama(*shape)
    m.init_like_genperf(a.seed)
    opt = make_optimizer(m, a.lr)
    tok = torch.randint(0, shape[0], (a.batch, a.seq + 1))
    ids, targets = tok[:, :-1].contiguous(), tok[:, 1:].contiguous()
    for _ in range(a.warmup):
        step(m, opt, ids, targets, a.precision)
    times = []
    for _ in range(a.reps):
        t = time.perf_counter()
        step(m, opt, ids, targets, a.precision)
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    n, params = a.batch * a.seq, sum(p.numel() for p in m.parameters())
    flops = train_step_flops(*shape, shape[1] // shape[4], a.batch, a.seq)
    blas = blas_record()  # after the timed steps, so that the matmul check does not disturb them
    if blas["blas_reference"] and a.precision == "f32":
        print("torch_train: WARNING: f32 matmuls run on the reference BLAS " + ", ".join(blas["blas"]) +
              " (install libopenblas0-openmp or put it on LD_LIBRARY_PATH)", file=sys.stderr)
    print(json.dumps({
        "engine": "torch", "torch": torch.__version__, "shape": a.shape, "precision": a.precision,
        "attention": "naive", "batch": a.batch, "seq": a.seq, "threads": torch.get_num_threads(), "seed": a.seed,
        "parameters": params, "step_seconds": {"median": med, "min": min(times), "max": max(times), "samples": times},
        "tokens_per_s": n / med, "tokens_per_s_min": n / max(times), "tokens_per_s_max": n / min(times),
        "flops_per_step": flops, "gflops": flops / med * 1e-9,
        "memory": {"weights": 4 * params, "grads": 4 * params, "optimizer": 8 * params},
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        **blas, "mkldnn": torch.backends.mkldnn.is_available()}))


if __name__ == "__main__":
    torch.set_num_threads(A.threads)
    if A.blas_only:
        print(json.dumps(blas_record()))
    elif A.check:
        if not (A.tokens and A.targets):
            sys.exit("torch_train: --check needs --tokens and --targets")
        check(A)
    else:
        bench(A)
