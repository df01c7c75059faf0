// Buffers of pages that materialize (as zeros) when first written and can be given back, for
// what sharded training holds only in part: the gradient and parameter windows of ZeRO-2 and -3
// (genperf/dist.h), and a model built for sharded initialization, whose buffers no one writes
// whole (TrainModel's defer_init).
#pragma once
#include <cstddef>

#include "genperf/dist.h"
#include "genperf/tensor.h"

namespace genperf::train {

// Windows come and go in huge pages (kWindowPageBytes, 2 MiB; transparent huge pages by
// madvise): a page fault costs microseconds (tens on a virtual machine), and a window of 4 KiB
// pages faults in every page again each step; 2 MiB pages make that a few faults. What a window
// gives back is whole huge pages.
inline size_t page_floats() { return kWindowPageBytes / sizeof(float); }
inline size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

// n f32 of address space, none resident until written (zeros when read before), aligned to a
// huge page inside a mapping one huge page larger.
Tensor paged_zeros(size_t n);
// Gives back the whole pages inside [lo, hi) of such a buffer (they read as zeros again).
void release_pages(float* base, size_t lo, size_t hi);
// Bytes of a buffer's pages that are resident (mincore counts the system's pages).
size_t resident_bytes(const float* base, size_t n);

}  // namespace genperf::train
