// The CPU backend's one oneDNN engine and the way its primitives run (gemm_onednn.cpp), shared by
// the matmuls (gemm_onednn.cpp) and the convolutions (conv_onednn.cpp). oneDNN runs on OpenMP:
// a primitive takes its thread count (and, for many, its blocking) from omp_get_max_threads()
// when it is created and when it runs; conv_onednn.cpp creates its primitives after
// onednn_set_threads() and keys them by the thread count.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

namespace genperf::cpu {

// The engine. Its first use caps oneDNN's ISA by GENPERF_ISA (as genperf's kernels are), so that
// GENPERF_ISA=avx2 runs oneDNN as on an AVX2-only machine: call it before any other oneDNN call.
dnnl::engine& onednn_engine();

// oneDNN's OpenMP thread count set to genperf::num_threads().
void onednn_set_threads();

// Runs prim on the calling thread's stream at genperf::num_threads() and waits for it.
void onednn_execute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args);

// Whether pd is oneDNN's reference implementation ("ref:..."), orders of magnitude slower than
// its JIT and GEMM ones: callers take their own path instead.
bool onednn_is_reference(const dnnl::primitive_desc_base& pd);

}  // namespace genperf::cpu
