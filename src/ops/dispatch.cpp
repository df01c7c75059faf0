// The ops::X entry points: check the arguments (the same checks ops::ref::X makes), then hand the
// work to the backend of the tensors' device (ops/backend.h): the CPU one picks a kernel by
// weight type and ISA (src/backend/cpu/).
#include <initializer_list>
#include <string>

#include "genperf/error.h"
#include "ops/backend.h"
#include "ops/checks.h"
#include "genperf/ops.h"

namespace genperf::ops {
namespace detail {
namespace {

// Activations are f32 rows: any rank (the leading dimensions collapse into rows, checks.h),
// innermost dimension contiguous. A KV cache (cache) may
// also hold f16, bf16 or Q8_0, and be 3-D (head-major). Any device: the backend table is chosen
// afterwards from the tensors' common device (backend_for).
void check_rows(const char* op, const char* name, const Tensor& t, bool cache) {
  GP_CHECK(t.defined(), "[", op, "] ", name, " is an undefined tensor");
  const DType dt = t.dtype();
  if (cache) {
    GP_CHECK(t.ndim() >= 1 && t.ndim() <= 3, "[", op, "] ", name, " ", t.describe(),
             ": expected rows [S, Hkv*D] or head-major [Hkv, S, D]");
    GP_CHECK(dt == DType::F32 || dt == DType::F16 || dt == DType::BF16 || dt == DType::Q8_0, "[", op,
             "] ", name, " ", t.describe(), ": expected f32, f16, bf16 or q8_0");
  } else {
    GP_CHECK(t.ndim() >= 1, "[", op, "] ", name, " ", t.describe(), ": expected a tensor of rows");
    GP_CHECK(dt == DType::F32, "[", op, "] ", name, " ", t.describe(), ": expected f32");
    for (int d = 0; d + 2 < t.ndim(); ++d)
      GP_CHECK(t.stride(d) == t.stride(d + 1) * size_t(t.size(d + 1)), "[", op, "] ", name, " ",
               t.describe(), ": leading dimension ", d, " does not collapse into rows (stride ",
               t.stride(d), " bytes, expected ", t.stride(d + 1) * size_t(t.size(d + 1)), ")");
  }
  // Block formats have no per-element stride: their rows are whole blocks.
  const auto& tr = traits(dt);
  GP_CHECK(t.size(-1) <= 1 || t.stride(-1) == (tr.block_size == 1 ? tr.block_bytes : 0), "[", op, "] ",
           name, " ", t.describe(), ": innermost dimension must be contiguous");
}

void check_act(const char* op, const char* name, const Tensor& t) { check_rows(op, name, t, false); }
void check_cache(const char* op, const char* name, const Tensor& t) { check_rows(op, name, t, true); }

// A float-typed vector (norm weight, bias) of n elements, contiguous.
void check_vec(const char* op, const char* name, const Tensor& t, int64_t n) {
  GP_CHECK(t.defined(), "[", op, "] ", name, " is an undefined tensor");
  GP_CHECK(t.ndim() == 1 && t.size(0) == n, "[", op, "] ", name, " ", t.describe(), ": expected ",
           n, " elements");
  GP_CHECK(traits(t.dtype()).is_float, "[", op, "] ", name, " ", t.describe(),
           ": expected a float type");
  GP_CHECK(t.is_contiguous(), "[", op, "] ", name, " ", t.describe(), " must be contiguous");
}

void check_same_shape(const char* op, const char* an, const Tensor& a, const char* bn,
                      const Tensor& b) {
  GP_CHECK(a.shape() == b.shape(), "[", op, "] ", an, " ", a.describe(), " and ", bn, " ",
           b.describe(), ": shapes differ");
}

// Weights or tables: 2-D in any type with a to_f32 row conversion, rows contiguous.
void check_matrix(const char* op, const char* name, const Tensor& t) {
  GP_CHECK(t.defined(), "[", op, "] ", name, " is an undefined tensor");
  GP_CHECK(t.ndim() == 2, "[", op, "] ", name, " ", t.describe(), ": expected a 2-D tensor");
  const auto& tr = traits(t.dtype());
  GP_CHECK(t.dtype() != DType::I32, "[", op, "] ", name, " ", t.describe(),
           ": integer weights are not supported");
  GP_CHECK(tr.block_size > 1 || t.size(1) <= 1 || t.stride(1) == tr.block_bytes, "[", op, "] ",
           name, " ", t.describe(), ": rows must be contiguous");
  GP_CHECK(t.size(1) % tr.block_size == 0, "[", op, "] ", name, " ", t.describe(),
           ": row length is not a multiple of the block size ", tr.block_size);
}

}  // namespace

void check_on_cpu(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    GP_CHECK(!t || !t->defined() || t->device() == Device::CPU, "[", op, "] ", t->describe(), " is on ",
             device_name(t->device()), "; the reference runs on the CPU");
}

LinearDims check_linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  check_act("linear", "x", x);
  check_matrix("linear", "w", w);
  check_act("linear", "y", y);
  GP_CHECK(x.size(-1) == w.size(1), "[linear] x ", x.describe(), " and w ", w.describe(),
           ": inner dimensions differ");
  const int64_t T = rows_of(x), K = w.size(1), N = w.size(0);
  GP_CHECK(w.layout() == Layout::kRows || (w.size(0) % 16 == 0 && w.is_contiguous()), "[linear] w ",
           w.describe(), ": a packed weight must be whole (ops::prepare_weight's result)");
  GP_CHECK(rows_of(y) == T && y.size(-1) == N && y.ndim() == x.ndim(), "[linear] y ", y.describe(),
           ": expected [", T, ", ", N, "] for x ", x.describe(), " and w ", w.describe());
  if (bias) check_vec("linear", "bias", *bias, N);
  return {T, K, N};
}

void check_embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) {
  check_matrix("embedding", "table", table);
  GP_CHECK(table.layout() == Layout::kRows, "[embedding] table ", table.describe(),
           " is packed for linear (ops::prepare_weight); an embedding reads the stored rows");
  check_act("embedding", "out", out);
  const int64_t V = table.size(0), K = table.size(1);
  GP_CHECK(rows_of(out) == int64_t(ids.size()) && out.size(-1) == K, "[embedding] out ",
           out.describe(), ": expected [", ids.size(), ", ", K, "] for table ", table.describe());
  for (size_t t = 0; t < ids.size(); ++t)
    GP_CHECK(ids[t] >= 0 && ids[t] < V, "[embedding] id ", ids[t], " at position ", t,
             " is outside the table's ", V, " rows");
}

void check_rms_norm(const Tensor& x, const Tensor& w, const Tensor& y) {
  check_act("rms_norm", "x", x);
  check_act("rms_norm", "y", y);
  check_same_shape("rms_norm", "x", x, "y", y);
  check_vec("rms_norm", "w", w, x.size(-1));
}

int64_t check_rope(const Tensor& x, int64_t nheads, std::span<const int32_t> pos,
                   std::span<const float> inv_freq) {
  check_act("rope", "x", x);
  const int64_t D = 2 * int64_t(inv_freq.size());
  GP_CHECK(nheads > 0 && D > 0 && x.size(-1) == nheads * D, "[rope] x ", x.describe(),
           ": expected ", nheads, " heads of ", D, " (2 x ", inv_freq.size(),
           " frequencies) per row");
  GP_CHECK(int64_t(pos.size()) == rows_of(x), "[rope] ", pos.size(), " positions for x ",
           x.describe());
  return D;
}

void check_silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  check_act("silu_mul", "gate", gate);
  check_act("silu_mul", "up", up);
  check_act("silu_mul", "out", out);
  check_same_shape("silu_mul", "gate", gate, "up", up);
  check_same_shape("silu_mul", "gate", gate, "out", out);
}

void check_add(const Tensor& x, const Tensor& y) {
  check_act("add_inplace", "x", x);
  check_act("add_inplace", "y", y);
  check_same_shape("add_inplace", "x", x, "y", y);
}

void check_store_rows(const Tensor& src, const Tensor& dst) {
  check_act("store_rows", "src", src);
  check_cache("store_rows", "dst", dst);
  if (dst.ndim() == 3)
    GP_CHECK(src.ndim() == 2 && dst.size(1) == src.size(0) && dst.size(0) * dst.size(2) == src.size(1),
             "[store_rows] dst ", dst.describe(), ": expected [H, T, D] heads of src ", src.describe());
  else
    check_same_shape("store_rows", "src", src, "dst", dst);
}

AttentionDims check_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads,
                              int64_t nkv_heads, int64_t q_pos0, const Tensor& out) {
  check_act("attention", "q", q);
  check_cache("attention", "k", k);
  check_cache("attention", "v", v);
  check_act("attention", "out", out);
  GP_CHECK(k.dtype() == v.dtype(), "[attention] k ", k.describe(), " and v ", v.describe(),
           ": the cache's keys and values must share one type");
  GP_CHECK(nheads > 0 && nkv_heads > 0 && nheads % nkv_heads == 0, "[attention] ", nheads,
           " query heads is not a multiple of ", nkv_heads, " key/value heads");
  GP_CHECK(q.size(-1) % nheads == 0, "[attention] q ", q.describe(),
           ": row length is not a multiple of ", nheads, " heads");
  const int64_t D = q.size(-1) / nheads, T = rows_of(q);
  const bool head_major = k.ndim() == 3;
  const int64_t S = head_major ? k.size(1) : rows_of(k);
  if (head_major) {
    GP_CHECK(k.size(0) == nkv_heads && k.size(2) == D, "[attention] k ", k.describe(), ": expected [",
             nkv_heads, ", S, ", D, "] for q ", q.describe(), " with ", nheads, " heads");
    GP_CHECK(v.stride(0) == k.stride(0), "[attention] head-major k ", k.describe(), " and v ",
             v.describe(), ": heads must be the same number of bytes apart");
  }
  else
    GP_CHECK(k.size(-1) == nkv_heads * D, "[attention] k ", k.describe(), ": expected rows of ",
             nkv_heads, " x ", D, " for q ", q.describe(), " with ", nheads, " heads");
  check_same_shape("attention", "k", k, "v", v);
  check_same_shape("attention", "q", q, "out", out);
  GP_CHECK(k.dtype() != DType::Q8_0 || D % 32 == 0, "[attention] k ", k.describe(),
           ": a q8_0 cache needs a head dimension that is a multiple of 32, not ", D);
  GP_CHECK(q_pos0 >= 0 && q_pos0 + T <= S, "[attention] queries at positions ", q_pos0, "..",
           q_pos0 + T - 1, " need keys up to ", q_pos0 + T, ", cache k ", k.describe(), " has ", S);
  return {T, S, D};
}

}  // namespace detail

namespace {

// The backend of an op's tensors, which must all be on one device ("[linear] w bf16[32, 64] is
// on cuda, x f32[7, 64] on cpu").
struct Arg {
  const char* name;
  const Tensor* t;  // null or undefined: not taken into account (an absent bias)
};
const Backend& backend_for(const char* op, std::initializer_list<Arg> args) {
  const Arg* first = nullptr;
  for (const Arg& a : args) {
    if (!a.t || !a.t->defined()) continue;
    if (!first) first = &a;
    GP_CHECK(a.t->device() == first->t->device(), "[", op, "] ", a.name, " ", a.t->describe(),
             " is on ", device_name(a.t->device()), ", ", first->name, " ", first->t->describe(),
             " on ", device_name(first->t->device()), ": an op's tensors must share one device");
  }
  return backend(first ? first->t->device() : Device::CPU);
}

}  // namespace

const Backend& backend(Device d) { return d == Device::CUDA ? cuda_backend() : cpu_backend(); }

void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  const auto d = detail::check_linear(x, w, bias, y);
  const Backend& b = backend_for("linear", {{"x", &x}, {"w", &w}, {"bias", bias}, {"y", &y}});
  backend_kernel(b.linear, "linear", b)(x, w, bias, y, d.T, d.K, d.N);
}

void linear_many(const Tensor& x, std::span<const LinearOut> outs) {
  int64_t T = 0, K = 0;
  for (const LinearOut& o : outs) {
    GP_CHECK(o.w && o.y, "[linear_many] an output without its weight or result tensor");
    const auto d = detail::check_linear(x, *o.w, o.bias, *o.y);
    backend_for("linear_many", {{"x", &x}, {"w", o.w}, {"bias", o.bias}, {"y", o.y}});
    T = d.T;
    K = d.K;
  }
  const Backend& b = backend_for("linear_many", {{"x", &x}});
  if (!outs.empty()) backend_kernel(b.linear_many, "linear_many", b)(x, outs, T, K);
}

Tensor prepare_weight(const Tensor& w) {
  GP_CHECK(w.defined(), "[prepare_weight] undefined tensor");
  const Backend& b = backend_for("prepare_weight", {{"w", &w}});
  return backend_kernel(b.prepare_weight, "prepare_weight", b)(w);
}

void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out) {
  detail::check_embedding(table, ids, out);
  const Backend& b = backend_for("embedding", {{"table", &table}, {"out", &out}});
  backend_kernel(b.embedding, "embedding", b)(table, ids, out);
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y) {
  detail::check_rms_norm(x, w, y);
  const Backend& b = backend_for("rms_norm", {{"x", &x}, {"w", &w}, {"y", &y}});
  backend_kernel(b.rms_norm, "rms_norm", b)(x, w, eps, y);
}

void rope(Tensor& x, int64_t nheads, std::span<const int32_t> pos, std::span<const float> inv_freq,
          RopeStyle style) {
  const int64_t D = detail::check_rope(x, nheads, pos, inv_freq);
  const Backend& b = backend_for("rope", {{"x", &x}});
  backend_kernel(b.rope, "rope", b)(x, nheads, D, pos, inv_freq, style);
}

void silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  detail::check_silu_mul(gate, up, out);
  const Backend& b = backend_for("silu_mul", {{"gate", &gate}, {"up", &up}, {"out", &out}});
  backend_kernel(b.silu_mul, "silu_mul", b)(gate, up, out);
}

void add_inplace(Tensor& x, const Tensor& y) {
  detail::check_add(x, y);
  const Backend& b = backend_for("add_inplace", {{"x", &x}, {"y", &y}});
  backend_kernel(b.add_inplace, "add_inplace", b)(x, y);
}

void store_rows(const Tensor& src, Tensor& dst) {
  detail::check_store_rows(src, dst);
  const Backend& b = backend_for("store_rows", {{"src", &src}, {"dst", &dst}});
  backend_kernel(b.store_rows, "store_rows", b)(src, dst);
}

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads, int64_t nkv_heads,
               int64_t q_pos0, float scale, Tensor& out) {
  const auto d = detail::check_attention(q, k, v, nheads, nkv_heads, q_pos0, out);
  const Backend& b = backend_for("attention", {{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}});
  backend_kernel(b.attention, "attention", b)(q, k, v, nheads, nkv_heads, q_pos0, scale, out, d.T, d.S, d.D);
}

// Each query row t attends to q_pos0 + t + 1 keys: 2·D FLOPs for the score and 2·D for the
// weighted sum of values, per key and head.
double attention_flops(int64_t T, int64_t nheads, int64_t D, int64_t q_pos0) {
  const double keys = double(T) * double(q_pos0) + double(T) * double(T + 1) / 2.0;
  return 4.0 * double(nheads) * double(D) * keys;
}

}  // namespace genperf::ops
