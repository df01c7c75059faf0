// What the machine offers and how genperf uses it: CPU features (cpuid plus the OS's XSAVE
// state, so AVX-512 is used only where the OS saves its registers), the ISA path chosen for
// kernels, and the thread count.
#pragma once
#include <string>

namespace genperf {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx_vnni = false;
  std::string model;  // brand string, e.g. "AMD EPYC 9654 96-Core Processor"
  std::string flags() const;  // "avx2 fma f16c avx512f ..." of those present
};

const CpuFeatures& cpu_features();

// Kernel ISA levels, lowest first. The chosen level is the best the CPU supports, lowered by the
// environment variable GENPERF_ISA=generic|avx2|avxvnni|avx512 (for testing every path on one
// machine; avx2 and avxvnni are both the AVX2 level, see avx_vnni()).
enum class Isa { Generic = 0, Avx2 = 1, Avx512 = 2 };
Isa isa();
const char* isa_name(Isa i);
void set_isa(Isa i);  // for tests: clamps to what the CPU supports
Isa cpu_isa();        // the best level the CPU supports, whatever GENPERF_ISA says

// Whether the AVX2 level's integer kernels take AVX-VNNI (vpdpbusd on 256-bit registers; Intel
// since Alder Lake and Sierra Forest, AMD since Zen 5): the CPU has it and GENPERF_ISA is not
// "avx2", which runs the AVX2 level as on a CPU without it (Haswell to Comet Lake, Zen 1 to 3).
// Fixed for the process.
bool avx_vnni();
// The selected path as reports name it: isa_name(isa()), "avx2+avxvnni" where avx_vnni() applies.
const char* isa_path();

// Threads used by kernels (OpenMP). Default: GENPERF_THREADS, else OMP_NUM_THREADS, else the
// number of cores available to the process, divided among the ranks a launcher started on this
// node when it did not bind them to cores of their own (launcher_local_ranks).
int num_threads();
void set_num_threads(int n);
// Ranks a launcher started on this node (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS,
// SLURM_NTASKS_PER_NODE); 1 without a launcher.
int launcher_local_ranks();
// Cores of this node (online processors), and those this process may run on (its affinity).
int node_cores();
int affinity_cores();

}  // namespace genperf
