/*  cuda_exec - runs one plan on the GPU: generate, check, time (runner side).

    One context per runner. A kernel can reach every device allocation of
    its process (two contexts of one process share the GPU address space:
    measured on the H200), so what keeps answers from the candidate is the
    order of work. For every input set: inputs generated on the GPU from
    (seed, size, trial, arg) into the candidate's buffers, outputs poisoned
    (NaN, or random bits for integers); the candidate runs and finishes;
    then its inputs are checked bit for bit against a regeneration, the
    reference's inputs are generated again, the reference computes the
    expected outputs (timed when there is no baseline; the baseline is
    timed after it otherwise), every output and inout is compared, and the
    expected outputs are scrubbed before the candidate runs again. Timing:
    warm-up, then every timed run on a fresh set, L2 flushed before each
    timed launch sequence, CUDA events around it, every timed output
    checked, one more full check after timing. Then, unless the plan says
    otherwise, one more checked set is profiled: CUPTI (cuda_cupti) on
    around each program's launches only, the records summarised by
    cuda_profile into the result's "profile"; a declared launch that
    never ran, or a timed median below the roofline floor, makes the
    candidate incorrect (docs/profile.md). The candidate's module stays
    loaded for the whole job. With plan->reload (the default) our kernels,
    the reference and the baseline are loaded afresh after every candidate
    run, so device code a candidate might have overwritten never runs. Any
    CUDA error once candidate code has run marks the result fatal: the
    runner answers and exits (sticky errors poison the process).
*/
#ifndef CUDA_EXEC_H
#define CUDA_EXEC_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <jansson.h>
#include "cuda_plan.h"

typedef struct cuda_exec_t cuda_exec_t;

//  Device facts, read once (sent to the supervisor in HELLO).
typedef struct {
    int ordinal;                //  CUDA device ordinal
    char name [256];            //  "NVIDIA H200"
    char arch [16];             //  "sm_90"
    int major, minor;           //  compute capability
    int sm_count;               //  multiprocessors
    uint64_t l2_bytes;          //  L2 cache size
    uint64_t mem_total;         //  device memory
    int max_threads;            //  per block
    int max_block [3];          //  block dims
    int max_grid [3];           //  grid dims
    int shared_default;         //  dynamic + static shared bytes without opt-in
    int shared_optin;           //  with opt-in
    char bus_id [32];           //  "0000:1B:00.0"
    char uuid [48];             //  "GPU-6f3c..." as nvidia-smi and dcgm-exporter write it
    int driver;                 //  cuDriverGetVersion
    int mem_clock_khz;          //  peak memory clock (0 = the driver would not say)
    int bus_width_bits;         //  memory bus width (0 = the driver would not say)
    double peak_bw_gbs;         //  peak DRAM bandwidth (cuda_profile_peak; 0 = unknown)
} cuda_exec_device_t;

//  cuInit, pick device ordinal, read its facts. NULL with a reason (err
//  starts with "no device: " when cuInit/cuDeviceGetCount find none).
cuda_exec_t *cuda_exec_new (int ordinal, char *err, size_t errlen);
void cuda_exec_destroy (cuda_exec_t **self_p);

const cuda_exec_device_t *cuda_exec_device (cuda_exec_t *self);
json_t *cuda_exec_device_json (const cuda_exec_device_t *dev);

//  Create the context and load the internal module (a cubin of
//  cuda_kernels_source). 0, or -1 with a reason.
int cuda_exec_init (cuda_exec_t *self, const uint8_t *image, size_t size, char *err, size_t errlen);

//  Run a plan with the three images (baseline may be NULL). Returns the
//  result object (never NULL unless out of memory); *fatal is set when the
//  process must not serve another job.
json_t *cuda_exec_run (cuda_exec_t *self, const cuda_plan_t *plan,
                       const uint8_t *const images [3], const size_t sizes [3], bool *fatal);

//  Probe whether a kernel can read and write device code through a
//  function's address (image: cubin of cuda_kernels_selftest_source).
//  May leave the process unusable. Returns {"call", "code_read",
//  "code_write", ...}, each "succeeded" or the CUDA error.
json_t *cuda_exec_selftest (cuda_exec_t *self, const uint8_t *image);

#endif
