/*  cuda_exec - runs one plan on the GPU: generate, check, time (runner side).

    The only file besides cuda_runner.c that calls the CUDA driver. Every
    call is checked; who is to blame for a failure (candidate, task, us)
    decides the status, and any failure in the candidate's context ends the
    runner after it answers.
*/
#include "cuda_exec.h"
#define CUDA_DRIVER_REDIRECT
#include "cuda_driver.h"
#include "cuda_kernels.h"
#include "cuda_msg.h"
#include "common_compare.h"
#include "common_init.h"
#include "common_philox.h"
#include "worker_outcome.h"
#include <cuda.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS        CUDA_PLAN_MAX_ARGS
#define MAX_CALLARGS    CUDA_PLAN_MAX_CALLARGS
#define MAX_LAUNCHES    CUDA_PLAN_MAX_LAUNCHES
#define REF_CACHE       16                  //  reference/baseline modules kept loaded
#define POOL_BLOCKS     256                 //  free device blocks kept per context
#define MAX_STATIC      (1ull << 30)        //  candidate module's own device memory
#define WINDOW          64                  //  elements fetched to describe a mismatch
#define PRINTF_FIFO     (64u << 10)
#define THREADS         256
#define TRIAL_WARMUP    0x180000u           //  trial ids of generated sets beyond the
#define TRIAL_TIMED     0x100000u           //  correctness trials (< TASK_MAX_TRIALS)
#define TRIAL_FINAL     0x200000u

typedef enum { WHO_CANDIDATE, WHO_TASK, WHO_US } who_t;
typedef enum { CTX_CHECK = 0, CTX_CAND = 1 } ctx_id_t;

//  A device block free for reuse, already scrubbed.
typedef struct {
    CUdeviceptr ptr;            //  address
    size_t bytes;               //  size
} block_t;

//  Freed blocks of one context.
typedef struct {
    block_t blocks [POOL_BLOCKS];   //  free blocks
    size_t n;                       //  entries used
    uint64_t bytes;                 //  their total
} pool_t;

//  A loaded reference or baseline module, by cache key.
typedef struct {
    char key [65];              //  cache key ("" = slot unused)
    CUmodule module;            //  loaded in the check context
    uint64_t used;              //  LRU stamp
} ref_slot_t;

struct cuda_exec_t {
    cuda_exec_device_t dev;     //  facts
    CUdevice device;            //  handle
    bool have_ctx;              //  contexts exist
    CUcontext ctx [2];          //  check (primary), candidate
    CUstream stream [2];        //  one per context
    CUevent ev [2][2];          //  start/stop per context
    CUmodule internal;          //  our kernels (check context)
    uint8_t *image;             //  its cubin (kept for the self-test)
    CUfunction k_fill, k_poison_int, k_compare, k_check_gen;
    CUdeviceptr flush [2];      //  2 x L2 per context
    size_t flush_bytes;         //  each
    uint32_t flush_value;       //  changes every flush
    pool_t pool [2];            //  per context
    uint64_t pool_keep;         //  bytes kept pooled per context at most
    ref_slot_t refs [REF_CACHE];//  loaded reference/baseline modules
    uint64_t stamp;             //  LRU clock
};

//  State of one job.
typedef struct {
    cuda_exec_t *ex;            //  owner
    const cuda_plan_t *plan;    //  the plan
    CUmodule mod [CUDA_PLAN_PROGS];     //  loaded programs (candidate's is ours to unload)
    bool mod_cached [CUDA_PLAN_PROGS];  //  module belongs to refs[]
    //  functions of every launch of every size, per program
    CUfunction *fn [CUDA_PLAN_PROGS];   //  [size * MAX_LAUNCHES + launch]
    //  device buffers (max bytes over sizes)
    CUdeviceptr in [MAX_ARGS];  //  check: inputs and inout (reference works in place)
    CUdeviceptr out [MAX_ARGS]; //  check: reference outputs (expected)
    CUdeviceptr base [MAX_ARGS];//  check: baseline's inout and outputs
    CUdeviceptr cand [MAX_ARGS];//  candidate: every tensor
    CUdeviceptr ws [CUDA_PLAN_PROGS];   //  workspaces (candidate's in its context)
    CUdeviceptr scratch;        //  check: a candidate buffer copied over
    CUdeviceptr slots;          //  check: cuda_kernels_check_t per check
    uint32_t nslots;            //  capacity
    size_t bytes [2][MAX_ARGS * 3 + 8]; //  allocation sizes, for release
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
    uint64_t static_bytes;      //  candidate module's device memory
} job_t;

static void
s_err (char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list args;
    va_start (args, fmt);
    vsnprintf (err, errlen, fmt, args);
    va_end (args);
}

static const char *
s_cu_name (CUresult rc)
{
    const char *name = NULL;
    if (cuGetErrorName (rc, &name) != CUDA_SUCCESS || !name)
        return "CUDA_ERROR_UNKNOWN";
    return name;
}

//  Record a failure once (the first one wins) and say who caused it.
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

//  A CUDA failure: runtime_error for the candidate, invalid for the
//  task's programs, internal_error for us. Always fatal: we do not know
//  whether the error is sticky.
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
        s_err (err, errlen, "no device: %s", why);
        return NULL;
    }
    CUresult rc = cuInit (0);
    if (rc != CUDA_SUCCESS) {
        s_err (err, errlen, "no device: cuInit: %s (%d)", s_cu_name (rc), (int) rc);
        return NULL;
    }
    int count = 0;
    rc = cuDeviceGetCount (&count);
    if (rc != CUDA_SUCCESS || count == 0) {
        s_err (err, errlen, "no device: cuDeviceGetCount: %s, %d devices", s_cu_name (rc), count);
        return NULL;
    }
    if (ordinal < 0 || ordinal >= count) {
        s_err (err, errlen, "no device: ordinal %d of %d devices", ordinal, count);
        return NULL;
    }
    cuda_exec_t *self = calloc (1, sizeof *self);
    if (!self) {
        s_err (err, errlen, "out of memory");
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
        s_err (err, errlen, "device query: %s", s_cu_name (rc));
        free (self);
        return NULL;
    }
    for (size_t i = 0; i < sizeof attrs / sizeof attrs [0]; i++)
        if ((rc = cuDeviceGetAttribute (attrs [i].out, attrs [i].attr, self->device)) != CUDA_SUCCESS) {
            s_err (err, errlen, "cuDeviceGetAttribute %d: %s", (int) attrs [i].attr, s_cu_name (rc));
            free (self);
            return NULL;
        }
    d->mem_total = mem;
    d->l2_bytes = (uint64_t) l2;
    snprintf (d->arch, sizeof d->arch, "sm_%d%d", d->major, d->minor);
    self->pool_keep = mem / 4;
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
    return json_pack ("{s:i, s:s, s:s, s:i, s:i, s:I, s:I, s:i, s:[i,i,i], s:[i,i,i], s:i, s:i, s:s, s:i}",
        "ordinal", d->ordinal, "name", d->name, "arch", d->arch, "major", d->major,
        "sm_count", d->sm_count, "l2_bytes", (json_int_t) d->l2_bytes,
        "mem_total", (json_int_t) d->mem_total, "max_threads", d->max_threads,
        "max_block", d->max_block [0], d->max_block [1], d->max_block [2],
        "max_grid", d->max_grid [0], d->max_grid [1], d->max_grid [2],
        "shared_default", d->shared_default, "shared_optin", d->shared_optin,
        "bus_id", d->bus_id, "driver", d->driver);
}

static CUresult
s_use (cuda_exec_t *self, ctx_id_t ctx)
{
    return cuCtxSetCurrent (self->ctx [ctx]);
}

//  Launch one of our kernels on the check stream over n items.
static CUresult
s_internal (cuda_exec_t *self, CUfunction fn, uint64_t n, void **params)
{
    uint64_t blocks = (n + THREADS - 1) / THREADS;
    uint64_t cap = (uint64_t) self->dev.sm_count * 16;
    if (blocks > cap)
        blocks = cap;
    if (blocks < 1)
        blocks = 1;
    return cuLaunchKernel (fn, (unsigned) blocks, 1, 1, THREADS, 1, 1, 0,
                           self->stream [CTX_CHECK], params, NULL);
}

int
cuda_exec_init (cuda_exec_t *self, const uint8_t *image, size_t size, char *err, size_t errlen)
{
    if (self->have_ctx) {
        s_err (err, errlen, "already initialised");
        return -1;
    }
    self->image = malloc (size);
    if (!self->image) {
        s_err (err, errlen, "out of memory");
        return -1;
    }
    memcpy (self->image, image, size);
    CUresult rc;
    const char *step = "cuDevicePrimaryCtxRetain";
    if ((rc = cuDevicePrimaryCtxRetain (&self->ctx [CTX_CHECK], self->device)) != CUDA_SUCCESS)
        goto fail;
    step = "cuCtxCreate";
    if ((rc = cuCtxCreate (&self->ctx [CTX_CAND], NULL, 0, self->device)) != CUDA_SUCCESS)
        goto fail;
    self->have_ctx = true;
    //  Limits of the candidate's context must be set before its first launch.
    step = "cuCtxSetLimit";
    if ((rc = s_use (self, CTX_CAND)) != CUDA_SUCCESS
    ||  (rc = cuCtxSetLimit (CU_LIMIT_PRINTF_FIFO_SIZE, PRINTF_FIFO)) != CUDA_SUCCESS
    ||  (rc = cuCtxSetLimit (CU_LIMIT_MALLOC_HEAP_SIZE, 64u << 20)) != CUDA_SUCCESS)
        goto fail;
    self->flush_bytes = self->dev.l2_bytes * 2;
    if (self->flush_bytes < (8u << 20))
        self->flush_bytes = 8u << 20;
    for (int c = 0; c < 2; c++) {
        step = "stream/event/flush buffer";
        if ((rc = s_use (self, (ctx_id_t) c)) != CUDA_SUCCESS
        ||  (rc = cuStreamCreate (&self->stream [c], CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS
        ||  (rc = cuEventCreate (&self->ev [c][0], CU_EVENT_DEFAULT)) != CUDA_SUCCESS
        ||  (rc = cuEventCreate (&self->ev [c][1], CU_EVENT_DEFAULT)) != CUDA_SUCCESS
        ||  (rc = cuMemAlloc (&self->flush [c], self->flush_bytes)) != CUDA_SUCCESS)
            goto fail;
    }
    step = "internal module";
    if ((rc = s_use (self, CTX_CHECK)) != CUDA_SUCCESS
    ||  (rc = cuModuleLoadData (&self->internal, image)) != CUDA_SUCCESS
    ||  (rc = cuModuleGetFunction (&self->k_fill, self->internal, "kgym_fill")) != CUDA_SUCCESS
    ||  (rc = cuModuleGetFunction (&self->k_poison_int, self->internal, "kgym_poison_int")) != CUDA_SUCCESS
    ||  (rc = cuModuleGetFunction (&self->k_compare, self->internal, "kgym_compare")) != CUDA_SUCCESS
    ||  (rc = cuModuleGetFunction (&self->k_check_gen, self->internal, "kgym_check_gen")) != CUDA_SUCCESS)
        goto fail;
    return 0;
fail:
    s_err (err, errlen, "%s: %s (%d)", step, s_cu_name (rc), (int) rc);
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

//  --- device memory: pooled, scrubbed before reuse ---

static void
s_pool_drain (cuda_exec_t *self, ctx_id_t c)
{
    pool_t *pool = &self->pool [c];
    if (pool->n == 0)
        return;
    s_use (self, c);
    cuStreamSynchronize (self->stream [c]);
    for (size_t i = 0; i < pool->n; i++)
        cuMemFree (pool->blocks [i].ptr);
    pool->n = 0;
    pool->bytes = 0;
}

//  A block of at least bytes in context c (current). Reuses a pooled block
//  of up to twice the size; on out-of-memory drains both pools and retries.
static CUresult
s_alloc (cuda_exec_t *self, ctx_id_t c, size_t bytes, CUdeviceptr *ptr, size_t *got)
{
    if (bytes < 256)
        bytes = 256;
    pool_t *pool = &self->pool [c];
    size_t best = pool->n;
    for (size_t i = 0; i < pool->n; i++) {
        size_t b = pool->blocks [i].bytes;
        if (b >= bytes && b <= 2 * bytes + (1u << 20)
        &&  (best == pool->n || b < pool->blocks [best].bytes))
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
        s_pool_drain (self, CTX_CHECK);
        s_pool_drain (self, CTX_CAND);
        s_use (self, c);
        rc = cuMemAlloc (ptr, bytes);
    }
    *got = bytes;
    return rc;
}

//  Give a block back: scrubbed (zeroed) on the context's stream first.
static void
s_release (cuda_exec_t *self, ctx_id_t c, CUdeviceptr ptr, size_t bytes)
{
    if (!ptr)
        return;
    pool_t *pool = &self->pool [c];
    s_use (self, c);
    bool scrubbed = cuMemsetD8Async (ptr, 0, bytes, self->stream [c]) == CUDA_SUCCESS;
    if (scrubbed && pool->n < POOL_BLOCKS && pool->bytes + bytes <= self->pool_keep) {
        pool->blocks [pool->n].ptr = ptr;
        pool->blocks [pool->n].bytes = bytes;
        pool->n++;
        pool->bytes += bytes;
        return;
    }
    cuStreamSynchronize (self->stream [c]);
    cuMemFree (ptr);
}

//  --- modules ---

//  Load a module from a cubin or PTX; PTX errors come back in log.
static CUresult
s_load (const uint8_t *image, bool ptx, CUmodule *module, char *log, size_t logsize)
{
    if (!ptx)
        return cuModuleLoadData (module, image);
    log [0] = 0;
    CUjit_option opts [] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *vals [] = { log, (void *) (uintptr_t) logsize };
    return cuModuleLoadDataEx (module, image, 2, opts, vals);
}

//  Look up and check every launch of program p against the device's limits
//  and the task's args. Sets the job's status on failure.
static int
s_resolve (job_t *job, cuda_plan_prog_t p, const char *who)
{
    cuda_exec_t *ex = job->ex;
    const cuda_plan_t *plan = job->plan;
    const cuda_exec_device_t *d = &ex->dev;
    bool candidate = p == PLAN_CANDIDATE;
    worker_status_t link_status = candidate? STATUS_COMPILE_ERROR: STATUS_INVALID;
    job->fn [p] = calloc ((size_t) plan->nsizes * MAX_LAUNCHES, sizeof (CUfunction));
    if (!job->fn [p]) {
        s_fail (job, STATUS_INTERNAL_ERROR, false, "out of memory");
        return -1;
    }
    for (uint32_t s = 0; s < plan->nsizes; s++) {
        const cuda_plan_call_t *call = &plan->sizes [s].call [p];
        for (uint32_t l = 0; l < call->nlaunches; l++) {
            const cuda_plan_launch_t *launch = &call->launches [l];
            CUfunction fn;
            CUresult rc = cuModuleGetFunction (&fn, job->mod [p], launch->kernel);
            if (rc == CUDA_ERROR_NOT_FOUND) {
                s_fail (job, link_status, false, "%s: kernel '%s' is not defined by the module "
                        "(declare it extern \"C\" __global__)", who, launch->kernel);
                return -1;
            }
            if (rc != CUDA_SUCCESS)
                return s_cuda_fail (job, candidate? WHO_CANDIDATE: WHO_TASK, rc, "cuModuleGetFunction");
            job->fn [p][s * MAX_LAUNCHES + l] = fn;

            //  The kernel's parameters must match what the task passes.
            for (uint32_t k = 0; k <= launch->nargs; k++) {
                size_t offset = 0, psize = 0;
                if (!cuda_driver_has_param_info ())
                    break;
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

            //  Launch geometry against the device: a clear `invalid`, not a driver error.
            int fn_threads = 0, fn_static = 0;
            cuFuncGetAttribute (&fn_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn);
            cuFuncGetAttribute (&fn_static, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn);
            int64_t threads = launch->block [0] * launch->block [1] * launch->block [2];
            for (int i = 0; i < 3; i++) {
                if (launch->block [i] > d->max_block [i] || launch->grid [i] > d->max_grid [i]) {
                    s_fail (job, STATUS_INVALID, false, "%s launch %u ('%s') at size %u: grid "
                            "[%lld,%lld,%lld] block [%lld,%lld,%lld] exceeds the device's limits "
                            "(grid [%d,%d,%d], block [%d,%d,%d])", who, l, launch->kernel, s,
                            (long long) launch->grid [0], (long long) launch->grid [1],
                            (long long) launch->grid [2], (long long) launch->block [0],
                            (long long) launch->block [1], (long long) launch->block [2],
                            d->max_grid [0], d->max_grid [1], d->max_grid [2],
                            d->max_block [0], d->max_block [1], d->max_block [2]);
                    return -1;
                }
            }
            int limit = fn_threads > 0 && fn_threads < d->max_threads? fn_threads: d->max_threads;
            if (threads > limit) {
                s_fail (job, STATUS_INVALID, false, "%s launch %u ('%s') at size %u: %lld threads "
                        "per block, the kernel allows at most %d (device %d)", who, l,
                        launch->kernel, s, (long long) threads, limit, d->max_threads);
                return -1;
            }
            if (launch->shared + fn_static > d->shared_optin) {
                s_fail (job, STATUS_INVALID, false, "%s launch %u ('%s') at size %u: %lld bytes of "
                        "dynamic + %d static shared memory, the device allows %d", who, l,
                        launch->kernel, s, (long long) launch->shared, fn_static, d->shared_optin);
                return -1;
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

//  Reference or baseline module: reuse a loaded one with the same key.
static int
s_load_task_module (job_t *job, cuda_plan_prog_t p, const uint8_t *image)
{
    cuda_exec_t *ex = job->ex;
    const char *key = job->plan->keys [p];
    const char *who = p == PLAN_REFERENCE? "reference": "baseline";
    if (*key) {
        for (int i = 0; i < REF_CACHE; i++)
            if (strcmp (ex->refs [i].key, key) == 0) {
                ex->refs [i].used = ++ex->stamp;
                job->mod [p] = ex->refs [i].module;
                job->mod_cached [p] = true;
                return 0;
            }
    }
    char log [4096];
    CUresult rc = s_load (image, false, &job->mod [p], log, sizeof log);
    if (rc != CUDA_SUCCESS) {
        job->mod [p] = NULL;
        char what [64];
        snprintf (what, sizeof what, "loading the %s module", who);
        return s_cuda_fail (job, WHO_TASK, rc, what);
    }
    if (*key) {
        int victim = 0;
        for (int i = 1; i < REF_CACHE; i++)
            if (ex->refs [i].used < ex->refs [victim].used)
                victim = i;
        //  Never evict a module this job already uses.
        if (ex->refs [victim].key [0] && (ex->refs [victim].module == job->mod [PLAN_REFERENCE]
                                          || ex->refs [victim].module == job->mod [PLAN_BASELINE]))
            return 0;
        if (ex->refs [victim].key [0])
            cuModuleUnload (ex->refs [victim].module);
        snprintf (ex->refs [victim].key, sizeof ex->refs [victim].key, "%s", key);
        ex->refs [victim].module = job->mod [p];
        ex->refs [victim].used = ++ex->stamp;
        job->mod_cached [p] = true;
    }
    return 0;
}

static int
s_load_modules (job_t *job, const uint8_t *const images [3], const size_t sizes [3])
{
    cuda_exec_t *ex = job->ex;
    const cuda_plan_t *plan = job->plan;
    (void) sizes;
    CK (job, WHO_US, s_use (ex, CTX_CHECK), "cuCtxSetCurrent");
    if (s_load_task_module (job, PLAN_REFERENCE, images [PLAN_REFERENCE]))
        return -1;
    if (plan->has_baseline && s_load_task_module (job, PLAN_BASELINE, images [PLAN_BASELINE]))
        return -1;
    if (s_resolve (job, PLAN_REFERENCE, "reference"))
        return -1;
    if (plan->has_baseline && s_resolve (job, PLAN_BASELINE, "baseline"))
        return -1;

    //  The candidate's module: its static device memory counts too.
    CK (job, WHO_US, s_use (ex, CTX_CAND), "cuCtxSetCurrent");
    size_t free_before = 0, free_after = 0, total = 0;
    cuMemGetInfo (&free_before, &total);
    char log [8192];
    CUresult rc = s_load (images [PLAN_CANDIDATE], plan->candidate_ptx, &job->mod [PLAN_CANDIDATE],
                          log, sizeof log);
    if (rc != CUDA_SUCCESS) {
        job->mod [PLAN_CANDIDATE] = NULL;
        if (plan->candidate_ptx && rc != CUDA_ERROR_OUT_OF_MEMORY) {
            s_fail (job, STATUS_COMPILE_ERROR, false, "PTX load failed: %s: %.400s",
                    s_cu_name (rc), log);
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
    return s_resolve (job, PLAN_CANDIDATE, "candidate");
}

//  --- buffers ---

static int
s_alloc_job (job_t *job)
{
    cuda_exec_t *ex = job->ex;
    const cuda_plan_t *plan = job->plan;
    //  Fail cleanly (invalid) when the device cannot hold the job at all.
    uint64_t need = cuda_plan_device_bytes (plan);
    if (need > ex->dev.mem_total) {
        s_fail (job, STATUS_INVALID, false, "the job needs %.2f GiB of device memory (tensors in "
                "both contexts, expected outputs, scratch), the device has %.2f GiB",
                (double) need / (1u << 30), (double) ex->dev.mem_total / (1u << 30));
        return -1;
    }
    uint64_t largest = 0;
    size_t *b0 = job->bytes [CTX_CHECK], *b1 = job->bytes [CTX_CAND];
    for (uint32_t a = 0; a < plan->nargs; a++) {
        common_arg_kind_t kind = plan->args [a].kind;
        if (kind == ARG_SCALAR)
            continue;
        uint64_t bytes = cuda_plan_max_bytes (plan, a);
        if (bytes > largest)
            largest = bytes;
        CUresult rc = CUDA_SUCCESS;
        s_use (ex, CTX_CHECK);
        if (kind == ARG_INPUT || kind == ARG_INOUT)
            rc = s_alloc (ex, CTX_CHECK, bytes, &job->in [a], &b0 [a]);
        else
            rc = s_alloc (ex, CTX_CHECK, bytes, &job->out [a], &b0 [MAX_ARGS + a]);
        if (rc == CUDA_SUCCESS && plan->has_baseline && kind != ARG_INPUT)
            rc = s_alloc (ex, CTX_CHECK, bytes, &job->base [a], &b0 [2 * MAX_ARGS + a]);
        if (rc == CUDA_SUCCESS) {
            s_use (ex, CTX_CAND);
            rc = s_alloc (ex, CTX_CAND, bytes, &job->cand [a], &b1 [a]);
        }
        if (rc != CUDA_SUCCESS)
            goto oom;
        continue;
oom:
        if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
            s_fail (job, STATUS_INVALID, false, "device memory exhausted allocating '%s' (%llu bytes); "
                    "the job needs about %.2f GiB", plan->args [a].name,
                    (unsigned long long) bytes, (double) need / (1u << 30));
            return -1;
        }
        return s_cuda_fail (job, WHO_US, rc, "cuMemAlloc");
    }
    CUresult rc;
    size_t *ws_bytes = &b0 [3 * MAX_ARGS];
    s_use (ex, CTX_CHECK);
    if ((rc = s_alloc (ex, CTX_CHECK, largest, &job->scratch, &ws_bytes [0])) != CUDA_SUCCESS)
        return s_cuda_fail (job, rc == CUDA_ERROR_OUT_OF_MEMORY? WHO_TASK: WHO_US, rc, "scratch cuMemAlloc");
    uint32_t nout = 0;
    for (uint32_t a = 0; a < plan->nargs; a++)
        nout += plan->args [a].kind != ARG_SCALAR;
    job->nslots = nout + 1;
    if ((rc = s_alloc (ex, CTX_CHECK, job->nslots * sizeof (cuda_kernels_check_t), &job->slots,
                       &ws_bytes [1])) != CUDA_SUCCESS)
        return s_cuda_fail (job, WHO_US, rc, "cuMemAlloc");
    for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
        uint64_t ws = cuda_plan_max_workspace (plan, (cuda_plan_prog_t) p);
        if (ws == 0 || (p == PLAN_BASELINE && !plan->has_baseline))
            continue;
        ctx_id_t c = p == PLAN_CANDIDATE? CTX_CAND: CTX_CHECK;
        s_use (ex, c);
        if ((rc = s_alloc (ex, c, ws, &job->ws [p], &ws_bytes [2 + p])) != CUDA_SUCCESS) {
            if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
                s_fail (job, STATUS_INVALID, false, "device memory exhausted allocating a %llu-byte workspace",
                        (unsigned long long) ws);
                return -1;
            }
            return s_cuda_fail (job, WHO_US, rc, "cuMemAlloc");
        }
    }
    return 0;
}

static void
s_free_job (job_t *job)
{
    cuda_exec_t *ex = job->ex;
    size_t *b0 = job->bytes [CTX_CHECK], *b1 = job->bytes [CTX_CAND];
    size_t *ws_bytes = &b0 [3 * MAX_ARGS];
    for (uint32_t a = 0; a < MAX_ARGS; a++) {
        s_release (ex, CTX_CHECK, job->in [a], b0 [a]);
        s_release (ex, CTX_CHECK, job->out [a], b0 [MAX_ARGS + a]);
        s_release (ex, CTX_CHECK, job->base [a], b0 [2 * MAX_ARGS + a]);
        s_release (ex, CTX_CAND, job->cand [a], b1 [a]);
    }
    s_release (ex, CTX_CHECK, job->scratch, ws_bytes [0]);
    s_release (ex, CTX_CHECK, job->slots, ws_bytes [1]);
    for (int p = 0; p < CUDA_PLAN_PROGS; p++)
        s_release (ex, p == PLAN_CANDIDATE? CTX_CAND: CTX_CHECK, job->ws [p], ws_bytes [2 + p]);
}

//  --- one set of inputs ---

static uint64_t
s_stream_id (uint32_t size_index, uint32_t trial, uint32_t arg)
{
    return kgym_stream (size_index, trial, arg);
}

//  Poison an output in the candidate's context with driver memsets only:
//  NaN for floats, a random word (from the seed) for integers.
static CUresult
s_poison_cand (job_t *job, CUdeviceptr ptr, common_dtype_t dtype, uint64_t count, uint64_t stream)
{
    CUstream st = job->ex->stream [CTX_CAND];
    uint32_t w [4];
    kgym_random_words (job->plan->seed, stream, 0xFFFFFFFFFFFFull, w);
    switch (dtype) {
        case DTYPE_F16:  return cuMemsetD16Async (ptr, 0x7E00, count, st);
        case DTYPE_BF16: return cuMemsetD16Async (ptr, 0x7FC0, count, st);
        case DTYPE_F32:  return cuMemsetD32Async (ptr, 0x7FC00000u, count, st);
        //  0x7FF87FF8 twice is a quiet NaN as a double.
        case DTYPE_F64:  return cuMemsetD32Async (ptr, 0x7FF87FF8u, 2 * count, st);
        case DTYPE_I8:
        case DTYPE_U8:   return cuMemsetD8Async (ptr, (unsigned char) w [0], count, st);
        case DTYPE_I32:  return cuMemsetD32Async (ptr, w [0], count, st);
        case DTYPE_I64:  return cuMemsetD32Async (ptr, w [0], 2 * count, st);
        default:         return CUDA_ERROR_INVALID_VALUE;
    }
}

//  Poison in the check context: NaN for floats, common_init_poison's pattern for integers.
static CUresult
s_poison_check (job_t *job, CUdeviceptr ptr, common_dtype_t dtype, uint64_t count, uint64_t stream)
{
    cuda_exec_t *ex = job->ex;
    CUstream st = ex->stream [CTX_CHECK];
    switch (dtype) {
        case DTYPE_F16:  return cuMemsetD16Async (ptr, 0x7E00, count, st);
        case DTYPE_BF16: return cuMemsetD16Async (ptr, 0x7FC0, count, st);
        case DTYPE_F32:  return cuMemsetD32Async (ptr, 0x7FC00000u, count, st);
        case DTYPE_F64:  return cuMemsetD32Async (ptr, 0x7FF87FF8u, 2 * count, st);
        default: {
            uint64_t bytes = count * common_dtype_size (dtype), seed = job->plan->seed;
            void *params [] = { &ptr, &bytes, &seed, &stream };
            return s_internal (ex, ex->k_poison_int, (bytes + 15) / 16, params);
        }
    }
}

static CUresult
s_fill (job_t *job, CUdeviceptr ptr, uint32_t a, uint64_t count, uint64_t stream)
{
    cuda_exec_t *ex = job->ex;
    const cuda_plan_arg_t *arg = &job->plan->args [a];
    int dt = (int) arg->dtype, dist = (int) arg->init.dist;
    double p0 = arg->init.p0, p1 = arg->init.p1;
    uint64_t seed = job->plan->seed;
    void *params [] = { &ptr, &count, &dt, &dist, &p0, &p1, &seed, &stream };
    return s_internal (ex, ex->k_fill, count, params);
}

//  Generate a fresh set (size s, trial t) in the check context and give the
//  candidate its copy. with_base also prepares the baseline's buffers.
static int
s_prepare (job_t *job, uint32_t s, uint32_t trial, bool with_base)
{
    cuda_exec_t *ex = job->ex;
    const cuda_plan_t *plan = job->plan;
    const cuda_plan_size_t *size = &plan->sizes [s];
    CK (job, WHO_US, s_use (ex, CTX_CHECK), "cuCtxSetCurrent");
    for (uint32_t a = 0; a < plan->nargs; a++) {
        const cuda_plan_arg_t *arg = &plan->args [a];
        uint64_t stream = s_stream_id (size->index, trial, a);
        uint64_t count = size->count [a];
        if (arg->kind == ARG_SCALAR || count == 0)
            continue;
        if (arg->kind == ARG_OUTPUT) {
            CK (job, WHO_US, s_poison_check (job, job->out [a], arg->dtype, count, stream), "poison");
            if (with_base)
                CK (job, WHO_US, s_poison_check (job, job->base [a], arg->dtype, count, stream), "poison");
        }
        else {
            CK (job, WHO_US, s_fill (job, job->in [a], a, count, stream), "kgym_fill");
            if (with_base && arg->kind == ARG_INOUT)
                CK (job, WHO_US, s_fill (job, job->base [a], a, count, stream), "kgym_fill");
        }
    }
    for (int p = PLAN_REFERENCE; p <= PLAN_BASELINE; p++)
        if (job->ws [p] && size->call [p].workspace)
            CK (job, WHO_US, cuMemsetD8Async (job->ws [p], 0, size->call [p].workspace,
                                              ex->stream [CTX_CHECK]), "memset");
    CK (job, WHO_US, cuStreamSynchronize (ex->stream [CTX_CHECK]), "generating inputs");

    CK (job, WHO_US, s_use (ex, CTX_CAND), "cuCtxSetCurrent");
    CUstream st = ex->stream [CTX_CAND];
    for (uint32_t a = 0; a < plan->nargs; a++) {
        const cuda_plan_arg_t *arg = &plan->args [a];
        uint64_t count = size->count [a];
        if (arg->kind == ARG_SCALAR || count == 0)
            continue;
        if (arg->kind == ARG_OUTPUT)
            CK (job, WHO_US, s_poison_cand (job, job->cand [a], arg->dtype, count,
                                            s_stream_id (size->index, trial, a)), "poison");
        else
            CK (job, WHO_US, cuMemcpyPeerAsync (job->cand [a], ex->ctx [CTX_CAND], job->in [a],
                                                ex->ctx [CTX_CHECK], size->bytes [a], st),
                "copying inputs");
    }
    if (job->ws [PLAN_CANDIDATE] && size->call [PLAN_CANDIDATE].workspace)
        CK (job, WHO_US, cuMemsetD8Async (job->ws [PLAN_CANDIDATE], 0,
                                          size->call [PLAN_CANDIDATE].workspace, st), "memset");
    //  The reference may change inout buffers in place: the copies come first.
    CK (job, WHO_US, cuStreamSynchronize (st), "copying inputs");
    return 0;
}

//  Enqueue program p's launches for size s (its context must be current).
static CUresult
s_launch (job_t *job, cuda_plan_prog_t p, uint32_t s, int *failed_launch)
{
    cuda_exec_t *ex = job->ex;
    const cuda_plan_t *plan = job->plan;
    const cuda_plan_size_t *size = &plan->sizes [s];
    const cuda_plan_call_t *call = &size->call [p];
    CUstream st = ex->stream [p == PLAN_CANDIDATE? CTX_CAND: CTX_CHECK];
    CUdeviceptr ptrs [MAX_ARGS];
    uint64_t bits [MAX_ARGS];
    for (uint32_t a = 0; a < plan->nargs; a++) {
        common_arg_kind_t kind = plan->args [a].kind;
        bits [a] = size->bits [a];
        if (p == PLAN_CANDIDATE)
            ptrs [a] = job->cand [a];
        else if (kind == ARG_INPUT || (p == PLAN_REFERENCE && kind == ARG_INOUT))
            ptrs [a] = job->in [a];
        else if (p == PLAN_REFERENCE)
            ptrs [a] = job->out [a];
        else
            ptrs [a] = job->base [a];
    }
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
        CUresult rc = cuLaunchKernel (job->fn [p][s * MAX_LAUNCHES + l],
                                      (unsigned) launch->grid [0], (unsigned) launch->grid [1],
                                      (unsigned) launch->grid [2], (unsigned) launch->block [0],
                                      (unsigned) launch->block [1], (unsigned) launch->block [2],
                                      (unsigned) launch->shared, st, params, NULL);
        if (rc != CUDA_SUCCESS) {
            *failed_launch = (int) l;
            return rc;
        }
    }
    return CUDA_SUCCESS;
}

//  Run program p (untimed or timed) and wait for it.
static int
s_run (job_t *job, cuda_plan_prog_t p, uint32_t s, bool timed, double *us)
{
    cuda_exec_t *ex = job->ex;
    ctx_id_t c = p == PLAN_CANDIDATE? CTX_CAND: CTX_CHECK;
    who_t who = p == PLAN_CANDIDATE? WHO_CANDIDATE: WHO_TASK;
    const char *name = p == PLAN_CANDIDATE? "candidate": p == PLAN_REFERENCE? "reference": "baseline";
    CUstream st = ex->stream [c];
    CK (job, WHO_US, s_use (ex, c), "cuCtxSetCurrent");
    if (timed) {
        //  Flush L2: write twice its size, a new value each time.
        CK (job, WHO_US, cuMemsetD32Async (ex->flush [c], ++ex->flush_value, ex->flush_bytes / 4, st),
            "flushing L2");
        CK (job, WHO_US, cuEventRecord (ex->ev [c][0], st), "cuEventRecord");
    }
    int failed = -1;
    CUresult rc = s_launch (job, p, s, &failed);
    if (rc != CUDA_SUCCESS) {
        char what [200];
        const cuda_plan_launch_t *launch = &job->plan->sizes [s].call [p].launches [failed];
        snprintf (what, sizeof what, "%s launch %d ('%s') at size %u failed to launch",
                  name, failed, launch->kernel, job->plan->sizes [s].index);
        return s_cuda_fail (job, who, rc, what);
    }
    if (timed)
        CK (job, WHO_US, cuEventRecord (ex->ev [c][1], st), "cuEventRecord");
    rc = cuStreamSynchronize (st);
    if (rc != CUDA_SUCCESS) {
        char what [160];
        snprintf (what, sizeof what, "%s at size %u", name, job->plan->sizes [s].index);
        return s_cuda_fail (job, who, rc, what);
    }
    if (timed) {
        float ms = 0;
        CK (job, WHO_US, cuEventElapsedTime (&ms, ex->ev [c][0], ex->ev [c][1]), "cuEventElapsedTime");
        *us = (double) ms * 1000.0;
    }
    return 0;
}

//  --- checks ---

//  One check queued in a slot: which arg, and against what.
typedef struct {
    uint32_t arg;               //  task arg
    bool input;                 //  bitwise against regeneration (else tolerance vs expected)
} check_t;

//  Fetch WINDOW elements from first and describe the failure as mismatches.
static void
s_describe (job_t *job, const check_t *check, uint32_t s, uint32_t trial, uint64_t first,
            const char *phase)
{
    cuda_exec_t *ex = job->ex;
    const cuda_plan_t *plan = job->plan;
    const cuda_plan_arg_t *arg = &plan->args [check->arg];
    const cuda_plan_size_t *size = &plan->sizes [s];
    size_t esize = common_dtype_size (arg->dtype);
    uint64_t n = size->count [check->arg] - first;
    if (n > WINDOW)
        n = WINDOW;
    uint8_t got [WINDOW * 8], want [WINDOW * 8];
    memset (got, 0, sizeof got);
    memset (want, 0, sizeof want);
    //  Pageable host memory only: nothing a kernel can address.
    s_use (ex, CTX_CAND);
    cuMemcpyDtoH (got, job->cand [check->arg] + first * esize, n * esize);
    if (check->input) {
        uint64_t stream = s_stream_id (size->index, trial, check->arg);
        for (uint64_t i = 0; i < n; i++)
            common_dtype_set (arg->dtype, want, i,
                              common_init_value (&arg->init, plan->seed, stream, first + i));
    }
    else {
        s_use (ex, CTX_CHECK);
        CUdeviceptr expected = arg->kind == ARG_INOUT? job->in [check->arg]: job->out [check->arg];
        cuMemcpyDtoH (want, expected + first * esize, n * esize);
    }
    common_compare_t cmp;
    common_compare (arg->dtype, want, got, n, check->input? 0: plan->atol, check->input? 0: plan->rtol, &cmp);
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
    (void) phase;
}

//  Compare the candidate's outputs (and, with inputs, its inputs) for
//  size s after a run on set trial; sets status incorrect on failure.
static int
s_check (job_t *job, uint32_t s, uint32_t trial, bool inputs, const char *phase)
{
    cuda_exec_t *ex = job->ex;
    const cuda_plan_t *plan = job->plan;
    const cuda_plan_size_t *size = &plan->sizes [s];
    check_t checks [MAX_ARGS];
    uint32_t n = 0;
    CK (job, WHO_US, s_use (ex, CTX_CHECK), "cuCtxSetCurrent");
    CUstream st = ex->stream [CTX_CHECK];
    CK (job, WHO_US, cuMemsetD8Async (job->slots, 0, job->nslots * sizeof (cuda_kernels_check_t), st),
        "memset");
    for (uint32_t a = 0; a < plan->nargs; a++) {
        const cuda_plan_arg_t *arg = &plan->args [a];
        uint64_t count = size->count [a];
        if (arg->kind == ARG_SCALAR || count == 0 || (arg->kind == ARG_INPUT && !inputs))
            continue;
        //  The candidate's buffer comes over into the check context; its
        //  kernels have finished (its stream was synchronised).
        CK (job, WHO_US, cuMemcpyPeerAsync (job->scratch, ex->ctx [CTX_CHECK], job->cand [a],
                                            ex->ctx [CTX_CAND], size->bytes [a], st), "copying outputs");
        CUdeviceptr slot = job->slots + n * sizeof (cuda_kernels_check_t);
        int dt = (int) arg->dtype;
        if (arg->kind == ARG_INPUT) {
            int dist = (int) arg->init.dist;
            double p0 = arg->init.p0, p1 = arg->init.p1;
            uint64_t seed = plan->seed, stream = s_stream_id (size->index, trial, a);
            void *params [] = { &job->scratch, &count, &dt, &dist, &p0, &p1, &seed, &stream, &slot };
            CK (job, WHO_US, s_internal (ex, ex->k_check_gen, count, params), "kgym_check_gen");
        }
        else {
            CUdeviceptr expected = arg->kind == ARG_INOUT? job->in [a]: job->out [a];
            double atol = plan->atol, rtol = plan->rtol;
            void *params [] = { &expected, &job->scratch, &count, &dt, &atol, &rtol, &slot };
            CK (job, WHO_US, s_internal (ex, ex->k_compare, count, params), "kgym_compare");
        }
        checks [n].arg = a;
        checks [n].input = arg->kind == ARG_INPUT;
        n++;
    }
    if (n == 0)
        return 0;
    cuda_kernels_check_t res [MAX_ARGS];
    CK (job, WHO_US, cuMemcpyDtoHAsync (res, job->slots, n * sizeof res [0], st), "reading checks");
    CK (job, WHO_US, cuStreamSynchronize (st), "checking outputs");
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
        s_describe (job, &checks [k], s, trial, ~res [k].first_inv, phase);
        return -1;
    }
    return 0;
}

//  One correctness trial: fresh set, reference, candidate, full check.
static int
s_trial (job_t *job, uint32_t s, uint32_t trial, const char *phase)
{
    if (s_prepare (job, s, trial, false))
        return -1;
    if (s_run (job, PLAN_REFERENCE, s, false, NULL))
        return -1;
    if (s_run (job, PLAN_CANDIDATE, s, false, NULL))
        return -1;
    return s_check (job, s, trial, true, phase);
}

//  One timed pair on a fresh set: candidate and baseline (or reference) in
//  alternating order, then the candidate's outputs checked.
static int
s_timed (job_t *job, uint32_t s, uint32_t trial, uint32_t r, bool record)
{
    const cuda_plan_t *plan = job->plan;
    if (s_prepare (job, s, trial, plan->has_baseline))
        return -1;
    double us_cand = 0, us_base = 0;
    for (int half = 0; half < 2; half++) {
        bool candidate_turn = (half == 0) == (r % 2 == 0);
        if (candidate_turn) {
            if (s_run (job, PLAN_CANDIDATE, s, true, &us_cand))
                return -1;
        }
        else if (plan->has_baseline) {
            if (s_run (job, PLAN_REFERENCE, s, false, NULL) || s_run (job, PLAN_BASELINE, s, true, &us_base))
                return -1;
        }
        else if (s_run (job, PLAN_REFERENCE, s, true, &us_base))
            return -1;
    }
    if (record) {
        job->samples [0][job->nsamples] = us_cand;
        job->samples [1][job->nsamples] = us_base;
        job->nsamples++;
    }
    return s_check (job, s, trial, false, record? "timed run": "warm-up");
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
    double t0 = cuda_now ();
    job_t job;
    memset (&job, 0, sizeof job);
    job.ex = self;
    job.plan = plan;
    job.status = STATUS_OK;
    job.mismatches = json_array ();
    job.samples [0] = calloc (plan->timed + 1, sizeof (double));
    job.samples [1] = calloc (plan->timed + 1, sizeof (double));
    double t_load = 0, t_check = 0, t_time = 0;
    if (!job.mismatches || !job.samples [0] || !job.samples [1]) {
        s_fail (&job, STATUS_INTERNAL_ERROR, false, "out of memory");
        goto done;
    }
    if (!self->have_ctx) {
        s_fail (&job, STATUS_INTERNAL_ERROR, true, "runner was not initialised");
        goto done;
    }
    if (!images [PLAN_CANDIDATE] || !images [PLAN_REFERENCE] || (plan->has_baseline && !images [PLAN_BASELINE])) {
        s_fail (&job, STATUS_INTERNAL_ERROR, false, "job without its module images");
        goto done;
    }
    if (s_load_modules (&job, images, sizes) || s_alloc_job (&job))
        goto done;
    t_load = cuda_now () - t0;

    //  Correctness: every size, every trial, fresh inputs each time.
    for (uint32_t s = 0; s < plan->nsizes && job.status == STATUS_OK; s++)
        for (uint32_t t = 0; t < plan->trials && job.status == STATUS_OK; t++)
            s_trial (&job, s, t, "correctness");
    t_check = cuda_now () - t0 - t_load;

    if (job.status == STATUS_OK && !plan->check_only) {
        uint32_t ts = plan->timing_size;
        for (uint32_t w = 0; w < plan->warmup && job.status == STATUS_OK; w++)
            s_timed (&job, ts, TRIAL_WARMUP + w, w, false);
        for (uint32_t r = 0; r < plan->timed && job.status == STATUS_OK; r++)
            s_timed (&job, ts, TRIAL_TIMED + r, r, true);
        //  A kernel that changes behaviour after many runs is caught here.
        if (job.status == STATUS_OK)
            s_trial (&job, ts, TRIAL_FINAL, "re-check after timing");
        t_time = cuda_now () - t0 - t_load - t_check;
    }

done:
    if (job.mod [PLAN_CANDIDATE]) {
        s_use (self, CTX_CAND);
        cuModuleUnload (job.mod [PLAN_CANDIDATE]);
    }
    for (int p = PLAN_REFERENCE; p <= PLAN_BASELINE; p++)
        if (job.mod [p] && !job.mod_cached [p]) {
            s_use (self, CTX_CHECK);
            cuModuleUnload (job.mod [p]);
        }
    if (!job.fatal)
        s_free_job (&job);
    for (int p = 0; p < CUDA_PLAN_PROGS; p++)
        free (job.fn [p]);
    *fatal = job.fatal;
    json_t *result = json_pack ("{s:s, s:s, s:b, s:f, s:f, s:I, s:o, s:o, s:o, s:{s:f, s:f, s:f, s:f}, s:I}",
        "status", worker_status_name (job.status), "message", job.message, "fatal", job.fatal,
        "max_abs", job.max_abs, "max_rel", job.max_rel, "bad", (json_int_t) job.bad,
        "mismatches", job.mismatches? job.mismatches: json_array (),
        "candidate_us", s_samples (job.samples [0], job.status == STATUS_OK? job.nsamples: 0),
        "baseline_us", s_samples (job.samples [1], job.status == STATUS_OK? job.nsamples: 0),
        "phases", "load_s", t_load, "check_s", t_check, "time_s", t_time, "total_s", cuda_now () - t0,
        "static_bytes", (json_int_t) job.static_bytes);
    if (result && job.error_name [0])
        json_object_set_new (result, "error", json_string (job.error_name));
    free (job.samples [0]);
    free (job.samples [1]);
    return result;
}

json_t *
cuda_exec_selftest (cuda_exec_t *self)
{
    bool peer_ok = false;
    const char *cross = "not run";
    CUresult rc;
    CUdeviceptr victim = 0, mine = 0;
    CUmodule mod = NULL;
    CUfunction fill = NULL;
    char detail [200] = "";
    if (!self->have_ctx || !self->image) {
        snprintf (detail, sizeof detail, "not initialised");
        goto done;
    }
    //  A check-context buffer, and a peer copy of it into the candidate context.
    s_use (self, CTX_CHECK);
    if ((rc = cuMemAlloc (&victim, 4096)) != CUDA_SUCCESS
    ||  (rc = cuMemsetD32 (victim, 0x12345678u, 1024)) != CUDA_SUCCESS) {
        snprintf (detail, sizeof detail, "check alloc: %s", s_cu_name (rc));
        goto done;
    }
    s_use (self, CTX_CAND);
    uint32_t back = 0;
    if ((rc = cuMemAlloc (&mine, 4096)) == CUDA_SUCCESS
    &&  (rc = cuMemcpyPeer (mine, self->ctx [CTX_CAND], victim, self->ctx [CTX_CHECK], 4096)) == CUDA_SUCCESS
    &&  (rc = cuMemcpyDtoH (&back, mine, 4)) == CUDA_SUCCESS)
        peer_ok = back == 0x12345678u;
    //  Our fill kernel, loaded into the candidate context and aimed at the
    //  check context's buffer, as a hostile kernel that learnt the address
    //  would: it must fault and leave the buffer as it was.
    if ((rc = cuModuleLoadData (&mod, self->image)) != CUDA_SUCCESS
    ||  (rc = cuModuleGetFunction (&fill, mod, "kgym_fill")) != CUDA_SUCCESS) {
        snprintf (detail, sizeof detail, "load in candidate context: %s", s_cu_name (rc));
        goto done;
    }
    uint64_t count = 1024, seed = 1, stream = 1;
    int dt = DTYPE_F32, dist = INIT_ONES;
    double p0 = 0, p1 = 1;
    void *params [] = { &victim, &count, &dt, &dist, &p0, &p1, &seed, &stream };
    rc = cuLaunchKernel (fill, 4, 1, 1, 256, 1, 1, 0, self->stream [CTX_CAND], params, NULL);
    if (rc == CUDA_SUCCESS)
        rc = cuStreamSynchronize (self->stream [CTX_CAND]);
    cross = rc == CUDA_SUCCESS? "succeeded": s_cu_name (rc);
done:;
    uint32_t after = 0;
    CUresult read_rc = CUDA_ERROR_NOT_INITIALIZED;
    if (victim) {
        s_use (self, CTX_CHECK);
        read_rc = cuMemcpyDtoH (&after, victim, 4);
    }
    return json_pack ("{s:b, s:s, s:b, s:s, s:I, s:s}", "peer_copy_ok", peer_ok,
                      "cross_context_write", cross,
                      "isolated", strcmp (cross, "succeeded") != 0
                                  && (read_rc != CUDA_SUCCESS || after == 0x12345678u),
                      "detail", detail, "victim_word", (json_int_t) after,
                      "check_context_after", read_rc == CUDA_SUCCESS? "readable": s_cu_name (read_rc));
}
