/*  cuda_plan - one CUDA job, fully evaluated, as the runner executes it.

    The supervisor (cuda_backend) parses and validates the job, evaluates
    every size's layout for each program with common_task_layout (the
    memory cap applies there), and writes the result as a plan: args with
    dtypes and init distributions; per size the element counts, bytes and
    scalar bits; per program and size the workspace and the evaluated
    launches. The runner only reads plans, so it needs no expression
    evaluator and no task parser; it still bounds every count it reads.
    JSON keys are listed in docs/cuda.md.
*/
#ifndef CUDA_PLAN_H
#define CUDA_PLAN_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <jansson.h>
#include "common_task.h"

#define CUDA_PLAN_MAX_ARGS      TASK_MAX_ARGS
#define CUDA_PLAN_MAX_CALLARGS  (TASK_MAX_ARGS + 1)
#define CUDA_PLAN_MAX_SIZES     TASK_MAX_SIZES
#define CUDA_PLAN_MAX_LAUNCHES  TASK_MAX_LAUNCHES
#define CUDA_PLAN_NAME          TASK_MAX_NAME

typedef enum { PLAN_CANDIDATE = 0, PLAN_REFERENCE = 1, PLAN_BASELINE = 2 } cuda_plan_prog_t;
#define CUDA_PLAN_PROGS 3

//  One task arg.
typedef struct {
    char name [CUDA_PLAN_NAME];     //  for messages
    common_arg_kind_t kind;         //  input, output, inout, scalar
    common_dtype_t dtype;           //  element type
    common_init_t init;             //  inputs: distribution
} cuda_plan_arg_t;

//  One evaluated launch.
typedef struct {
    char kernel [CUDA_PLAN_NAME];   //  symbol
    int64_t grid [3], block [3];    //  dims (>= 1)
    int64_t shared;                 //  dynamic shared bytes
    int32_t args [CUDA_PLAN_MAX_CALLARGS];   //  task arg index, -1 = workspace
    uint32_t nargs;                 //  entries in args
} cuda_plan_launch_t;

//  A program at one size.
typedef struct {
    uint64_t workspace;             //  bytes, 0 = none
    cuda_plan_launch_t *launches;   //  owned
    uint32_t nlaunches;             //  entries
} cuda_plan_call_t;

//  One size.
typedef struct {
    uint32_t index;                 //  entry of the task's sizes
    uint64_t count [CUDA_PLAN_MAX_ARGS];    //  tensors: elements
    uint64_t bytes [CUDA_PLAN_MAX_ARGS];    //  tensors: bytes
    uint64_t bits [CUDA_PLAN_MAX_ARGS];     //  scalars: value bits, little-endian in the dtype's size
    cuda_plan_call_t call [CUDA_PLAN_PROGS];   //  per program
} cuda_plan_size_t;

//  A whole job.
typedef struct {
    uint64_t seed;                  //  input seed (the correctness trials)
    uint64_t time_seed;             //  every later set (warm-up, timed, re-check, profiled):
                                    //  drawn for the job alone, never the eval's seed, so no
                                    //  set that is timed can be known (and its output
                                    //  computed) ahead of its call
    double atol, rtol;              //  tolerance (integers: exactly as integers)
    bool exact;                     //  outputs must equal the reference's bit for bit
    uint32_t trials;                //  correctness trials per size
    uint32_t warmup, timed;         //  timing runs (timed: at most)
    //  Adaptive timing (worker_grade_stop): what the runner's rule needs.
    uint32_t stop_min;              //  timed runs before any stop (timed: a fixed count)
    double stop_precision;          //  relative half-width of the interval that ends timing (0: never)
    double stop_clip;               //  the reward's clip: an interval at or above it ends timing (0: none)
    double stop_floor;              //  an interval at or below this speedup ends timing (0: never)
    double stop_margin;             //  the first round alone ends it this far past clip or floor (0: never)
    double timeout_s;               //  the candidate's budget of GPU time (eval.timeout; 0 = none)
    bool check_only;                //  no timing
    uint32_t timing_size;           //  index into sizes[] (not the task's index)
    bool has_baseline;              //  else the reference is timed
    bool candidate_ptx;             //  candidate image is PTX
    char keys [CUDA_PLAN_PROGS][65];//  cache keys of the images (reuse of loaded modules)
    uint64_t heap_bytes;            //  device malloc heap (bytes)
    bool reload;                    //  reload trusted modules after every candidate run
    bool profile;                   //  profile one more set (eval.profile)
    uint64_t roofline_bytes;        //  bytes the task must move at the timing size (0 = none)
    bool bytes_declared;            //  roofline_bytes is the task's "bytes", not the default
    cuda_plan_arg_t args [CUDA_PLAN_MAX_ARGS];
    uint32_t nargs;                 //  entries
    cuda_plan_size_t *sizes;        //  owned
    uint32_t nsizes;                //  entries
} cuda_plan_t;

//  Build from a parsed job (supervisor side). Fails (-1, reason) on a
//  layout error or a size over max_bytes: both make the job `invalid`.
cuda_plan_t *cuda_plan_from_job (const common_job_t *job, uint64_t seed, uint64_t max_bytes,
                                 char *err, size_t errlen);

//  To and from JSON (the JOB message's part 0).
json_t *cuda_plan_to_json (const cuda_plan_t *plan);
cuda_plan_t *cuda_plan_from_json (json_t *json, char *err, size_t errlen);

void cuda_plan_destroy (cuda_plan_t **self_p);

//  Largest bytes of arg over all sizes; largest workspace of a program.
uint64_t cuda_plan_max_bytes (const cuda_plan_t *plan, uint32_t arg);
uint64_t cuda_plan_max_workspace (const cuda_plan_t *plan, cuda_plan_prog_t prog);

//  Device bytes the runner will allocate for this plan (both contexts).
uint64_t cuda_plan_device_bytes (const cuda_plan_t *plan);

#endif
