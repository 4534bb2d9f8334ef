/*  cuda_kernels - the runner's own device code, as CUDA C source for NVRTC.

    Input generation, poisoning and comparison run on the GPU, in the
    runner's checking context (never in the candidate's): kgym_fill writes
    init distributions with exactly common_init's formulas (common_philox.h
    is pasted in; compiled with -fmad=false so a*b+c rounds twice, as on
    the host) and common_dtype's rounding; kgym_poison_int writes
    common_init_poison's integer pattern; kgym_compare applies
    common_compare's rule and reduces count, first failing index and the
    largest errors; kgym_check_gen compares a buffer bit for bit against a
    regeneration (inputs must come back unchanged).

    cuda_backend compiles this source through the same cached NVRTC path as
    candidates and sends the cubin to each runner it starts.
*/
#ifndef CUDA_KERNELS_H
#define CUDA_KERNELS_H

#include <stdint.h>

//  Reduction record of one comparison (device memory, zeroed before use).
typedef struct {
    uint64_t bad;               //  failing elements
    uint64_t first_inv;         //  ~(first failing index), 0 when none
    uint64_t max_abs_bits;      //  largest |got - expected| over finite pairs, as double bits
    uint64_t max_rel_bits;      //  largest relative error, as double bits
} cuda_kernels_check_t;

//  The full source (malloc'd once, process-wide; do not free).
const char *cuda_kernels_source (void);

//  NVRTC options for it (NULL-terminated).
extern const char *const cuda_kernels_options [];

//  The self-test probe (kg_probe, kg_read, kg_write): may a kernel read or
//  write device code through a function's address? See cuda_exec_selftest.
extern const char cuda_kernels_selftest_source [];

//  The philox header text, generated from common/common_philox.h.
extern const char cuda_kernels_philox [];

#endif
