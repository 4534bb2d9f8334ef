/*  cuda_exec - runs one plan on the GPU: generate, check, time (runner side).

    The only file that calls the CUDA driver (through cuda_driver's table).
    Every call is checked; who is to blame for a failure (candidate, task,
    us) decides the status, and any failure while candidate code may have
    run ends the runner after it answers.

    One context. A kernel can reach all device memory of its process (two
    contexts of one process share the GPU address space: measured on the
    H200, see docs/cuda.md), so the order of work is what keeps answers
    away from the candidate: for every input set the candidate runs first,
    on inputs we generated; only after it has finished are the reference's
    inputs generated again from the seed and its expected outputs computed;
    the comparison runs, and the expected outputs are scrubbed before the
    candidate runs again. With reload on (the default), every trusted
    module (our generator/compare kernels, the reference, the baseline) is
    loaded afresh after each candidate run, so device code the candidate
    may have overwritten is never executed.

    After timing, one more set is profiled (plan->profile): CUPTI records
    kernels only between the synchronised start and end of each program's
    launches, so every record of a window is that program's; the records,
    the occupancy API's answers for each declared launch and the device
    facts go to cuda_profile, whose verdict (a declared launch that never
    ran, a median below the roofline floor) can make the candidate
    incorrect.
*/
#include "common_util.h"
#include "worker_grade.h"
#include "cuda_exec.h"
#include "common_log.h"
#define CUDA_DRIVER_REDIRECT
#include "cuda_driver.h"
#include "cuda_cupti.h"
#include "cuda_kernels.h"
#include "cuda_msg.h"
#include "cuda_profile.h"
#include "common_compare.h"
#include "common_init.h"
#include "common_philox.h"
#include "worker_outcome.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS        CUDA_PLAN_MAX_ARGS
#define MAX_CALLARGS    CUDA_PLAN_MAX_CALLARGS
#define MAX_LAUNCHES    CUDA_PLAN_MAX_LAUNCHES
#define POOL_BLOCKS     256                 //  free device blocks kept
#define MAX_STATIC      (1ull << 30)        //  candidate module's own device memory
#define WINDOW          64                  //  elements fetched to describe a mismatch
#define PRINTF_FIFO     (64u << 10)
#define THREADS         256
#define TRIAL_TIMED     0x100000u           //  trial ids of generated sets beyond the
#define TRIAL_WARMUP    0x180000u           //  correctness trials (< TASK_MAX_TRIALS)
#define TRIAL_FINAL     0x200000u
#define TRIAL_PROFILE   0x280000u

typedef enum { WHO_CANDIDATE, WHO_TASK, WHO_US } who_t;

//  A device block free for reuse, already scrubbed.
typedef struct {
    CUdeviceptr ptr;            //  address
    size_t bytes;               //  size
} block_t;

//  Freed blocks.
typedef struct {
    block_t blocks [POOL_BLOCKS];   //  free blocks
    size_t n;                       //  entries used
    uint64_t bytes;                 //  their total
} pool_t;

//  Our kernels in one loaded copy of the internal module.
typedef struct {
    CUmodule module;            //  loaded copy
    CUfunction fill, poison_int, compare, check_gen;
} kernels_t;

struct cuda_exec_t {
    cuda_exec_device_t dev;     //  facts
    CUdevice device;            //  handle
    bool have_ctx;              //  context exists
    CUcontext ctx;              //  primary context
    CUstream stream;            //  all our work
    CUevent ev [2];             //  start/stop of a timed run
    uint8_t *image;             //  internal module cubin (reloaded from here)
    size_t image_size;          //  its bytes
    kernels_t internal;         //  copy loaded at init (used when reload is off)
    CUdeviceptr flush;          //  2 x L2
    size_t flush_bytes;         //  its size
    uint32_t flush_value;       //  changes every flush
    pool_t pool;                //  scrubbed free blocks
    uint64_t pool_keep;         //  bytes kept pooled at most
    cuda_profile_device_t prof; //  facts for the profile (peak bandwidth, SM limits)
    double margin;              //  roofline safety margin (KGYM_ROOFLINE_MARGIN)
};

//  Trusted device code of a job: our kernels, reference, baseline.
typedef struct {
    kernels_t k;                //  our kernels
    bool own_k;                 //  k was loaded for the job (unload it)
    CUmodule mod [CUDA_PLAN_PROGS];     //  reference, baseline ([0] unused)
    CUfunction *fn [CUDA_PLAN_PROGS];   //  [size * MAX_LAUNCHES + launch]; [0] unused
} trusted_t;

//  State of one job.
typedef struct {
    cuda_exec_t *ex;            //  owner
    const cuda_plan_t *plan;    //  the plan
    const uint8_t *images [CUDA_PLAN_PROGS];    //  from the JOB message
    CUmodule cand_mod;          //  candidate's module (loaded once for the job)
    CUfunction *cand_fn;        //  [size * MAX_LAUNCHES + launch]
    trusted_t trusted;          //  current trusted copies
    bool fresh;                 //  trusted was loaded after the last candidate run
    //  device buffers (max bytes over sizes)
    CUdeviceptr cand [MAX_ARGS];//  candidate: every tensor
    CUdeviceptr rin [MAX_ARGS]; //  reference: inputs and inout (in place)
    CUdeviceptr rout [MAX_ARGS];//  reference: outputs (expected)
    CUdeviceptr base [MAX_ARGS];//  baseline: inout and outputs
    CUdeviceptr ws [CUDA_PLAN_PROGS];   //  workspaces
    CUdeviceptr slots;          //  cuda_kernels_check_t per check
    uint32_t nslots;            //  capacity
    size_t bytes [MAX_ARGS * 4 + 8];    //  allocation sizes, for release
    //  verdict
    worker_status_t status;     //  ok until something fails
    char message [512];         //  why
    bool fatal;                 //  runner must exit
    char error_name [64];       //  CUDA error of a runtime_error
    double max_abs, max_rel;    //  over all checks
    uint64_t bad;               //  elements of the failing check
    json_t *mismatches;         //  array
    double *samples [2];        //  candidate, baseline (us)
    uint32_t nsamples;          //  entries in each
    uint32_t sets;              //  input sets run (every kind), what the job cost the GPU in runs
    worker_grade_stop_why_t stopped;    //  why timing stopped (none: not timed)
    double cand_gpu_s;          //  GPU time of every candidate launch sequence so far (its budget)
    uint64_t static_bytes;      //  candidate module's device memory
    uint32_t reloads;           //  trusted reloads done
    //  the profiled set
    bool collecting;            //  CUPTI is recording
    char prof_why [256];        //  why there is no profile ("" while there may be one)
    bool prof_done [CUDA_PLAN_PROGS];   //  records collected for the program
    cuda_profile_record_t *prof_rec [CUDA_PLAN_PROGS];  //  its records (malloc'd)
    size_t prof_n [CUDA_PLAN_PROGS];    //  entries
    double prof_us [CUDA_PLAN_PROGS];   //  CUDA events around its profiled launches
    int *prof_blocks [CUDA_PLAN_PROGS]; //  occupancy API: blocks per SM of each declared launch
    size_t prof_dropped;        //  records CUPTI dropped
    bool prof_truncated;        //  more records than kept
    //  Every record CUPTI handed over, placed into programs by start time:
    //  CUPTI may deliver a record after the flush of its own window.
    cuda_profile_record_t *pool;        //  all records handed over (malloc'd)
    size_t npool, maxpool;              //  entries used / allocated
    uint64_t win_begin [CUDA_PLAN_PROGS], win_end [CUDA_PLAN_PROGS];   //  CUPTI clock
    uint64_t pending_begin;             //  start of the window being recorded
} job_t;

#define S_POOL_MAX (4 * CUDA_PROFILE_MAX_RECORDS)


static const char *
s_cu_name (CUresult rc)
{
    const char *name = NULL;
    if (cuGetErrorName (rc, &name) != CUDA_SUCCESS || !name)
        return "CUDA_ERROR_UNKNOWN";
    return name;
}

//  Record a failure once (the first one wins).
static void
s_fail (job_t *job, worker_status_t status, bool fatal, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

static void
s_fail (job_t *job, worker_status_t status, bool fatal, const char *fmt, ...)
{
    if (fatal)
        job->fatal = true;
    if (job->status != STATUS_OK)
        return;
    job->status = status;
    va_list args;
    va_start (args, fmt);
    vsnprintf (job->message, sizeof job->message, fmt, args);
    va_end (args);
}

//  A CUDA failure: runtime_error for the candidate, invalid for the task's
//  programs, internal_error for us. Always fatal: it may be sticky.
static int
s_cuda_fail (job_t *job, who_t who, CUresult rc, const char *what)
{
    if (job->status == STATUS_OK && who == WHO_CANDIDATE)
        snprintf (job->error_name, sizeof job->error_name, "%s", s_cu_name (rc));
    worker_status_t status = who == WHO_CANDIDATE? STATUS_RUNTIME_ERROR
                           : who == WHO_TASK? STATUS_INVALID: STATUS_INTERNAL_ERROR;
    s_fail (job, status, true, "%s%s: %s (%d)", who == WHO_TASK? "task's program failed: ": "",
            what, s_cu_name (rc), (int) rc);
    return -1;
}

#define CK(job, who, call, what) \
    do { CUresult rc_ = (call); if (rc_ != CUDA_SUCCESS) return s_cuda_fail ((job), (who), rc_, (what)); } while (0)

//  --- device ---

cuda_exec_t *
cuda_exec_new (int ordinal, char *err, size_t errlen)
{
    char why [256];
    if (cuda_driver_load (why, sizeof why)) {
        common_seterr (err, errlen, "no device: %s", why);
        return NULL;
    }
    CUresult rc = cuInit (0);
    if (rc != CUDA_SUCCESS) {
        common_seterr (err, errlen, "no device: cuInit: %s (%d)", s_cu_name (rc), (int) rc);
        return NULL;
    }
    int count = 0;
    rc = cuDeviceGetCount (&count);
    if (rc != CUDA_SUCCESS || count == 0) {
        common_seterr (err, errlen, "no device: cuDeviceGetCount: %s, %d devices", s_cu_name (rc), count);
        return NULL;
    }
    if (ordinal < 0 || ordinal >= count) {
        common_seterr (err, errlen, "no device: ordinal %d of %d devices", ordinal, count);
        return NULL;
    }
    cuda_exec_t *self = calloc (1, sizeof *self);
    if (!self) {
        common_seterr (err, errlen, "out of memory");
        return NULL;
    }
    cuda_exec_device_t *d = &self->dev;
    d->ordinal = ordinal;
    size_t mem = 0;
    int l2 = 0;
    struct { CUdevice_attribute attr; int *out; } attrs [] = {
        { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &d->major },
        { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &d->minor },
        { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &d->sm_count },
        { CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &l2 },
        { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &d->max_threads },
        { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &d->max_block [0] },
        { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, &d->max_block [1] },
        { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, &d->max_block [2] },
        { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &d->max_grid [0] },
        { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, &d->max_grid [1] },
        { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, &d->max_grid [2] },
        { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &d->shared_default },
        { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &d->shared_optin },
    };
    if ((rc = cuDeviceGet (&self->device, ordinal)) != CUDA_SUCCESS
    ||  (rc = cuDeviceGetName (d->name, sizeof d->name, self->device)) != CUDA_SUCCESS
    ||  (rc = cuDeviceTotalMem (&mem, self->device)) != CUDA_SUCCESS
    ||  (rc = cuDeviceGetPCIBusId (d->bus_id, sizeof d->bus_id, self->device)) != CUDA_SUCCESS
    ||  (rc = cuDriverGetVersion (&d->driver)) != CUDA_SUCCESS) {
        common_seterr (err, errlen, "device query: %s", s_cu_name (rc));
        free (self);
        return NULL;
    }
    for (size_t i = 0; i < sizeof attrs / sizeof attrs [0]; i++)
        if ((rc = cuDeviceGetAttribute (attrs [i].out, attrs [i].attr, self->device)) != CUDA_SUCCESS) {
            common_seterr (err, errlen, "cuDeviceGetAttribute %d: %s", (int) attrs [i].attr, s_cu_name (rc));
            free (self);
            return NULL;
        }
    //  The UUID labels the worker's metrics the way dcgm-exporter does.
    CUuuid uuid;
    if (cuDeviceGetUuid (&uuid, self->device) == CUDA_SUCCESS) {
        const unsigned char *b = (const unsigned char *) uuid.bytes;
        snprintf (d->uuid, sizeof d->uuid,
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                  b [0], b [1], b [2], b [3], b [4], b [5], b [6], b [7], b [8], b [9], b [10],
                  b [11], b [12], b [13], b [14], b [15]);
    }
    d->mem_total = mem;
    d->l2_bytes = (uint64_t) l2;
    snprintf (d->arch, sizeof d->arch, "sm_%d%d", d->major, d->minor);
    self->pool_keep = mem / 4;
    //  For the profile only: a driver that does not answer leaves 0 (unknown).
    cuda_profile_device_t *p = &self->prof;
    struct { CUdevice_attribute attr; int *out; } optional [] = {
        { CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &p->mem_clock_khz },
        { CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &p->bus_width_bits },
        { CU_DEVICE_ATTRIBUTE_WARP_SIZE, &p->warp_size },
        { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, &p->max_threads_sm },
        { CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, &p->max_blocks_sm },
        { CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, &p->regs_sm },
        { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &p->shared_sm },
        { CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, &p->reserved_shared },
    };
    for (size_t i = 0; i < sizeof optional / sizeof optional [0]; i++)
        if (cuDeviceGetAttribute (optional [i].out, optional [i].attr, self->device) != CUDA_SUCCESS)
            *optional [i].out = 0;
    snprintf (p->name, sizeof p->name, "%s", d->name);
    p->sm_count = d->sm_count;
    p->l2_bytes = d->l2_bytes;
    cuda_profile_peak (p, getenv ("KGYM_PEAK_BW_GBS"));
    self->margin = cuda_profile_margin (getenv ("KGYM_ROOFLINE_MARGIN"));
    d->mem_clock_khz = p->mem_clock_khz;
    d->bus_width_bits = p->bus_width_bits;
    d->peak_bw_gbs = p->peak_bw_gbs;
    return self;
}

const cuda_exec_device_t *
cuda_exec_device (cuda_exec_t *self)
{
    return &self->dev;
}

json_t *
cuda_exec_device_json (const cuda_exec_device_t *d)
{
    return json_pack ("{s:i, s:s, s:s, s:i, s:i, s:I, s:I, s:i, s:[i,i,i], s:[i,i,i], s:i, s:i, s:s, s:s, s:i, "
                      "s:i, s:i, s:f}",
        "ordinal", d->ordinal, "name", d->name, "arch", d->arch, "major", d->major,
        "sm_count", d->sm_count, "l2_bytes", (json_int_t) d->l2_bytes,
        "mem_total", (json_int_t) d->mem_total, "max_threads", d->max_threads,
        "max_block", d->max_block [0], d->max_block [1], d->max_block [2],
        "max_grid", d->max_grid [0], d->max_grid [1], d->max_grid [2],
        "shared_default", d->shared_default, "shared_optin", d->shared_optin,
        "bus_id", d->bus_id, "uuid", d->uuid, "driver", d->driver, "memory_clock_khz", d->mem_clock_khz,
        "bus_width_bits", d->bus_width_bits, "peak_bw_gbs", d->peak_bw_gbs);
}

//  Load a copy of the internal module and look its kernels up.
static CUresult
s_kernels_load (const uint8_t *image, kernels_t *k)
{
    memset (k, 0, sizeof *k);
    CUresult rc;
    if ((rc = cuModuleLoadData (&k->module, image)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cuModuleGetFunction (&k->fill, k->module, "kgym_fill")) != CUDA_SUCCESS
    ||  (rc = cuModuleGetFunction (&k->poison_int, k->module, "kgym_poison_int")) != CUDA_SUCCESS
    ||  (rc = cuModuleGetFunction (&k->compare, k->module, "kgym_compare")) != CUDA_SUCCESS
    ||  (rc = cuModuleGetFunction (&k->check_gen, k->module, "kgym_check_gen")) != CUDA_SUCCESS) {
        cuModuleUnload (k->module);
        memset (k, 0, sizeof *k);
    }
    return rc;
}

int
cuda_exec_init (cuda_exec_t *self, const uint8_t *image, size_t size, char *err, size_t errlen)
{
    if (self->have_ctx) {
        common_seterr (err, errlen, "already initialised");
        return -1;
    }
    self->image = malloc (size);
    if (!self->image) {
        common_seterr (err, errlen, "out of memory");
        return -1;
    }
    memcpy (self->image, image, size);
    self->image_size = size;
    CUresult rc;
    const char *step = "cuDevicePrimaryCtxRetain";
    if ((rc = cuDevicePrimaryCtxRetain (&self->ctx, self->device)) != CUDA_SUCCESS)
        goto fail;
    step = "cuCtxSetCurrent";
    if ((rc = cuCtxSetCurrent (self->ctx)) != CUDA_SUCCESS)
        goto fail;
    self->have_ctx = true;
    //  The device heap and printf FIFO must be sized before the first launch.
    step = "cuCtxSetLimit";
    if ((rc = cuCtxSetLimit (CU_LIMIT_PRINTF_FIFO_SIZE, PRINTF_FIFO)) != CUDA_SUCCESS
    ||  (rc = cuCtxSetLimit (CU_LIMIT_MALLOC_HEAP_SIZE, 64u << 20)) != CUDA_SUCCESS)
        goto fail;
    self->flush_bytes = self->dev.l2_bytes * 2;
    if (self->flush_bytes < (8u << 20))
        self->flush_bytes = 8u << 20;
    step = "stream/event/flush buffer";
    if ((rc = cuStreamCreate (&self->stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS
    ||  (rc = cuEventCreate (&self->ev [0], CU_EVENT_DEFAULT)) != CUDA_SUCCESS
    ||  (rc = cuEventCreate (&self->ev [1], CU_EVENT_DEFAULT)) != CUDA_SUCCESS
    ||  (rc = cuMemAlloc (&self->flush, self->flush_bytes)) != CUDA_SUCCESS)
        goto fail;
    step = "internal module";
    if ((rc = s_kernels_load (self->image, &self->internal)) != CUDA_SUCCESS)
        goto fail;
    return 0;
fail:
    common_seterr (err, errlen, "%s: %s (%d)", step, s_cu_name (rc), (int) rc);
    return -1;
}

void
cuda_exec_destroy (cuda_exec_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cuda_exec_t *self = *self_p;
    //  The process is about to exit; the driver frees device memory then.
    free (self->image);
    free (self);
    *self_p = NULL;
}

//  Launch one of our kernels over n items.
static CUresult
s_internal (cuda_exec_t *self, CUfunction fn, uint64_t n, void **params)
{
    uint64_t blocks = (n + THREADS - 1) / THREADS;
    uint64_t cap = (uint64_t) self->dev.sm_count * 16;
    if (blocks > cap)
        blocks = cap;
    if (blocks < 1)
        blocks = 1;
    return cuLaunchKernel (fn, (unsigned) blocks, 1, 1, THREADS, 1, 1, 0, self->stream, params, NULL);
}

//  --- device memory: pooled, scrubbed before reuse ---

static void
s_pool_drain (cuda_exec_t *self)
{
    pool_t *pool = &self->pool;
    if (pool->n == 0)
        return;
    cuStreamSynchronize (self->stream);
    for (size_t i = 0; i < pool->n; i++)
        cuMemFree (pool->blocks [i].ptr);
    pool->n = 0;
    pool->bytes = 0;
}

//  A block of at least bytes: a pooled one of up to twice the size, else
//  a new one; on out-of-memory the pool is drained and it is tried again.
static CUresult
s_alloc (cuda_exec_t *self, size_t bytes, CUdeviceptr *ptr, size_t *got)
{
    if (bytes < 256)
        bytes = 256;
    pool_t *pool = &self->pool;
    size_t best = pool->n;
    //  The smallest block that fits, the lowest address among equals: the
    //  same job on the same pool gets the same places (where a tensor lies
    //  moves a memory-bound kernel's time by a few percent).
    for (size_t i = 0; i < pool->n; i++) {
        size_t b = pool->blocks [i].bytes;
        if (b >= bytes && b <= 2 * bytes + (1u << 20)
        &&  (best == pool->n || b < pool->blocks [best].bytes
             || (b == pool->blocks [best].bytes && pool->blocks [i].ptr < pool->blocks [best].ptr)))
            best = i;
    }
    if (best < pool->n) {
        *ptr = pool->blocks [best].ptr;
        *got = pool->blocks [best].bytes;
        pool->bytes -= *got;
        pool->blocks [best] = pool->blocks [--pool->n];
        return CUDA_SUCCESS;
    }
    CUresult rc = cuMemAlloc (ptr, bytes);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
        s_pool_drain (self);
        rc = cuMemAlloc (ptr, bytes);
    }
    *got = bytes;
    return rc;
}

//  Give a block back, scrubbed (zeroed) on the stream first.
static void
s_release (cuda_exec_t *self, CUdeviceptr ptr, size_t bytes)
{
    if (!ptr)
        return;
    pool_t *pool = &self->pool;
    bool scrubbed = cuMemsetD8Async (ptr, 0, bytes, self->stream) == CUDA_SUCCESS;
    if (scrubbed && pool->n < POOL_BLOCKS && pool->bytes + bytes <= self->pool_keep) {
        pool->blocks [pool->n].ptr = ptr;
        pool->blocks [pool->n].bytes = bytes;
        pool->n++;
        pool->bytes += bytes;
        return;
    }
    cuStreamSynchronize (self->stream);
    cuMemFree (ptr);
}

//  --- modules ---

static const char *
s_prog_name (cuda_plan_prog_t p)
{
    return p == PLAN_CANDIDATE? "candidate": p == PLAN_REFERENCE? "reference": "baseline";
}

//  Look up every launch's kernel of program p in module. With validate,
//  also check parameters and geometry against the task and the device
//  (once per job); the opt-in for large dynamic shared memory is set on
//  every lookup (it belongs to the loaded copy).
static int
s_resolve (job_t *job, cuda_plan_prog_t p, CUmodule module, CUfunction *fns, bool validate)
{
    const cuda_plan_t *plan = job->plan;
    const cuda_exec_device_t *d = &job->ex->dev;
    const char *who = s_prog_name (p);
    bool candidate = p == PLAN_CANDIDATE;
    worker_status_t link_status = candidate? STATUS_COMPILE_ERROR: STATUS_INVALID;
    for (uint32_t s = 0; s < plan->nsizes; s++) {
        const cuda_plan_call_t *call = &plan->sizes [s].call [p];
        for (uint32_t l = 0; l < call->nlaunches; l++) {
            const cuda_plan_launch_t *launch = &call->launches [l];
            CUfunction fn;
            CUresult rc = cuModuleGetFunction (&fn, module, launch->kernel);
            if (rc == CUDA_ERROR_NOT_FOUND) {
                s_fail (job, link_status, false, "%s: kernel '%s' is not defined by the module "
                        "(declare it extern \"C\" __global__)", who, launch->kernel);
                return -1;
            }
            if (rc != CUDA_SUCCESS)
                return s_cuda_fail (job, candidate? WHO_CANDIDATE: WHO_TASK, rc, "cuModuleGetFunction");
            fns [s * MAX_LAUNCHES + l] = fn;
            int fn_threads = 0, fn_static = 0;
            cuFuncGetAttribute (&fn_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn);
            cuFuncGetAttribute (&fn_static, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn);
            if (validate) {
                //  The kernel's parameters must match what the task passes.
                for (uint32_t k = 0; k <= launch->nargs && cuda_driver_has_param_info (); k++) {
                    size_t offset = 0, psize = 0;
                    rc = cuFuncGetParamInfo (fn, k, &offset, &psize);
                    if (rc == CUDA_ERROR_NOT_SUPPORTED)
                        break;
                    if (k == launch->nargs) {
                        if (rc == CUDA_SUCCESS) {
                            s_fail (job, link_status, false, "%s: kernel '%s' takes more than the %u "
                                    "parameters the launch passes", who, launch->kernel, launch->nargs);
                            return -1;
                        }
                        break;
                    }
                    if (rc != CUDA_SUCCESS) {
                        s_fail (job, link_status, false, "%s: kernel '%s' takes %u parameters, the "
                                "launch passes %u", who, launch->kernel, k, launch->nargs);
                        return -1;
                    }
                    int32_t a = launch->args [k];
                    size_t want = a < 0 || plan->args [a].kind != ARG_SCALAR
                                ? sizeof (CUdeviceptr): common_dtype_size (plan->args [a].dtype);
                    if (psize != want) {
                        s_fail (job, link_status, false, "%s: parameter %u of kernel '%s' is %zu bytes, "
                                "but '%s' is %zu bytes", who, k, launch->kernel, psize,
                                a < 0? "workspace": plan->args [a].name, want);
                        return -1;
                    }
                }
                //  Launch geometry: a clear `invalid`, not a driver error.
                for (int i = 0; i < 3; i++)
                    if (launch->block [i] > d->max_block [i] || launch->grid [i] > d->max_grid [i]) {
                        s_fail (job, STATUS_INVALID, false, "%s launch %u ('%s') at size %u: grid "
                                "[%lld,%lld,%lld] block [%lld,%lld,%lld] exceeds the device's limits "
                                "(grid [%d,%d,%d], block [%d,%d,%d])", who, l, launch->kernel,
                                plan->sizes [s].index,
                                (long long) launch->grid [0], (long long) launch->grid [1],
                                (long long) launch->grid [2], (long long) launch->block [0],
                                (long long) launch->block [1], (long long) launch->block [2],
                                d->max_grid [0], d->max_grid [1], d->max_grid [2],
                                d->max_block [0], d->max_block [1], d->max_block [2]);
                        return -1;
                    }
                int64_t threads = launch->block [0] * launch->block [1] * launch->block [2];
                int limit = fn_threads > 0 && fn_threads < d->max_threads? fn_threads: d->max_threads;
                if (threads > limit) {
                    s_fail (job, STATUS_INVALID, false, "%s launch %u ('%s') at size %u: %lld threads "
                            "per block, the kernel allows at most %d (device %d)", who, l,
                            launch->kernel, plan->sizes [s].index, (long long) threads, limit,
                            d->max_threads);
                    return -1;
                }
                if (launch->shared + fn_static > d->shared_optin) {
                    s_fail (job, STATUS_INVALID, false, "%s launch %u ('%s') at size %u: %lld bytes "
                            "of dynamic + %d static shared memory, the device allows %d per block", who,
                            l, launch->kernel, plan->sizes [s].index, (long long) launch->shared,
                            fn_static, d->shared_optin);
                    return -1;
                }
            }
            if (launch->shared + fn_static > d->shared_default) {
                rc = cuFuncSetAttribute (fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         (int) launch->shared);
                if (rc != CUDA_SUCCESS) {
                    s_fail (job, STATUS_INVALID, false, "%s launch %u ('%s'): opting in to %lld bytes "
                            "of dynamic shared memory failed: %s", who, l, launch->kernel,
                            (long long) launch->shared, s_cu_name (rc));
                    return -1;
                }
            }
        }
    }
    return 0;
}

static void
s_trusted_unload (job_t *job, trusted_t *t)
{
    (void) job;
    if (t->own_k && t->k.module)
        cuModuleUnload (t->k.module);
    for (int p = PLAN_REFERENCE; p <= PLAN_BASELINE; p++) {
        if (t->mod [p])
            cuModuleUnload (t->mod [p]);
        free (t->fn [p]);
    }
    memset (t, 0, sizeof *t);
}

//  Load the trusted device code afresh (ours from the runner's copy of the
//  image, reference and baseline from the job's), then drop the old copies.
static int
s_trusted_load (job_t *job, bool validate)
{
    const cuda_plan_t *plan = job->plan;
    trusted_t fresh;
    memset (&fresh, 0, sizeof fresh);
    CUresult rc;
    if (!plan->reload && !validate)
        return 0;
    {
        if (plan->reload) {
            if ((rc = s_kernels_load (job->ex->image, &fresh.k)) != CUDA_SUCCESS) {
                s_trusted_unload (job, &fresh);
                return s_cuda_fail (job, WHO_US, rc, "loading the internal kernels");
            }
            fresh.own_k = true;
        }
        else
            fresh.k = job->ex->internal;
        for (int p = PLAN_REFERENCE; p <= PLAN_BASELINE; p++) {
            if (p == PLAN_BASELINE && !plan->has_baseline)
                continue;
            fresh.fn [p] = calloc ((size_t) plan->nsizes * MAX_LAUNCHES, sizeof (CUfunction));
            if (!fresh.fn [p]) {
                s_trusted_unload (job, &fresh);
                s_fail (job, STATUS_INTERNAL_ERROR, false, "out of memory");
                return -1;
            }
            if ((rc = cuModuleLoadData (&fresh.mod [p], job->images [p])) != CUDA_SUCCESS) {
                fresh.mod [p] = NULL;
                s_trusted_unload (job, &fresh);
                char what [64];
                snprintf (what, sizeof what, "loading the %s module", s_prog_name ((cuda_plan_prog_t) p));
                return s_cuda_fail (job, WHO_TASK, rc, what);
            }
            if (s_resolve (job, (cuda_plan_prog_t) p, fresh.mod [p], fresh.fn [p], validate)) {
                s_trusted_unload (job, &fresh);
                return -1;
            }
        }
    }
    s_trusted_unload (job, &job->trusted);
    job->trusted = fresh;
    job->fresh = true;
    if (plan->reload && !validate)
        job->reloads++;
    return 0;
}

//  After a candidate run, before any trusted device code runs again.
static int
s_after_candidate (job_t *job)
{
    if (!job->plan->reload)
        return 0;               //  accepted: device code is taken to be read-only
    job->fresh = false;
    return s_trusted_load (job, false);
}

static int
s_load_candidate (job_t *job)
{
    const cuda_plan_t *plan = job->plan;
    size_t free_before = 0, free_after = 0, total = 0;
    cuMemGetInfo (&free_before, &total);
    CUresult rc;
    char log [8192];
    log [0] = 0;
    if (plan->candidate_ptx) {
        CUjit_option opts [] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
        void *vals [] = { log, (void *) (uintptr_t) sizeof log };
        rc = cuModuleLoadDataEx (&job->cand_mod, job->images [PLAN_CANDIDATE], 2, opts, vals);
    }
    else
        rc = cuModuleLoadData (&job->cand_mod, job->images [PLAN_CANDIDATE]);
    if (rc != CUDA_SUCCESS) {
        job->cand_mod = NULL;
        if (plan->candidate_ptx && rc != CUDA_ERROR_OUT_OF_MEMORY) {
            s_fail (job, STATUS_COMPILE_ERROR, false, "PTX load failed: %s: %.400s", s_cu_name (rc), log);
            return -1;
        }
        return s_cuda_fail (job, WHO_CANDIDATE, rc, "loading the candidate's module");
    }
    cuMemGetInfo (&free_after, &total);
    job->static_bytes = free_before > free_after? free_before - free_after: 0;
    if (job->static_bytes > MAX_STATIC) {
        s_fail (job, STATUS_RUNTIME_ERROR, false, "the candidate's module takes %llu bytes of device "
                "memory for its globals, over the %llu limit",
                (unsigned long long) job->static_bytes, (unsigned long long) MAX_STATIC);
        return -1;
    }
    job->cand_fn = calloc ((size_t) plan->nsizes * MAX_LAUNCHES, sizeof (CUfunction));
    if (!job->cand_fn) {
        s_fail (job, STATUS_INTERNAL_ERROR, false, "out of memory");
        return -1;
    }
    return s_resolve (job, PLAN_CANDIDATE, job->cand_mod, job->cand_fn, true);
}

//  --- buffers ---

#define B_CAND(a)   (a)
#define B_RIN(a)    (MAX_ARGS + (a))
#define B_ROUT(a)   (2 * MAX_ARGS + (a))
#define B_BASE(a)   (3 * MAX_ARGS + (a))
#define B_WS(p)     (4 * MAX_ARGS + (p))
#define B_SLOTS     (4 * MAX_ARGS + 3)

static int
s_alloc_job (job_t *job)
{
    cuda_exec_t *ex = job->ex;
    const cuda_plan_t *plan = job->plan;
    uint64_t need = cuda_plan_device_bytes (plan);
    if (need > ex->dev.mem_total) {
        s_fail (job, STATUS_INVALID, false, "the job needs %.2f GiB of device memory (the candidate's "
                "tensors, the reference's, workspaces), the device has %.2f GiB",
                (double) need / (1u << 30), (double) ex->dev.mem_total / (1u << 30));
        return -1;
    }
    struct { CUdeviceptr *ptr; size_t index; uint64_t bytes; const char *what; } want [MAX_ARGS * 4 + 4];
    size_t n = 0;
    for (uint32_t a = 0; a < plan->nargs; a++) {
        common_arg_kind_t kind = plan->args [a].kind;
        if (kind == ARG_SCALAR)
            continue;
        uint64_t bytes = cuda_plan_max_bytes (plan, a);
        const char *name = plan->args [a].name;
        want [n++] = (typeof (want [0])) { &job->cand [a], B_CAND (a), bytes, name };
        if (kind == ARG_OUTPUT)
            want [n++] = (typeof (want [0])) { &job->rout [a], B_ROUT (a), bytes, name };
        else
            want [n++] = (typeof (want [0])) { &job->rin [a], B_RIN (a), bytes, name };
        if (plan->has_baseline && kind != ARG_INPUT)
            want [n++] = (typeof (want [0])) { &job->base [a], B_BASE (a), bytes, name };
    }
    for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
        uint64_t ws = cuda_plan_max_workspace (plan, (cuda_plan_prog_t) p);
        if (ws && (p != PLAN_BASELINE || plan->has_baseline))
            want [n++] = (typeof (want [0])) { &job->ws [p], B_WS (p), ws, "workspace" };
    }
    uint32_t ntensors = 0;
    for (uint32_t a = 0; a < plan->nargs; a++)
        ntensors += plan->args [a].kind != ARG_SCALAR;
    job->nslots = ntensors + 1;
    want [n++] = (typeof (want [0])) { &job->slots, B_SLOTS, job->nslots * sizeof (cuda_kernels_check_t), "checks" };
    for (size_t i = 0; i < n; i++) {
        CUresult rc = s_alloc (ex, want [i].bytes, want [i].ptr, &job->bytes [want [i].index]);
        if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
            *want [i].ptr = 0;
            s_fail (job, STATUS_INVALID, false, "device memory exhausted allocating '%s' (%llu bytes); "
                    "the job needs about %.2f GiB", want [i].what, (unsigned long long) want [i].bytes,
                    (double) need / (1u << 30));
            return -1;
        }
        if (rc != CUDA_SUCCESS) {
            *want [i].ptr = 0;
            return s_cuda_fail (job, WHO_US, rc, "cuMemAlloc");
        }
    }
    return 0;
}

static void
s_free_job (job_t *job)
{
    cuda_exec_t *ex = job->ex;
    for (uint32_t a = 0; a < MAX_ARGS; a++) {
        s_release (ex, job->cand [a], job->bytes [B_CAND (a)]);
        s_release (ex, job->rin [a], job->bytes [B_RIN (a)]);
        s_release (ex, job->rout [a], job->bytes [B_ROUT (a)]);
        s_release (ex, job->base [a], job->bytes [B_BASE (a)]);
    }
    for (int p = 0; p < CUDA_PLAN_PROGS; p++)
        s_release (ex, job->ws [p], job->bytes [B_WS (p)]);
    s_release (ex, job->slots, job->bytes [B_SLOTS]);
}

//  --- generation, poison, launches ---

static uint64_t
s_stream_id (uint32_t size_index, uint32_t trial, uint32_t arg)
{
    return kgym_stream (size_index, trial, arg);
}

//  The seed of a set: the job's for the correctness trials (reproducible
//  from the result's seed), one drawn for the job alone for every set from
//  the warm-up on (plan->time_seed).
static uint64_t
s_seed_of (const cuda_plan_t *plan, uint32_t trial)
{
    return trial >= TRIAL_TIMED? plan->time_seed: plan->seed;
}

//  NaN for floats; common_init_poison's random pattern for integers.
static CUresult
s_poison (job_t *job, CUdeviceptr ptr, common_dtype_t dtype, uint64_t count, uint64_t seed, uint64_t stream)
{
    cuda_exec_t *ex = job->ex;
    CUstream st = ex->stream;
    switch (dtype) {
        case DTYPE_F16:  return cuMemsetD16Async (ptr, 0x7E00, count, st);
        case DTYPE_BF16: return cuMemsetD16Async (ptr, 0x7FC0, count, st);
        case DTYPE_F32:  return cuMemsetD32Async (ptr, 0x7FC00000u, count, st);
        //  0x7FF87FF8 twice is a quiet NaN as a double.
        case DTYPE_F64:  return cuMemsetD32Async (ptr, 0x7FF87FF8u, 2 * count, st);
        default: {
            uint64_t bytes = count * common_dtype_size (dtype);
            void *params [] = { &ptr, &bytes, &seed, &stream };
            return s_internal (ex, job->trusted.k.poison_int, (bytes + 15) / 16, params);
        }
    }
}

//  Threads' work items of a generation (kgym_fill, kgym_check_gen): one
//  per element, or per four on common_init's float path.
static uint64_t
s_gen_items (const common_init_t *init, common_dtype_t dtype, uint64_t count)
{
    return common_init_float_path (init, dtype)? (count + 3) / 4: count;
}

static CUresult
s_fill (job_t *job, CUdeviceptr ptr, uint32_t a, uint64_t count, uint64_t seed, uint64_t stream)
{
    const cuda_plan_arg_t *arg = &job->plan->args [a];
    int dt = (int) arg->dtype, dist = (int) arg->init.dist;
    double p0 = arg->init.p0, p1 = arg->init.p1;
    void *params [] = { &ptr, &count, &dt, &dist, &p0, &p1, &seed, &stream };
    return s_internal (job->ex, job->trusted.k.fill, s_gen_items (&arg->init, arg->dtype, count), params);
}

//  Buffers program p works on.
static void
s_buffers (job_t *job, cuda_plan_prog_t p, CUdeviceptr ptrs [MAX_ARGS])
{
    const cuda_plan_t *plan = job->plan;
    for (uint32_t a = 0; a < plan->nargs; a++) {
        common_arg_kind_t kind = plan->args [a].kind;
        if (p == PLAN_CANDIDATE)
            ptrs [a] = job->cand [a];
        else if (kind == ARG_INPUT || (p == PLAN_REFERENCE && kind == ARG_INOUT))
            ptrs [a] = job->rin [a];
        else if (p == PLAN_REFERENCE)
            ptrs [a] = job->rout [a];
        else
            ptrs [a] = job->base [a];
    }
}

//  Fresh inputs (size s, trial) and poisoned outputs for program p.
static int
s_prepare (job_t *job, cuda_plan_prog_t p, uint32_t s, uint32_t trial)
{
    const cuda_plan_t *plan = job->plan;
    const cuda_plan_size_t *size = &plan->sizes [s];
    CUdeviceptr ptrs [MAX_ARGS];
    s_buffers (job, p, ptrs);
    for (uint32_t a = 0; a < plan->nargs; a++) {
        const cuda_plan_arg_t *arg = &plan->args [a];
        uint64_t count = size->count [a];
        if (arg->kind == ARG_SCALAR || count == 0)
            continue;
        //  The baseline reads pure inputs from the reference's copy.
        if (p == PLAN_BASELINE && arg->kind == ARG_INPUT)
            continue;
        uint64_t seed = s_seed_of (plan, trial), stream = s_stream_id (size->index, trial, a);
        if (arg->kind == ARG_OUTPUT)
            CK (job, WHO_US, s_poison (job, ptrs [a], arg->dtype, count, seed, stream), "poisoning outputs");
        else
            CK (job, WHO_US, s_fill (job, ptrs [a], a, count, seed, stream), "generating inputs");
    }
    if (job->ws [p] && size->call [p].workspace)
        CK (job, WHO_US, cuMemsetD8Async (job->ws [p], 0, size->call [p].workspace, job->ex->stream),
            "zeroing the workspace");
    return 0;
}

//  Run program p on size s and wait; timed: flush L2 first, CUDA events around.
static int
s_run (job_t *job, cuda_plan_prog_t p, uint32_t s, bool timed, double *us)
{
    cuda_exec_t *ex = job->ex;
    const cuda_plan_t *plan = job->plan;
    const cuda_plan_size_t *size = &plan->sizes [s];
    const cuda_plan_call_t *call = &size->call [p];
    who_t who = p == PLAN_CANDIDATE? WHO_CANDIDATE: WHO_TASK;
    const char *name = s_prog_name (p);
    CUstream st = ex->stream;
    CUfunction *fns = p == PLAN_CANDIDATE? job->cand_fn: job->trusted.fn [p];
    if (p != PLAN_CANDIDATE && !job->fresh) {
        s_fail (job, STATUS_INTERNAL_ERROR, true, "trusted code would run unreloaded after the candidate");
        return -1;
    }
    CUdeviceptr ptrs [MAX_ARGS];
    s_buffers (job, p, ptrs);
    uint64_t bits [MAX_ARGS];
    for (uint32_t a = 0; a < plan->nargs; a++)
        bits [a] = size->bits [a];
    //  Every candidate launch sequence is measured: its kernels' time is its
    //  budget (eval.timeout), whatever the harness around it takes.
    bool measured = timed || p == PLAN_CANDIDATE;
    if (timed)
        //  Flush L2: write twice its size, a new value each time.
        CK (job, WHO_US, cuMemsetD32Async (ex->flush, ++ex->flush_value, ex->flush_bytes / 4, st),
            "flushing L2");
    if (measured)
        CK (job, WHO_US, cuEventRecord (ex->ev [0], st), "cuEventRecord");
    for (uint32_t l = 0; l < call->nlaunches; l++) {
        const cuda_plan_launch_t *launch = &call->launches [l];
        void *params [MAX_CALLARGS];
        for (uint32_t k = 0; k < launch->nargs; k++) {
            int32_t a = launch->args [k];
            if (a < 0)
                params [k] = &job->ws [p];
            else if (plan->args [a].kind == ARG_SCALAR)
                params [k] = &bits [a];
            else
                params [k] = &ptrs [a];
        }
        CUresult rc = cuLaunchKernel (fns [s * MAX_LAUNCHES + l],
                                      (unsigned) launch->grid [0], (unsigned) launch->grid [1],
                                      (unsigned) launch->grid [2], (unsigned) launch->block [0],
                                      (unsigned) launch->block [1], (unsigned) launch->block [2],
                                      (unsigned) launch->shared, st, params, NULL);
        if (rc != CUDA_SUCCESS) {
            char what [200];
            snprintf (what, sizeof what, "%s launch %u ('%s') at size %u failed to launch",
                      name, l, launch->kernel, size->index);
            return s_cuda_fail (job, who, rc, what);
        }
    }
    if (measured)
        CK (job, WHO_US, cuEventRecord (ex->ev [1], st), "cuEventRecord");
    CUresult rc = cuStreamSynchronize (st);
    if (rc != CUDA_SUCCESS) {
        char what [160];
        snprintf (what, sizeof what, "%s at size %u", name, size->index);
        return s_cuda_fail (job, who, rc, what);
    }
    if (measured) {
        float ms = 0;
        CK (job, WHO_US, cuEventElapsedTime (&ms, ex->ev [0], ex->ev [1]), "cuEventElapsedTime");
        *us = (double) ms * 1000.0;
    }
    if (p == PLAN_CANDIDATE) {
        job->cand_gpu_s += *us / 1e6;
        if (plan->timeout_s > 0 && job->cand_gpu_s > plan->timeout_s) {
            s_fail (job, STATUS_TIMEOUT, false, "timed out: the candidate's kernels ran %.3g s on the "
                    "GPU, over its %.3g s budget (eval.timeout)", job->cand_gpu_s, plan->timeout_s);
            return -1;
        }
        return s_after_candidate (job);
    }
    return 0;
}

//  --- checks ---

//  One queued check: which arg, and against what.
typedef struct {
    uint32_t arg;               //  task arg
    bool input;                 //  bitwise against regeneration (else tolerance vs expected)
} check_t;

//  Fetch WINDOW elements from first and describe the failure as mismatches.
static void
s_describe (job_t *job, const check_t *check, uint32_t s, uint32_t trial, uint64_t first)
{
    const cuda_plan_t *plan = job->plan;
    const cuda_plan_arg_t *arg = &plan->args [check->arg];
    const cuda_plan_size_t *size = &plan->sizes [s];
    size_t esize = common_dtype_size (arg->dtype);
    if (first >= size->count [check->arg])
        return;
    uint64_t n = size->count [check->arg] - first;
    if (n > WINDOW)
        n = WINDOW;
    uint8_t got [WINDOW * 8], want [WINDOW * 8];
    memset (got, 0, sizeof got);
    memset (want, 0, sizeof want);
    //  Pageable host memory only: nothing a kernel can address.
    cuMemcpyDtoH (got, job->cand [check->arg] + first * esize, n * esize);
    if (check->input) {
        uint64_t stream = s_stream_id (size->index, trial, check->arg);
        for (uint64_t i = 0; i < n; i++)
            common_dtype_set (arg->dtype, want, i,
                              common_init_value (&arg->init, arg->dtype, s_seed_of (plan, trial), stream, first + i));
    }
    else {
        CUdeviceptr expected = arg->kind == ARG_INOUT? job->rin [check->arg]: job->rout [check->arg];
        cuMemcpyDtoH (want, expected + first * esize, n * esize);
    }
    common_compare_t cmp;
    if (check->input || plan->exact)
        common_compare_bits (arg->dtype, want, got, n, &cmp);
    else
        common_compare (arg->dtype, want, got, n, plan->atol, plan->rtol, &cmp);
    for (size_t i = 0; i < cmp.nfirst && json_array_size (job->mismatches) < 8; i++)
        json_array_append_new (job->mismatches, json_pack ("{s:s, s:i, s:i, s:I, s:f, s:f}",
            "arg", arg->name, "size", (int) size->index, "trial", (int) trial,
            "index", (json_int_t) (first + cmp.first [i].index),
            "expected", isfinite (cmp.first [i].expected)? cmp.first [i].expected: 0.0,
            "got", isfinite (cmp.first [i].got)? cmp.first [i].got: 0.0));
    if (cmp.nfirst > 0) {
        size_t used = strlen (job->message);
        snprintf (job->message + used, sizeof job->message - used,
                  " (first at index %llu: expected %g, got %g)",
                  (unsigned long long) (first + cmp.first [0].index), cmp.first [0].expected,
                  cmp.first [0].got);
    }
}

//  Queue the input checks (bitwise against regeneration) of size s, trial.
static int
s_queue_input_checks (job_t *job, uint32_t s, uint32_t trial, check_t *checks, uint32_t *n)
{
    const cuda_plan_t *plan = job->plan;
    const cuda_plan_size_t *size = &plan->sizes [s];
    for (uint32_t a = 0; a < plan->nargs; a++) {
        const cuda_plan_arg_t *arg = &plan->args [a];
        uint64_t count = size->count [a];
        if (arg->kind != ARG_INPUT || count == 0)
            continue;
        CUdeviceptr slot = job->slots + *n * sizeof (cuda_kernels_check_t);
        int dt = (int) arg->dtype, dist = (int) arg->init.dist;
        double p0 = arg->init.p0, p1 = arg->init.p1;
        uint64_t seed = s_seed_of (plan, trial), stream = s_stream_id (size->index, trial, a);
        void *params [] = { &job->cand [a], &count, &dt, &dist, &p0, &p1, &seed, &stream, &slot };
        CK (job, WHO_US, s_internal (job->ex, job->trusted.k.check_gen,
                                     s_gen_items (&arg->init, arg->dtype, count), params), "kgym_check_gen");
        checks [*n].arg = a;
        checks [*n].input = true;
        (*n)++;
    }
    return 0;
}

//  Queue the output (and inout) comparisons against the reference's.
static int
s_queue_output_checks (job_t *job, uint32_t s, check_t *checks, uint32_t *n)
{
    const cuda_plan_t *plan = job->plan;
    const cuda_plan_size_t *size = &plan->sizes [s];
    for (uint32_t a = 0; a < plan->nargs; a++) {
        const cuda_plan_arg_t *arg = &plan->args [a];
        uint64_t count = size->count [a];
        if ((arg->kind != ARG_OUTPUT && arg->kind != ARG_INOUT) || count == 0)
            continue;
        CUdeviceptr slot = job->slots + *n * sizeof (cuda_kernels_check_t);
        CUdeviceptr expected = arg->kind == ARG_INOUT? job->rin [a]: job->rout [a];
        int dt = (int) arg->dtype;
        double atol = plan->atol, rtol = plan->rtol;
        int exact = plan->exact;
        void *params [] = { &expected, &job->cand [a], &count, &dt, &atol, &rtol, &exact, &slot };
        CK (job, WHO_US, s_internal (job->ex, job->trusted.k.compare, count, params), "kgym_compare");
        checks [*n].arg = a;
        checks [*n].input = false;
        (*n)++;
    }
    return 0;
}

//  Read the queued checks; incorrect (with mismatches) when one failed.
static int
s_evaluate (job_t *job, uint32_t s, uint32_t trial, const check_t *checks, uint32_t n,
            const char *phase)
{
    const cuda_plan_t *plan = job->plan;
    const cuda_plan_size_t *size = &plan->sizes [s];
    if (n == 0)
        return 0;
    cuda_kernels_check_t res [MAX_ARGS + 1];
    CK (job, WHO_US, cuMemcpyDtoHAsync (res, job->slots, n * sizeof res [0], job->ex->stream), "reading checks");
    CK (job, WHO_US, cuStreamSynchronize (job->ex->stream), "checking");
    for (uint32_t k = 0; k < n; k++) {
        double max_abs, max_rel;
        memcpy (&max_abs, &res [k].max_abs_bits, 8);
        memcpy (&max_rel, &res [k].max_rel_bits, 8);
        if (max_abs > job->max_abs)
            job->max_abs = max_abs;
        if (max_rel > job->max_rel)
            job->max_rel = max_rel;
    }
    for (uint32_t k = 0; k < n; k++) {
        if (res [k].bad == 0)
            continue;
        const cuda_plan_arg_t *arg = &plan->args [checks [k].arg];
        job->bad = res [k].bad;
        if (checks [k].input)
            s_fail (job, STATUS_INCORRECT, false, "input '%s' was modified (%s, size %u, trial %u): "
                    "%llu of %llu elements changed", arg->name, phase, size->index, trial,
                    (unsigned long long) res [k].bad, (unsigned long long) size->count [checks [k].arg]);
        else
            s_fail (job, STATUS_INCORRECT, false, "%s '%s' is wrong (%s, size %u, trial %u): "
                    "%llu of %llu elements outside atol %g + rtol %g", arg->kind == ARG_INOUT?
                    "inout": "output", arg->name, phase, size->index, trial,
                    (unsigned long long) res [k].bad, (unsigned long long) size->count [checks [k].arg],
                    plan->atol, plan->rtol);
        s_describe (job, &checks [k], s, trial, ~res [k].first_inv);
        return -1;
    }
    return 0;
}

//  Expected outputs leave the device before the candidate runs again.
static int
s_scrub_expected (job_t *job, uint32_t s)
{
    const cuda_plan_t *plan = job->plan;
    const cuda_plan_size_t *size = &plan->sizes [s];
    for (uint32_t a = 0; a < plan->nargs; a++) {
        common_arg_kind_t kind = plan->args [a].kind;
        if ((kind != ARG_OUTPUT && kind != ARG_INOUT) || size->bytes [a] == 0)
            continue;
        CUdeviceptr ptr = kind == ARG_INOUT? job->rin [a]: job->rout [a];
        CK (job, WHO_US, cuMemsetD8Async (ptr, 0, size->bytes [a], job->ex->stream), "scrubbing");
    }
    return 0;
}

//  --- the profiled set ---

//  CUPTI on for the launches that follow. Work queued earlier (generation,
//  checks) finishes first, so the window holds one program's kernels only.
//  A CUPTI failure costs the profile (prof_why), never the job.
static int
s_profile_begin (job_t *job)
{
    if (job->prof_why [0])
        return 0;
    CK (job, WHO_US, cuStreamSynchronize (job->ex->stream), "synchronising before the profiled run");
    char why [256];
    if (cuda_cupti_begin (&job->pending_begin, why, sizeof why)) {
        snprintf (job->prof_why, sizeof job->prof_why, "%s", why);
        return 0;
    }
    job->collecting = true;
    return 0;
}

//  Records handed over join the pool (taken).
static void
s_pool_add (job_t *job, cuda_profile_record_t *records, size_t n, bool truncated)
{
    job->prof_truncated |= truncated;
    if (job->npool + n > S_POOL_MAX) {
        job->prof_truncated = true;
        n = S_POOL_MAX - job->npool;
    }
    if (job->npool + n > job->maxpool) {
        size_t grown = job->npool + n + 64;
        cuda_profile_record_t *pool = realloc (job->pool, grown * sizeof *pool);
        if (!pool) {
            job->prof_truncated = true;
            free (records);
            return;
        }
        job->pool = pool;
        job->maxpool = grown;
    }
    memcpy (job->pool + job->npool, records, n * sizeof *records);
    job->npool += n;
    free (records);
}

//  CUPTI off after program p's launches (s_run has synchronised): its
//  window closes; what was handed over joins the pool.
static void
s_profile_end (job_t *job, cuda_plan_prog_t p, double run_us)
{
    if (!job->collecting)
        return;
    job->collecting = false;
    char why [256];
    bool truncated = false;
    size_t dropped = 0, n = 0;
    uint64_t end_ns = 0;
    cuda_profile_record_t *records = NULL;
    if (cuda_cupti_end (job->ex->ctx, &end_ns, &records, &n, &truncated, &dropped, why, sizeof why)) {
        snprintf (job->prof_why, sizeof job->prof_why, "%s", why);
        return;
    }
    s_pool_add (job, records, n, truncated);
    job->prof_dropped += dropped;
    job->win_begin [p] = job->pending_begin;
    job->win_end [p] = end_ns;
    job->prof_done [p] = true;
    job->prof_us [p] = run_us;
}

//  Each profiled program's records: those of the pool (late deliveries
//  collected first) that started inside its latest window. A record from
//  an earlier window or set belongs to none and is left out.
static void
s_profile_gather (job_t *job)
{
    if (job->prof_why [0])
        return;
    cuda_profile_record_t *late = NULL;
    size_t n = 0;
    bool truncated = false;
    char why [256];
    if (cuda_cupti_collect (&late, &n, &truncated, why, sizeof why) == 0)
        s_pool_add (job, late, n, truncated);
    for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
        free (job->prof_rec [p]);
        job->prof_rec [p] = NULL;
        job->prof_n [p] = 0;
        if (!job->prof_done [p])
            continue;
        job->prof_rec [p] = malloc ((job->npool? job->npool: 1) * sizeof (cuda_profile_record_t));
        if (!job->prof_rec [p]) {
            snprintf (job->prof_why, sizeof job->prof_why, "out of memory");
            return;
        }
        for (size_t i = 0; i < job->npool; i++)
            if (job->pool [i].start_ns >= job->win_begin [p] && job->pool [i].start_ns <= job->win_end [p])
                job->prof_rec [p] [job->prof_n [p]++] = job->pool [i];
    }
}

//  The occupancy API's resident blocks per SM for every declared launch of
//  the profiled programs at the timing size (-1 where it would not say).
static void
s_profile_occupancy (job_t *job)
{
    const cuda_plan_t *plan = job->plan;
    uint32_t ts = plan->timing_size;
    for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
        CUfunction *fns = p == PLAN_CANDIDATE? job->cand_fn: job->trusted.fn [p];
        const cuda_plan_call_t *call = &plan->sizes [ts].call [p];
        if (!job->prof_done [p] || !fns)
            continue;
        job->prof_blocks [p] = malloc ((call->nlaunches? call->nlaunches: 1) * sizeof (int));
        for (uint32_t l = 0; job->prof_blocks [p] && l < call->nlaunches; l++) {
            const cuda_plan_launch_t *launch = &call->launches [l];
            int64_t threads = launch->block [0] * launch->block [1] * launch->block [2];
            int blocks = -1;
            if (cuOccupancyMaxActiveBlocksPerMultiprocessor (&blocks, fns [ts * MAX_LAUNCHES + l], (int) threads,
                                                             (size_t) launch->shared) != CUDA_SUCCESS)
                blocks = -1;
            job->prof_blocks [p][l] = blocks;
        }
    }
}

//  Program p's summary (and its missing launches), or NULL when it was not profiled.
static json_t *
s_profile_program (job_t *job, cuda_plan_prog_t p, uint32_t *missing)
{
    const cuda_plan_t *plan = job->plan;
    *missing = 0;
    if (!job->prof_done [p])
        return NULL;
    cuda_profile_input_t in = {
        .records = job->prof_rec [p], .nrecords = job->prof_n [p],
        .call = &plan->sizes [plan->timing_size].call [p], .blocks_per_sm = job->prof_blocks [p],
        .device = &job->ex->prof, .bytes = plan->roofline_bytes, .run_us = job->prof_us [p],
        .demangle = cuda_cupti_demangle,
    };
    return cuda_profile_summarise (&in, missing);
}

//  True when a profiled program's records lack one of its declared launches.
static bool
s_profile_incomplete (job_t *job)
{
    s_profile_gather (job);
    for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
        uint32_t missing = 0;
        json_t *summary = s_profile_program (job, (cuda_plan_prog_t) p, &missing);
        json_decref (summary);
        if (missing)
            return true;
    }
    return false;
}

//  The result's "profile": device, bytes and roofline always; the
//  candidate's kernels at the top level, the reference's and the
//  baseline's below, when the profiled run happened.
static json_t *
s_profile (job_t *job, double median_us)
{
    cuda_exec_t *ex = job->ex;
    const cuda_plan_t *plan = job->plan;
    json_t *profile = json_object ();
    if (!profile)
        return NULL;
    //  The reference is the control: its launches are known to run, so
    //  CUPTI missing one of them means the records cannot be trusted to
    //  judge the candidate's.
    uint32_t ref_missing = 0, cand_missing = 0, base_missing = 0;
    if (plan->profile)
        s_profile_gather (job);
    json_t *ref = s_profile_program (job, PLAN_REFERENCE, &ref_missing);
    char reason [320] = "";
    if (!plan->profile)
        snprintf (reason, sizeof reason, "eval.profile is false");
    else if (job->prof_why [0])
        snprintf (reason, sizeof reason, "no CUPTI: %s", job->prof_why);
    else if (job->prof_dropped)
        snprintf (reason, sizeof reason, "CUPTI dropped %zu kernel records", job->prof_dropped);
    else if (job->prof_truncated)
        snprintf (reason, sizeof reason, "more than %d kernel records in one program's run",
                  CUDA_PROFILE_MAX_RECORDS);
    else if (!job->prof_done [PLAN_CANDIDATE])
        snprintf (reason, sizeof reason, "not profiled: the candidate's status is %s",
                  job->status == STATUS_OK? "unknown": worker_status_name (job->status));
    else if (!ref || ref_missing)
        snprintf (reason, sizeof reason, "CUPTI recorded %zu kernels for the reference's %u launches: "
                  "its records cannot be trusted", job->prof_n [PLAN_REFERENCE],
                  plan->sizes [plan->timing_size].call [PLAN_REFERENCE].nlaunches);
    bool available = reason [0] == 0;
    double floor_us = cuda_profile_floor_us (&ex->prof, plan->roofline_bytes);
    json_object_set_new (profile, "available", json_boolean (available));
    json_object_set_new (profile, "reason", json_string (reason));
    json_object_set_new (profile, "device", cuda_profile_device_json (&ex->prof));
    json_object_set_new (profile, "bytes", json_integer ((json_int_t) plan->roofline_bytes));
    json_object_set_new (profile, "bytes_source", json_string (plan->bytes_declared? "task": "default"));
    json_object_set_new (profile, "roofline_floor_us", floor_us > 0? json_real (floor_us): json_null ());
    json_object_set_new (profile, "roofline_margin", json_real (ex->margin));
    json_object_set_new (profile, "timed_median_us", median_us > 0? json_real (median_us): json_null ());
    json_object_set_new (profile, "roofline_ratio", median_us > 0 && floor_us > 0
                                                    ? json_real (median_us / floor_us): json_null ());
    json_object_set_new (profile, "cupti_dropped", json_integer ((json_int_t) job->prof_dropped));
    json_t *cand = available? s_profile_program (job, PLAN_CANDIDATE, &cand_missing): NULL;
    if (cand) {
        json_object_update (profile, cand);
        json_decref (cand);
        double total = json_number_value (json_object_get (profile, "total_us"));
        json_object_set_new (profile, "total_vs_median", median_us > 0? json_real (total / median_us): json_null ());
    }
    else {
        json_object_set_new (profile, "kernels", json_array ());
        json_object_set_new (profile, "total_us", json_null ());
        json_object_set_new (profile, "declared_launches",
                             json_integer (plan->sizes [plan->timing_size].call [PLAN_CANDIDATE].nlaunches));
        json_object_set_new (profile, "observed_launches", json_null ());
        json_object_set_new (profile, "missing_launches", json_array ());
        json_object_set_new (profile, "extra_kernels", json_null ());
        json_object_set_new (profile, "dram_bw_gbs", json_null ());
        json_object_set_new (profile, "dram_bw_fraction", json_null ());
        json_object_set_new (profile, "run_us", json_null ());
        json_object_set_new (profile, "total_vs_median", json_null ());
    }
    if (!available) {
        json_decref (ref);
        ref = NULL;
    }
    json_t *base = available && plan->has_baseline? s_profile_program (job, PLAN_BASELINE, &base_missing): NULL;
    json_object_set_new (profile, "reference", ref? ref: json_null ());
    json_object_set_new (profile, "baseline", base? base: json_null ());
    return profile;
}

typedef enum { SET_CHECK, SET_WARMUP, SET_TIMED, SET_PROFILE } set_mode_t;

//  Run program p; in the profiled set with CUPTI recording its launches.
static int
s_run_in_set (job_t *job, cuda_plan_prog_t p, uint32_t s, bool timed, bool profiled, double *us)
{
    if (profiled && s_profile_begin (job))
        return -1;
    if (s_run (job, p, s, timed, us))
        return -1;
    if (profiled)
        s_profile_end (job, p, *us);
    return 0;
}

//  One input set: the candidate first, then (freshly loaded) checks, the
//  reference (timed when there is no baseline) and the baseline, the
//  comparison, and the scrub of the expected outputs. The profiled set
//  is a checked set whose programs all run as if timed (L2 flushed).
static int
s_set (job_t *job, uint32_t s, uint32_t trial, set_mode_t mode, const char *phase)
{
    const cuda_plan_t *plan = job->plan;
    bool timed = mode != SET_CHECK;
    bool profiled = mode == SET_PROFILE;
    double us_cand = 0, us_base = 0, us_ref = 0;
    check_t checks [MAX_ARGS + 1];
    uint32_t n = 0;
    if (!job->fresh && s_trusted_load (job, false))
        return -1;
    job->sets++;
    if (s_prepare (job, PLAN_CANDIDATE, s, trial)
    ||  s_run_in_set (job, PLAN_CANDIDATE, s, timed, profiled, &us_cand))
        return -1;
    CK (job, WHO_US, cuMemsetD8Async (job->slots, 0, job->nslots * sizeof (cuda_kernels_check_t),
                                      job->ex->stream), "memset");
    if ((mode == SET_CHECK || profiled) && s_queue_input_checks (job, s, trial, checks, &n))
        return -1;
    if (s_prepare (job, PLAN_REFERENCE, s, trial)
    ||  s_run_in_set (job, PLAN_REFERENCE, s, (timed && !plan->has_baseline) || profiled, profiled, &us_ref))
        return -1;
    us_base = us_ref;
    if (timed && plan->has_baseline
    &&  (s_prepare (job, PLAN_BASELINE, s, trial)
         || s_run_in_set (job, PLAN_BASELINE, s, true, profiled, &us_base)))
        return -1;
    if (s_queue_output_checks (job, s, checks, &n)
    ||  s_evaluate (job, s, trial, checks, n, phase)
    ||  s_scrub_expected (job, s))
        return -1;
    if (mode == SET_TIMED) {
        job->samples [0][job->nsamples] = us_cand;
        job->samples [1][job->nsamples] = us_base;
        job->nsamples++;
    }
    return 0;
}

//  Each program's buffers become the other's: on a GPU a kernel's time
//  depends on where its tensors lie (a memory-bound kernel's, by a few
//  percent), and which of a job's blocks each program gets is the pool's
//  choice, the same for a whole job and another for the next one. Timed
//  runs alternate the two placements (runs 2k and 2k + 1 make a round,
//  worker_grade_speedup_paired), so the speedup holds both programs over
//  both and a grading repeats. Every set makes its inputs and poisons its
//  outputs afresh, and the expected outputs are scrubbed after each set:
//  nothing of one program's is left for the other.
static void
s_swap_placement (job_t *job)
{
    const cuda_plan_t *plan = job->plan;
    for (uint32_t a = 0; a < plan->nargs; a++) {
        common_arg_kind_t kind = plan->args [a].kind;
        if (kind == ARG_SCALAR)
            continue;
        CUdeviceptr *ref = kind == ARG_OUTPUT? &job->rout [a]: &job->rin [a];
        size_t *ref_bytes = &job->bytes [kind == ARG_OUTPUT? B_ROUT (a): B_RIN (a)];
        CUdeviceptr ptr = job->cand [a];
        size_t bytes = job->bytes [B_CAND (a)];
        job->cand [a] = *ref;
        job->bytes [B_CAND (a)] = *ref_bytes;
        *ref = ptr;
        *ref_bytes = bytes;
    }
}

static json_t *
s_samples (const double *samples, uint32_t n)
{
    json_t *array = json_array ();
    for (uint32_t i = 0; i < n; i++)
        json_array_append_new (array, json_real (samples [i]));
    return array;
}

json_t *
cuda_exec_run (cuda_exec_t *self, const cuda_plan_t *plan,
               const uint8_t *const images [3], const size_t sizes [3], bool *fatal)
{
    (void) sizes;
    double t0 = cuda_now ();
    job_t job;
    memset (&job, 0, sizeof job);
    job.ex = self;
    job.plan = plan;
    job.status = STATUS_OK;
    job.mismatches = json_array ();
    job.samples [0] = calloc (plan->timed + 1, sizeof (double));
    job.samples [1] = calloc (plan->timed + 1, sizeof (double));
    for (int p = 0; p < CUDA_PLAN_PROGS; p++)
        job.images [p] = images [p];
    double t_load = 0, t_check = 0, t_time = 0, t_profile = 0;
    if (!job.mismatches || !job.samples [0] || !job.samples [1]) {
        s_fail (&job, STATUS_INTERNAL_ERROR, false, "out of memory");
        goto done;
    }
    if (!self->have_ctx || cuCtxSetCurrent (self->ctx) != CUDA_SUCCESS) {
        s_fail (&job, STATUS_INTERNAL_ERROR, true, "runner was not initialised");
        goto done;
    }
    if (!images [PLAN_CANDIDATE] || !images [PLAN_REFERENCE] || (plan->has_baseline && !images [PLAN_BASELINE])) {
        s_fail (&job, STATUS_INTERNAL_ERROR, false, "job without its module images");
        goto done;
    }
    //  Trusted code first (validated once), then the candidate's module,
    //  which stays loaded for the whole job: state it keeps between
    //  launches meets fresh inputs every time.
    if (s_trusted_load (&job, true) || s_load_candidate (&job) || s_alloc_job (&job))
        goto done;
    t_load = cuda_now () - t0;

    //  The timing size's trials come last, right before the timed runs, and
    //  count as warm-up runs: they run the same launches at the same size
    //  (and check inputs as well as outputs), so only warm-ups beyond them
    //  are run. Every other size first: a wrong candidate is mostly caught
    //  there, on smaller inputs.
    uint32_t ts = plan->timing_size;
    for (uint32_t k = 0; k < plan->nsizes && job.status == STATUS_OK; k++) {
        uint32_t s = k + 1 < plan->nsizes? (k < ts? k: k + 1): ts;
        for (uint32_t t = 0; t < plan->trials && job.status == STATUS_OK; t++)
            s_set (&job, s, t, SET_CHECK, "correctness");
    }
    t_check = cuda_now () - t0 - t_load;

    if (job.status == STATUS_OK && !plan->check_only) {
        for (uint32_t w = plan->trials; w < plan->warmup && job.status == STATUS_OK; w++)
            s_set (&job, ts, TRIAL_WARMUP + w, SET_WARMUP, "warm-up");
        //  Timed sets until the speedup is known well enough for the reward
        //  (worker_grade_stop, the rule the plan carries), plan->timed at most.
        worker_grade_stop_t rule;
        worker_grade_stop_init (&rule, plan->timed, plan->stop_clip);
        rule.min_runs = plan->stop_min < plan->timed? plan->stop_min: plan->timed;
        rule.precision = plan->stop_precision;
        rule.floor = plan->stop_floor;
        rule.margin = plan->stop_margin;
        for (uint32_t r = 0; r < plan->timed && job.stopped == GRADE_STOP_NONE && job.status == STATUS_OK; r++) {
            if (r % 2)
                s_swap_placement (&job);
            int rc = s_set (&job, ts, TRIAL_TIMED + r, SET_TIMED, "timed run");
            if (r % 2)
                s_swap_placement (&job);
            if (rc == 0)
                job.stopped = worker_grade_stop_check_paired (&rule, job.samples [0], job.samples [1],
                                                              job.nsamples);
        }
        //  A kernel that changes behaviour after many runs is caught here
        //  (every timed run's outputs were checked; this set checks its
        //  inputs too). The profiled set, when there is one, is this check.
        if (job.status == STATUS_OK && !plan->profile)
            s_set (&job, ts, TRIAL_FINAL, SET_CHECK, "re-check after timing");
        t_time = cuda_now () - t0 - t_load - t_check;
    }
    //  One more checked set, profiled; never one whose time is a sample.
    if (job.status == STATUS_OK && plan->profile) {
        double tp = cuda_now ();
        s_set (&job, plan->timing_size, TRIAL_PROFILE, SET_PROFILE,
               plan->check_only? "profiled run": "profiled re-check after timing");
        //  CUPTI may hand a kernel's record over late, into the next window:
        //  one more profiled set before a missing launch is held against anyone.
        if (job.status == STATUS_OK && s_profile_incomplete (&job)) {
            log_info ("cuda", "a profiled launch had no record; profiling the set once more");
            s_set (&job, plan->timing_size, TRIAL_PROFILE + 1, SET_PROFILE, "profiled run (again)");
        }
        if (job.status == STATUS_OK)
            s_profile_occupancy (&job);
        t_profile = cuda_now () - tp;
    }

done:
    if (job.collecting && !job.fatal) {
        //  A failure between begin and end: switch CUPTI off, drop the records.
        cuda_profile_record_t *records = NULL;
        size_t nrec = 0, dropped = 0;
        bool truncated = false;
        uint64_t end_ns;
        char why [256];
        cuda_cupti_end (NULL, &end_ns, &records, &nrec, &truncated, &dropped, why, sizeof why);
        free (records);
        job.collecting = false;
    }
    double median_us = 0;
    if (job.status == STATUS_OK && job.nsamples) {
        double *copy = malloc (job.nsamples * sizeof (double));
        if (copy) {
            memcpy (copy, job.samples [0], job.nsamples * sizeof (double));
            worker_timing_t timing;
            worker_grade_timing (&timing, copy, job.nsamples);
            median_us = timing.median_us;
            free (copy);
        }
    }
    json_t *profile = job.fatal? NULL: s_profile (&job, median_us);
    char verdict [512];
    if (profile && job.status == STATUS_OK && cuda_profile_verdict (profile, median_us, self->margin,
                                                                    verdict, sizeof verdict))
        s_fail (&job, STATUS_INCORRECT, false, "%s", verdict);
    if (!job.fatal) {
        if (job.cand_mod)
            cuModuleUnload (job.cand_mod);
        s_trusted_unload (&job, &job.trusted);
        s_free_job (&job);
    }
    free (job.cand_fn);
    for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
        free (job.prof_rec [p]);
        free (job.prof_blocks [p]);
    }
    free (job.pool);
    *fatal = job.fatal;
    json_t *result = json_pack ("{s:s, s:s, s:b, s:f, s:f, s:I, s:o, s:o, s:o, s:{s:f, s:f, s:f, s:f, s:f, s:i}, "
                                "s:I, s:i, s:b}",
        "status", worker_status_name (job.status), "message", job.message, "fatal", job.fatal,
        "max_abs", job.max_abs, "max_rel", job.max_rel, "bad", (json_int_t) job.bad,
        "mismatches", job.mismatches? job.mismatches: json_array (),
        "candidate_us", s_samples (job.samples [0], job.status == STATUS_OK? job.nsamples: 0),
        "baseline_us", s_samples (job.samples [1], job.status == STATUS_OK? job.nsamples: 0),
        "phases", "load_s", t_load, "check_s", t_check, "time_s", t_time, "profile_s", t_profile,
        "total_s", cuda_now () - t0, "sets", (int) job.sets,
        "static_bytes", (json_int_t) job.static_bytes, "reloads", (int) job.reloads,
        "reload", plan->reload);
    if (result && job.stopped != GRADE_STOP_NONE && job.status == STATUS_OK)
        json_object_set_new (result, "stopped", json_string (worker_grade_stop_name (job.stopped)));
    if (result && job.error_name [0])
        json_object_set_new (result, "error", json_string (job.error_name));
    if (result && profile)
        json_object_set_new (result, "profile", profile);
    else
        json_decref (profile);
    free (job.samples [0]);
    free (job.samples [1]);
    return result;
}

//  Can a kernel read or write the code of a device function through the
//  function's address? Decides how much reload protects (docs/cuda.md).
static const char *s_probe_fn [] = { "kg_probe", "kg_read", "kg_write" };

json_t *
cuda_exec_selftest (cuda_exec_t *self, const uint8_t *image)
{
    const char *steps [3] = { "not run", "not run", "not run" };
    unsigned long long host [4] = { 0, 0, 5, 0 };
    CUdeviceptr buf = 0;
    CUmodule mod = NULL;
    char detail [160] = "";
    CUresult rc;
    if (!self->have_ctx || !image || cuCtxSetCurrent (self->ctx) != CUDA_SUCCESS) {
        snprintf (detail, sizeof detail, "not initialised");
        goto done;
    }
    if ((rc = cuModuleLoadData (&mod, image)) != CUDA_SUCCESS
    ||  (rc = cuMemAlloc (&buf, sizeof host)) != CUDA_SUCCESS
    ||  (rc = cuMemcpyHtoD (buf, host, sizeof host)) != CUDA_SUCCESS) {
        snprintf (detail, sizeof detail, "setup: %s", s_cu_name (rc));
        goto done;
    }
    for (int i = 0; i < 3; i++) {
        CUfunction fn;
        if ((rc = cuModuleGetFunction (&fn, mod, s_probe_fn [i])) != CUDA_SUCCESS) {
            steps [i] = s_cu_name (rc);
            break;
        }
        void *params [] = { &buf };
        rc = cuLaunchKernel (fn, 1, 1, 1, 1, 1, 1, 0, self->stream, params, NULL);
        if (rc == CUDA_SUCCESS)
            rc = cuStreamSynchronize (self->stream);
        steps [i] = rc == CUDA_SUCCESS? "succeeded": s_cu_name (rc);
        if (rc != CUDA_SUCCESS)
            break;          //  the context is gone
        cuMemcpyDtoH (host, buf, sizeof host);
    }
done:
    return json_pack ("{s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "call", steps [0], "code_read", steps [1],
                      "code_write", steps [2], "detail", detail, "fn_address", (json_int_t) host [0],
                      "call_result", (json_int_t) host [1], "code_word", (json_int_t) host [3]);
}
