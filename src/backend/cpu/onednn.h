// The CPU backend's one oneDNN engine, the way its primitives run (gemm_onednn.cpp) and their
// cache, shared by the matmuls (gemm_onednn.cpp) and the convolutions (conv_onednn.cpp). oneDNN
// runs on OpenMP: a primitive takes its thread count (and, for many, its blocking) from
// omp_get_max_threads() when it is created and when it runs; conv_onednn.cpp creates its
// primitives after onednn_set_threads() and keys them by the thread count.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

namespace genperf::cpu {

// The engine. Its first use caps oneDNN's ISA by GENPERF_ISA (as genperf's kernels are), so that
// GENPERF_ISA=avx2 runs oneDNN as on an AVX2-only machine: call it before any other oneDNN call.
dnnl::engine& onednn_engine();
// The ISA oneDNN dispatches to after that cap ("sse41", "avx2", "avx2_vnni", "avx512_core_bf16",
// ...): what a record's GEMM peak ran at.
const char* onednn_isa_name();

// oneDNN's OpenMP thread count set to genperf::num_threads().
void onednn_set_threads();

// Runs prim on the calling thread's stream at genperf::num_threads() and waits for it.
void onednn_execute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args);

// Whether pd is oneDNN's reference implementation ("ref:..."), orders of magnitude slower than
// its JIT and GEMM ones: callers take their own path instead.
bool onednn_is_reference(const dnnl::primitive_desc_base& pd);

// Primitives (or why there is none) by key, made once by make(key) and shared by all threads.
// Emptied when it reaches kMaxEntries, which bounds its memory when shapes vary widely (prompt
// lengths, image sizes). A Value is a handle (dnnl primitives are reference-counted): get()
// returns a copy, valid after the cache drops its own.
template <typename Key, typename Value>
class OnednnCache {
 public:
  static constexpr size_t kMaxEntries = 512;
  explicit OnednnCache(Value (*make)(const Key&)) : make_(make) {}
  Value get(const Key& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) {
      if (map_.size() >= kMaxEntries) map_.clear();
      it = map_.emplace(key, make_(key)).first;
    }
    return it->second;
  }

 private:
  Value (*make_)(const Key&);
  std::mutex mu_;
  std::map<Key, Value> map_;
};

}  // namespace genperf::cpu
