// The AVX2 level's integer GEMV and GEMM for CPUs with AVX-VNNI: qkernels_avx2.cpp compiled again
// with -mavxvnni, where one vpdpbusd on 256-bit registers takes the place of each vpmaddubsw +
// vpmaddwd (namespace avxvnniq; reached through qgemv_avx2(wt, true) and its siblings).
#define GP_QK_AVXVNNI 1
#include "backend/cpu/qkernels_avx2.cpp"
