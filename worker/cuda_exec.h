/*  cuda_exec - runs one plan on the GPU: generate, check, time (runner side).

    Two contexts on one device, because a kernel can reach any device
    memory of its own context and none of another's:
      check context  (primary): our generator and comparison kernels, the
                     reference and baseline modules, inputs, expected
                     outputs, the comparison scratch;
      candidate ctx  (created): the candidate's module and its own copy of
                     every tensor, nothing else. Its buffers are filled by
                     peer copies and driver memsets, never by our code
                     running in its context, so nothing the candidate
                     corrupts there can fake a check.
    Per trial: inputs generated on the GPU from (seed, size, trial, arg),
    outputs poisoned (NaN, or random bits for integers), reference and
    candidate run, every output and inout compared in the check context,
    every input checked bit for bit against a regeneration. Timing: warm-
    up, then candidate and baseline (or reference) interleaved, L2 flushed
    before each, CUDA events around each; every timed run gets fresh inputs
    whose expected outputs the reference computes in the check context, and
    every timed output is checked. The candidate's module stays loaded for
    the whole job. Any CUDA error in the candidate's context marks the
    result fatal: the runner answers and exits (sticky errors poison the
    process).
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
    int driver;                 //  cuDriverGetVersion
} cuda_exec_device_t;

//  cuInit, pick device ordinal, read its facts. NULL with a reason (err
//  starts with "no device: " when cuInit/cuDeviceGetCount find none).
cuda_exec_t *cuda_exec_new (int ordinal, char *err, size_t errlen);
void cuda_exec_destroy (cuda_exec_t **self_p);

const cuda_exec_device_t *cuda_exec_device (cuda_exec_t *self);
json_t *cuda_exec_device_json (const cuda_exec_device_t *dev);

//  Create the two contexts and load the internal module (a cubin of
//  cuda_kernels_source). 0, or -1 with a reason.
int cuda_exec_init (cuda_exec_t *self, const uint8_t *image, size_t size, char *err, size_t errlen);

//  Run a plan with the three images (baseline may be NULL). Returns the
//  result object (never NULL unless out of memory); *fatal is set when the
//  process must not serve another job.
json_t *cuda_exec_run (cuda_exec_t *self, const cuda_plan_t *plan,
                       const uint8_t *const images [3], const size_t sizes [3], bool *fatal);

//  Prove the contexts are isolated: a kernel in the candidate context
//  writing to a check-context allocation must fault. Leaves the process
//  unusable. Returns {"peer_copy_ok", "cross_context_write", "isolated"}.
json_t *cuda_exec_selftest (cuda_exec_t *self);

#endif
