/*  cpu_backend - the CPU backend: C kernels graded in sandboxed runners.

    Memory: every program's runner maps its own shared memory holding the
    task's tensors at the same offsets (64-byte aligned) and its workspace
    after them. The supervisor keeps the inputs it generated (to prove they
    were not modified) and the reference's outputs (to compare) in its own
    heap, which no runner can reach: the candidate never sees an answer.
*/
#include "common_util.h"
#include "worker_grade.h"
#include "cpu_backend.h"
#include "worker_eval.h"
#include "cpu_cc.h"
#include "cpu_runner.h"
#include "common_compare.h"
#include "common_log.h"
#include "common_philox.h"
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PROG_CANDIDATE 0
#define PROG_REFERENCE 1
#define PROG_BASELINE  2
#define TIMING_SETS    3            //  distinct input sets the timed runs rotate over
#define PING_SAMPLES   7            //  round trips measured to calibrate wall times
#define POISON_KEY     0x9E3779B97F4A7C15ull
#define TRUSTED_RUN_S  60.0         //  per-run limit for reference and baseline
#define MAX_SLOTS      64           //  jobs executing at once in one process

static const char *s_prog_names[] = { "candidate", "reference", "baseline" };

typedef struct cpu_backend_t cpu_backend_t;
typedef struct cpu_backend_job_t cpu_backend_job_t;

struct cpu_backend_t {
    worker_eval_config_t cfg;       //  copy; strings borrowed from the caller
    worker_cache_t *cache;          //  borrowed, may be NULL
    char device[256];               //  "cpu: <model name>"
    pthread_mutex_t lock;           //  guards the slot bitmap
    uint64_t slots_busy;            //  bit i: slot i executes a job
    uint64_t slots_used;            //  bit i: slot i's cgroups may exist
};

struct cpu_backend_job_t {
    const common_job_t *job;        //  borrowed
    uint64_t seed;                  //  input seed
    int so_fd[3];                   //  memfd per program, -1 when absent
};

//  Where each tensor and the workspace of one program live in shared memory.
typedef struct {
    uint64_t offset[TASK_MAX_ARGS]; //  per task arg (tensors only)
    uint64_t tensors_end;           //  end of the tensor area
    uint64_t workspace;             //  offset of the workspace
    uint64_t total;                 //  bytes to map
} s_plan_t;


static void
s_read_cpu_model (char *buf, size_t len)
{
    snprintf (buf, len, "cpu: unknown");
    FILE *file = fopen ("/proc/cpuinfo", "r");
    if (!file)
        return;
    char line [512];
    while (fgets (line, sizeof line, file)) {
        if (strncmp (line, "model name", 10) == 0) {
            char *colon = strchr (line, ':');
            if (colon) {
                colon++;
                while (*colon == ' ')
                    colon++;
                colon [strcspn (colon, "\n")] = 0;
                snprintf (buf, len, "cpu: %s", colon);
            }
            break;
        }
    }
    fclose (file);
}

static cpu_backend_t *
s_new (const worker_eval_config_t *cfg, worker_cache_t *cache, char *err, size_t errlen)
{
    if (!sandbox_runner_path ()) {
        snprintf (err, errlen, "kgym-runner not found (set KGYM_RUNNER)");
        return NULL;
    }
    cpu_backend_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    self->cache = cache;
    pthread_mutex_init (&self->lock, NULL);
    s_read_cpu_model (self->device, sizeof self->device);
    return self;
}

static void
s_destroy (cpu_backend_t **self_p)
{
    cpu_backend_t *self = *self_p;
    if (!self)
        return;
    for (int i = 0; i < MAX_SLOTS; i++)
        if (self->slots_used & (1ull << i)) {
            char slot [64];
            snprintf (slot, sizeof slot, "%d-%d", (int) getpid (), i);
            sandbox_slot_remove (slot);
        }
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

//  A slot index for one executing job, so its runners reuse a cgroup
//  instead of making and removing one each (-1 when all are busy).
static int
s_slot_acquire (cpu_backend_t *self)
{
    int slot = -1;
    pthread_mutex_lock (&self->lock);
    for (int i = 0; i < MAX_SLOTS && slot < 0; i++)
        if (!(self->slots_busy & (1ull << i))) {
            self->slots_busy |= 1ull << i;
            self->slots_used |= 1ull << i;
            slot = i;
        }
    pthread_mutex_unlock (&self->lock);
    return slot;
}

static void
s_slot_release (cpu_backend_t *self, int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock (&self->lock);
    self->slots_busy &= ~(1ull << slot);
    pthread_mutex_unlock (&self->lock);
}

static const char *
s_device (cpu_backend_t *self)
{
    return self->device;
}

static void
s_job_free (cpu_backend_job_t *job)
{
    if (!job)
        return;
    for (int i = 0; i < 3; i++)
        if (job->so_fd [i] >= 0)
            close (job->so_fd [i]);
    free (job);
}

//  Shared object bytes into an anonymous file the runner can dlopen.
static int
s_memfd_from (const uint8_t *data, size_t size)
{
    int fd = memfd_create ("kgym-module", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write (fd, data + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close (fd);
            return -1;
        }
        done += (size_t) n;
    }
    return fd;
}

//  The first error line of a compiler log (else its first line), for one-line messages.
static void
s_first_error (const char *log, char *buf, size_t len)
{
    if (!log || !*log) {
        snprintf (buf, len, "(no compiler output)");
        return;
    }
    const char *line = strstr (log, "error");
    if (line)
        while (line > log && line [-1] != '\n')
            line--;
    else
        line = log;
    size_t n = strcspn (line, "\n");
    snprintf (buf, len, "%.*s", (int) (n < 200? n: 200), line);
}

//  Compile one program. Returns 0 or -1 with out set (status depends on which).
static int
s_compile (cpu_backend_t *self, cpu_backend_job_t *job, int which, const common_program_t *program,
           worker_outcome_t *out)
{
    const char *what = s_prog_names [which];
    char err [512] = "";
    if (program->lang && strcmp (program->lang, "c") != 0) {
        worker_outcome_fail (out, STATUS_INVALID, "%s: lang '%s' is not served by the cpu backend",
                             what, program->lang);
        return -1;
    }
    if (cpu_cc_check_options (program->options, program->noptions, err, sizeof err)) {
        worker_outcome_fail (out, STATUS_INVALID, "%s: %s", what, err);
        return -1;
    }
    sandbox_config_t sandbox;
    sandbox_config_default (&sandbox);
    cpu_cc_result_t result;
    memset (&result, 0, sizeof result);
    int rc = cpu_cc_compile (self->cache, &sandbox, program->source, program->options,
                                program->noptions, job->job->eval.compile_timeout_s,
                                &result, err, sizeof err);
    out->compile_s += result.seconds;
    out->cache_hit [which] = result.cache_hit;
    if (which == PROG_CANDIDATE) {
        memcpy (out->cache_key, result.key, sizeof out->cache_key);
        out->cache_key [sizeof out->cache_key - 1] = 0;
        free (out->compile_log);
        out->compile_log = result.log? strdup (result.log): NULL;
    }
    if (rc == 0) {
        job->so_fd [which] = s_memfd_from (result.so, result.so_size);
        cpu_cc_result_free (&result);
        if (job->so_fd [which] < 0) {
            worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "cannot hold the %s module: %s",
                                 what, strerror (errno));
            return -1;
        }
        return 0;
    }
    char line [256];
    s_first_error (result.log, line, sizeof line);
    if (rc < 0)
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "compiling the %s: %s", what, err);
    else
    if (which == PROG_CANDIDATE && rc == 2)
        worker_outcome_fail (out, STATUS_COMPILE_ERROR, "compile timed out after %.3g s",
                             job->job->eval.compile_timeout_s);
    else
    if (which == PROG_CANDIDATE)
        worker_outcome_fail (out, STATUS_COMPILE_ERROR, "compile error: %s", line);
    else
        worker_outcome_fail (out, STATUS_INVALID, "the task's %s does not compile: %s", what,
                             rc == 2? "timed out": line);
    cpu_cc_result_free (&result);
    return -1;
}

static cpu_backend_job_t *
s_prepare (cpu_backend_t *self, const common_job_t *job, uint64_t seed,
                    worker_outcome_t *out)
{
    cpu_backend_job_t *cjob = calloc (1, sizeof *cjob);
    if (!cjob) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    cjob->job = job;
    cjob->seed = seed;
    cjob->so_fd [0] = cjob->so_fd [1] = cjob->so_fd [2] = -1;
    //  The task's programs first: a broken task is invalid whatever the candidate.
    if (s_compile (self, cjob, PROG_REFERENCE, &job->task->reference, out)
    || (job->task->baseline && s_compile (self, cjob, PROG_BASELINE, job->task->baseline, out))
    ||  s_compile (self, cjob, PROG_CANDIDATE, job->candidate, out)) {
        s_job_free (cjob);
        return NULL;
    }
    return cjob;
}

//  ---------------------------------------------------------------------
//  Execution

//  One program with its runner and layouts.
typedef struct {
    const common_program_t *program;        //  borrowed
    cpu_runner_t *runner;                //  owned
    uint8_t *shm;                           //  runner's shared memory (mapped here)
    common_layout_t layout;                 //  of the current size
    s_plan_t plan;                          //  of the current size
    runner_request_t request;               //  of the current size
    uint64_t rtt_ns;                        //  calibrated round trip
} s_prog_t;

//  Everything execute needs, so helpers take one pointer.
typedef struct {
    cpu_backend_t *self;
    const common_job_t *job;
    const common_task_t *task;
    uint64_t seed;
    worker_outcome_t *out;
    s_prog_t prog[3];
    bool has_baseline;
    uint8_t *inputs;                        //  generated tensors (inputs valid)
    uint8_t *expected;                      //  reference's tensors after its run
    size_t area;                            //  bytes allocated for inputs/expected
    double deadline;                        //  candidate's budget ends (monotonic s)
    sandbox_config_t sandbox;
    cpu_run_outcome_t last;              //  the last run's outcome
} s_exec_t;

static uint64_t
s_align (uint64_t value)
{
    return (value + 63) & ~(uint64_t) 63;
}

static void
s_plan (const common_task_t *task, const common_layout_t *layout, s_plan_t *plan)
{
    uint64_t at = 0;
    for (size_t i = 0; i < task->nargs; i++) {
        plan->offset [i] = at;
        if (task->args [i].kind != ARG_SCALAR)
            at = s_align (at + (layout->bytes [i]? layout->bytes [i]: 1));
    }
    plan->tensors_end = at;
    plan->workspace = at;
    plan->total = s_align (at + (layout->workspace_bytes? layout->workspace_bytes: 1));
}

static uint64_t
s_scalar_bits (common_dtype_t dtype, double value, int64_t ivalue)
{
    uint64_t bits = 0;
    switch (dtype) {
        case DTYPE_F32: { float f = (float) value; memcpy (&bits, &f, 4); break; }
        case DTYPE_F64: memcpy (&bits, &value, 8); break;
        case DTYPE_F16: bits = common_f32_to_f16 ((float) value); break;
        case DTYPE_BF16: bits = common_f32_to_bf16 ((float) value); break;
        case DTYPE_I8:  { int8_t v = (int8_t) ivalue; memcpy (&bits, &v, 1); break; }
        case DTYPE_U8:  { uint8_t v = (uint8_t) ivalue; memcpy (&bits, &v, 1); break; }
        case DTYPE_I32: { int32_t v = (int32_t) ivalue; memcpy (&bits, &v, 4); break; }
        case DTYPE_I64: memcpy (&bits, &ivalue, 8); break;
        default: break;
    }
    return bits;
}

//  The runner request for one program at one size.
static void
s_request (const common_task_t *task, s_prog_t *prog)
{
    runner_request_t *req = &prog->request;
    memset (req, 0, offsetof (runner_request_t, args));
    req->op = RUNNER_OP_RUN;
    req->nargs = (uint32_t) task->nargs + 1;
    for (size_t i = 0; i < task->nargs; i++) {
        const common_arg_t *arg = &task->args [i];
        runner_arg_t *rarg = &req->args [i];
        memset (rarg, 0, sizeof *rarg);
        if (arg->kind == ARG_SCALAR) {
            rarg->kind = RUNNER_ARG_SCALAR;
            rarg->dtype = (uint32_t) arg->dtype;
            rarg->bits = s_scalar_bits (arg->dtype, prog->layout.scalar [i],
                                        prog->layout.scalar_int [i]);
        }
        else {
            rarg->kind = RUNNER_ARG_PTR;
            rarg->offset = prog->plan.offset [i];
        }
    }
    runner_arg_t *ws = &req->args [task->nargs];
    memset (ws, 0, sizeof *ws);
    ws->kind = RUNNER_ARG_PTR;
    ws->offset = prog->plan.workspace;
    req->nlaunches = (uint32_t) prog->layout.nlaunches;
    for (size_t j = 0; j < prog->layout.nlaunches; j++) {
        const common_launch_layout_t *launch = &prog->layout.launches [j];
        runner_launch_t *rl = &req->launches [j];
        memset (rl, 0, sizeof *rl);
        snprintf (rl->kernel, sizeof rl->kernel, "%s", launch->kernel);
        rl->nargs = (uint32_t) launch->nargs;
        for (size_t k = 0; k < launch->nargs; k++)
            rl->args [k] = launch->args [k] < 0? (uint32_t) task->nargs: (uint32_t) launch->args [k];
    }
}

//  Lay out every program for one size; maps the runners' shared memory.
static int
s_setup_size (s_exec_t *ex, size_t size_index)
{
    char err [256];
    uint64_t max_bytes = ex->self->cfg.max_tensor_bytes;
    for (int p = 0; p < 3; p++) {
        s_prog_t *prog = &ex->prog [p];
        if (!prog->runner)
            continue;
        if (common_task_layout (ex->task, prog->program, size_index, max_bytes,
                                &prog->layout, err, sizeof err)) {
            worker_outcome_fail (ex->out, STATUS_INVALID, "%s: %s", s_prog_names [p], err);
            return -1;
        }
        s_plan (ex->task, &prog->layout, &prog->plan);
        prog->shm = cpu_runner_shm (prog->runner, prog->plan.total);
        if (!prog->shm) {
            worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR,
                                 "cannot map %llu bytes of shared memory",
                                 (unsigned long long) prog->plan.total);
            return -1;
        }
        s_request (ex->task, prog);
    }
    size_t area = ex->prog [PROG_REFERENCE].plan.tensors_end;
    if (area > ex->area) {
        free (ex->inputs);
        free (ex->expected);
        ex->inputs = malloc (area);
        ex->expected = malloc (area);
        ex->area = area;
        if (!ex->inputs || !ex->expected) {
            ex->area = 0;
            worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR, "out of memory for %zu bytes", area);
            return -1;
        }
    }
    return 0;
}

//  Fresh inputs for (size, trial) into ex->inputs.
static void
s_generate (s_exec_t *ex, size_t size_index, uint32_t trial)
{
    const s_prog_t *ref = &ex->prog [PROG_REFERENCE];
    for (size_t i = 0; i < ex->task->nargs; i++) {
        const common_arg_t *arg = &ex->task->args [i];
        if (arg->kind == ARG_INPUT || arg->kind == ARG_INOUT)
            common_init_fill (&arg->init, arg->dtype, ex->inputs + ref->plan.offset [i],
                              ref->layout.count [i], ex->seed,
                              kgym_stream ((uint32_t) size_index, trial, (uint32_t) i));
    }
}

//  Load the inputs into a program's shared memory and poison the rest.
static void
s_load (s_exec_t *ex, s_prog_t *prog, size_t size_index, uint32_t trial)
{
    for (size_t i = 0; i < ex->task->nargs; i++) {
        const common_arg_t *arg = &ex->task->args [i];
        uint64_t off = prog->plan.offset [i];
        if (arg->kind == ARG_INPUT || arg->kind == ARG_INOUT)
            memcpy (prog->shm + off, ex->inputs + off, prog->layout.bytes [i]);
        else
        if (arg->kind == ARG_OUTPUT)
            common_init_poison (arg->dtype, prog->shm + off, prog->layout.count [i],
                                ex->seed ^ POISON_KEY,
                                kgym_stream ((uint32_t) size_index, trial, (uint32_t) i));
    }
    //  Scratch starts zeroed (as on the GPU), so it carries nothing from an earlier run.
    if (prog->layout.workspace_bytes)
        memset (prog->shm + prog->plan.workspace, 0, prog->layout.workspace_bytes);
}

//  Run one program; on failure sets out (per program's blame). 0 or -1.
//  The last run's outcome stays in ex->last (per-launch figures for the profile).
static int
s_run (s_exec_t *ex, int which, uint64_t *elapsed_ns)
{
    s_prog_t *prog = &ex->prog [which];
    cpu_run_outcome_t *run_p = &ex->last, run_unused;
    (void) run_unused;
#define run (*run_p)
    double timeout = TRUSTED_RUN_S;
    if (which == PROG_CANDIDATE) {
        timeout = ex->deadline - common_now_s ();
        if (timeout <= 0) {
            worker_outcome_fail (ex->out, STATUS_TIMEOUT,
                                 "the candidate used up its %.3g s budget",
                                 ex->job->eval.timeout_s);
            return -1;
        }
    }
    if (cpu_runner_run (prog->runner, &prog->request, timeout, &run)) {
        worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR, "runner: %s", run.message);
        return -1;
    }
    if (run.status == RUN_OK) {
        *elapsed_ns = run.wall_ns > prog->rtt_ns? run.wall_ns - prog->rtt_ns: 1;
        return 0;
    }
    if (which != PROG_CANDIDATE) {
        worker_outcome_fail (ex->out, STATUS_INVALID, "the task's %s failed: %s",
                             s_prog_names [which], run.message);
        return -1;
    }
    if (run.status == RUN_TIMEOUT)
        worker_outcome_fail (ex->out, STATUS_TIMEOUT, "timed out: the candidate ran past its %.3g s budget",
                             ex->job->eval.timeout_s);
    else
        worker_outcome_fail (ex->out, STATUS_RUNTIME_ERROR, "%s", run.message);
    return -1;
#undef run
}

static void
s_add_mismatch (worker_outcome_t *out, const char *arg, size_t size_index, uint32_t trial,
                uint64_t index, double expected, double got)
{
    if (out->nmismatches >= WORKER_MISMATCH_KEEP)
        return;
    worker_mismatch_t *m = &out->mismatches [out->nmismatches++];
    snprintf (m->arg, sizeof m->arg, "%s", arg);
    m->size_index = (uint32_t) size_index;
    m->trial = trial;
    m->index = index;
    m->expected = expected;
    m->got = got;
}

//  Check the candidate's tensors against the reference's and the inputs.
//  0 when right; -1 with out set to incorrect.
static int
s_check (s_exec_t *ex, const uint8_t *expected, size_t size_index, uint32_t trial,
         const char *when)
{
    s_prog_t *cand = &ex->prog [PROG_CANDIDATE];
    const common_task_t *task = ex->task;
    for (size_t i = 0; i < task->nargs; i++) {
        const common_arg_t *arg = &task->args [i];
        uint64_t off = cand->plan.offset [i];
        if (arg->kind == ARG_INPUT) {
            if (memcmp (cand->shm + off, ex->inputs + off, cand->layout.bytes [i]) == 0)
                continue;
            size_t esize = common_dtype_size (arg->dtype);
            uint64_t first = 0;
            while (first < cand->layout.count [i]
            &&     memcmp (cand->shm + off + first * esize, ex->inputs + off + first * esize, esize) == 0)
                first++;
            s_add_mismatch (ex->out, arg->name, size_index, trial, first,
                            common_dtype_get (arg->dtype, ex->inputs + off, first),
                            common_dtype_get (arg->dtype, cand->shm + off, first));
            worker_outcome_fail (ex->out, STATUS_INCORRECT,
                                 "input '%s' was modified by the candidate (size %zu, %s)",
                                 arg->name, size_index, when);
            return -1;
        }
        if (arg->kind != ARG_OUTPUT && arg->kind != ARG_INOUT)
            continue;
        common_compare_t cmp;
        common_compare (arg->dtype, expected + off, cand->shm + off, cand->layout.count [i],
                        task->atol, task->rtol, &cmp);
        if (cmp.max_abs > ex->out->max_abs)
            ex->out->max_abs = cmp.max_abs;
        if (cmp.max_rel > ex->out->max_rel)
            ex->out->max_rel = cmp.max_rel;
        if (cmp.bad) {
            for (size_t k = 0; k < cmp.nfirst; k++)
                s_add_mismatch (ex->out, arg->name, size_index, trial, cmp.first [k].index,
                                cmp.first [k].expected, cmp.first [k].got);
            ex->out->bad_elements = cmp.bad;
            worker_outcome_fail (ex->out, STATUS_INCORRECT,
                                 "output '%s' wrong in %zu of %zu elements (size %zu, %s)",
                                 arg->name, cmp.bad, cmp.count, size_index, when);
            return -1;
        }
    }
    return 0;
}

//  Inputs for (size, trial), the reference's answer into expected. 0 or -1.
static int
s_reference (s_exec_t *ex, size_t size_index, uint32_t trial, uint8_t *expected)
{
    s_prog_t *ref = &ex->prog [PROG_REFERENCE];
    uint64_t ns;
    s_generate (ex, size_index, trial);
    s_load (ex, ref, size_index, trial);
    if (s_run (ex, PROG_REFERENCE, &ns))
        return -1;
    memcpy (expected, ref->shm, ref->plan.tensors_end);
    //  An answer the reference left as NaN could never be matched: the task is broken.
    for (size_t i = 0; i < ex->task->nargs; i++) {
        const common_arg_t *arg = &ex->task->args [i];
        if (arg->kind != ARG_OUTPUT && arg->kind != ARG_INOUT)
            continue;
        common_compare_t self_cmp;
        uint64_t off = ref->plan.offset [i];
        common_compare (arg->dtype, expected + off, expected + off, ref->layout.count [i],
                        0, 0, &self_cmp);
        if (self_cmp.bad) {
            worker_outcome_fail (ex->out, STATUS_INVALID,
                                 "the task's reference left %zu elements of '%s' NaN or unwritten (size %zu)",
                                 self_cmp.bad, arg->name, size_index);
            return -1;
        }
    }
    return 0;
}

static int
s_correctness (s_exec_t *ex)
{
    for (size_t s = 0; s < ex->task->nsizes; s++) {
        if (s_setup_size (ex, s))
            return -1;
        for (uint32_t t = 0; t < ex->job->eval.trials; t++) {
            uint64_t ns;
            if (s_reference (ex, s, t, ex->expected))
                return -1;
            s_load (ex, &ex->prog [PROG_CANDIDATE], s, t);
            if (s_run (ex, PROG_CANDIDATE, &ns))
                return -1;
            char when [64];
            snprintf (when, sizeof when, "trial %u", t);
            if (s_check (ex, ex->expected, s, t, when))
                return -1;
        }
    }
    return 0;
}

static int
s_calibrate (s_exec_t *ex, s_prog_t *prog)
{
    uint64_t samples [PING_SAMPLES];
    for (int i = 0; i < PING_SAMPLES; i++)
        if (cpu_runner_ping (prog->runner, 5.0, &samples [i]))
            return -1;
    //  Median round trip: what a run's wall time includes beyond the kernel.
    for (int i = 1; i < PING_SAMPLES; i++)
        for (int j = i; j > 0 && samples [j - 1] > samples [j]; j--) {
            uint64_t tmp = samples [j];
            samples [j] = samples [j - 1];
            samples [j - 1] = tmp;
        }
    prog->rtt_ns = samples [PING_SAMPLES / 2];
    return 0;
}

static int
s_timing (s_exec_t *ex)
{
    const common_eval_t *eval = &ex->job->eval;
    size_t ts = ex->task->timing_size;
    int base_which = ex->has_baseline? PROG_BASELINE: PROG_REFERENCE;
    s_prog_t *cand = &ex->prog [PROG_CANDIDATE];
    s_prog_t *base = &ex->prog [base_which];
    if (s_setup_size (ex, ts))
        return -1;
    //  Distinct input sets with their answers, computed before any timed run.
    size_t area = ex->area;
    uint8_t *sets_in = malloc (area * TIMING_SETS);
    uint8_t *sets_exp = malloc (area * TIMING_SETS);
    double *cand_us = calloc (eval->timed, sizeof (double));
    double *base_us = calloc (eval->timed, sizeof (double));
    int rc = -1;
    if (!sets_in || !sets_exp || !cand_us || !base_us) {
        worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR, "out of memory for timing sets");
        goto done;
    }
    for (uint32_t k = 0; k < TIMING_SETS; k++) {
        if (s_reference (ex, ts, TASK_MAX_TRIALS + k, sets_exp + k * area))
            goto done;
        memcpy (sets_in + k * area, ex->inputs, area);
    }
    if (s_calibrate (ex, cand) || s_calibrate (ex, base)) {
        worker_outcome_fail (ex->out, STATUS_RUNTIME_ERROR, "runner stopped answering before timing");
        goto done;
    }
    uint32_t total = eval->warmup + eval->timed;
    for (uint32_t i = 0; i < total; i++) {
        uint32_t k = i % TIMING_SETS;
        uint32_t trial = TASK_MAX_TRIALS + k;
        memcpy (ex->inputs, sets_in + k * area, area);
        uint64_t cns = 0, bns = 0;
        //  Alternate who goes first so neither always inherits a warm cache.
        for (int turn = 0; turn < 2; turn++) {
            bool cand_turn = (turn == 0) == (i % 2 == 0);
            if (cand_turn) {
                s_load (ex, cand, ts, trial);
                if (s_run (ex, PROG_CANDIDATE, &cns))
                    goto done;
                char when [64];
                snprintf (when, sizeof when, "timed run %u", i);
                if (s_check (ex, sets_exp + k * area, ts, trial, when))
                    goto done;
            }
            else {
                s_load (ex, base, ts, trial);
                if (s_run (ex, base_which, &bns))
                    goto done;
            }
        }
        if (i >= eval->warmup) {
            cand_us [i - eval->warmup] = (double) cns / 1000.0;
            base_us [i - eval->warmup] = (double) bns / 1000.0;
        }
    }
    worker_grade_timing (&ex->out->candidate, cand_us, eval->timed);
    worker_grade_timing (&ex->out->baseline, base_us, eval->timed);
    ex->out->baseline_kind = ex->has_baseline? "baseline": "reference";
    ex->out->speedup = ex->out->candidate.median_us > 0
                     ? ex->out->baseline.median_us / ex->out->candidate.median_us: 0;
    rc = 0;
done:
    free (sets_in);
    free (sets_exp);
    free (cand_us);
    free (base_us);
    return rc;
}

//  Per-kernel figures of one program's last run, aggregated by kernel name.
static json_t *
s_profile_of (s_exec_t *ex, int which, double *total_us)
{
    s_prog_t *prog = &ex->prog [which];
    const cpu_run_outcome_t *run = &ex->last;
    json_t *kernels = json_array ();
    double total = 0;
    for (uint32_t j = 0; j < run->nlaunches; j++)
        total += (double) run->launch_wall_ns [j] / 1000.0;
    for (uint32_t j = 0; j < run->nlaunches && j < prog->layout.nlaunches; j++) {
        const char *name = prog->layout.launches [j].kernel;
        size_t k;
        json_t *entry = NULL, *item;
        json_array_foreach (kernels, k, item)
            if (strcmp (json_string_value (json_object_get (item, "name")), name) == 0)
                entry = item;
        double wall = (double) run->launch_wall_ns [j] / 1000.0;
        double cpu = (double) run->launch_cpu_ns [j] / 1000.0;
        if (!entry) {
            entry = json_pack ("{s:s, s:i, s:f, s:f}", "name", name, "launches", (json_int_t) 0,
                               "total_us", 0.0, "cpu_us", 0.0);
            json_array_append_new (kernels, entry);
        }
        json_int_t launches = json_integer_value (json_object_get (entry, "launches")) + 1;
        double sum = json_real_value (json_object_get (entry, "total_us")) + wall;
        json_object_set_new (entry, "launches", json_integer (launches));
        json_object_set_new (entry, "total_us", json_real (sum));
        json_object_set_new (entry, "mean_us", json_real (sum / (double) launches));
        json_object_set_new (entry, "cpu_us", json_real (json_real_value (json_object_get (entry, "cpu_us")) + cpu));
        json_object_set_new (entry, "share", json_real (total > 0? sum / total: 0));
    }
    *total_us = total;
    return kernels;
}

//  One extra run of each program at the timing size, after the timed runs
//  (so measuring never touches the reward), with wall and CPU time per
//  launch. The figures come from inside the runner: informational only.
static void
s_profile (s_exec_t *ex)
{
    size_t ts = ex->task->timing_size;
    json_t *profile = json_pack ("{s:b, s:s, s:s}", "available", 1, "backend", "cpu",
                                 "measured", "per launch, inside the runner (wall and process CPU time); "
                                 "informational, never used for the reward");
    int order [3] = { PROG_CANDIDATE, PROG_REFERENCE, PROG_BASELINE };
    for (int i = 0; i < 3; i++) {
        int which = order [i];
        s_prog_t *prog = &ex->prog [which];
        if (!prog->runner)
            continue;
        uint64_t ns;
        if (s_setup_size (ex, ts))
            break;
        if (which == PROG_CANDIDATE) {
            if (s_reference (ex, ts, TASK_MAX_TRIALS + TIMING_SETS, ex->expected))
                break;
        }
        else
            s_generate (ex, ts, TASK_MAX_TRIALS + TIMING_SETS);
        s_load (ex, prog, ts, TASK_MAX_TRIALS + TIMING_SETS);
        if (s_run (ex, which, &ns))
            break;
        if (which == PROG_CANDIDATE && s_check (ex, ex->expected, ts, TASK_MAX_TRIALS + TIMING_SETS,
                                                "profiled run"))
            break;
        double total = 0;
        json_t *kernels = s_profile_of (ex, which, &total);
        if (which == PROG_CANDIDATE) {
            json_object_set_new (profile, "kernels", kernels);
            json_object_set_new (profile, "total_us", json_real (total));
            json_object_set_new (profile, "declared_launches", json_integer ((json_int_t) prog->layout.nlaunches));
            json_object_set_new (profile, "observed_launches", json_integer ((json_int_t) ex->last.nlaunches));
        }
        else
            json_object_set_new (profile, s_prog_names [which],
                                 json_pack ("{s:o, s:f}", "kernels", kernels, "total_us", total));
    }
    if (!ex->out->extra)
        ex->out->extra = json_object ();
    json_object_set_new (ex->out->extra, "profile", profile);
}

static void
s_execute (cpu_backend_t *self, cpu_backend_job_t **job_p, worker_outcome_t *out)
{
    cpu_backend_job_t *cjob = *job_p;
    *job_p = NULL;
    double start = common_now_s ();
    int slot = -1;
    s_exec_t ex;
    memset (&ex, 0, sizeof ex);
    ex.self = self;
    ex.job = cjob->job;
    ex.task = cjob->job->task;
    ex.seed = cjob->seed;
    ex.out = out;
    ex.has_baseline = cjob->job->task->baseline != NULL;
    ex.prog [PROG_CANDIDATE].program = cjob->job->candidate;
    ex.prog [PROG_REFERENCE].program = &cjob->job->task->reference;
    ex.prog [PROG_BASELINE].program = cjob->job->task->baseline;

    //  Cap each runner at its largest size's tensors plus a fixed allowance.
    uint64_t largest = 0;
    char err [512];
    for (size_t s = 0; s < ex.task->nsizes; s++) {
        common_layout_t layout;
        if (common_task_layout (ex.task, ex.job->candidate, s, self->cfg.max_tensor_bytes,
                                &layout, err, sizeof err)) {
            worker_outcome_fail (out, STATUS_INVALID, "candidate: %s", err);
            goto done;
        }
        if (layout.total_bytes > largest)
            largest = layout.total_bytes;
    }
    sandbox_config_default (&ex.sandbox);
    ex.sandbox.mem_bytes = self->cfg.sandbox_mem_bytes + 2 * largest;
    char slot_name [64];
    slot = s_slot_acquire (self);
    if (slot >= 0) {
        snprintf (slot_name, sizeof slot_name, "%d-%d", (int) getpid (), slot);
        ex.sandbox.slot = slot_name;
    }

    //  Start every runner first, then wait for them: their start-up overlaps.
    for (int p = 0; p < 3; p++) {
        if (cjob->so_fd [p] < 0)
            continue;
        ex.prog [p].runner = cpu_runner_start (&ex.sandbox, cjob->so_fd [p], err, sizeof err);
        if (!ex.prog [p].runner) {
            worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "cannot start the %s's runner: %s",
                                 s_prog_names [p], err);
            goto done;
        }
    }
    for (int p = 0; p < 3; p++) {
        if (!ex.prog [p].runner || cpu_runner_ready (ex.prog [p].runner, err, sizeof err) == 0)
            continue;
        //  A module that does not load (undefined symbol...) is the candidate's build failing.
        if (p == PROG_CANDIDATE && strncmp (err, "load: ", 6) == 0)
            worker_outcome_fail (out, STATUS_COMPILE_ERROR, "the candidate does not link: %s", err + 6);
        else
        if (p != PROG_CANDIDATE && strncmp (err, "load: ", 6) == 0)
            worker_outcome_fail (out, STATUS_INVALID, "the task's %s does not load: %s",
                                 s_prog_names [p], err + 6);
        else
            worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "cannot start the %s's runner: %s",
                                 s_prog_names [p], err);
        goto done;
    }
    snprintf (out->sandbox, sizeof out->sandbox, "%s", cpu_runner_caps (ex.prog [PROG_CANDIDATE].runner));
    ex.deadline = common_now_s () + ex.job->eval.timeout_s;

    if (s_correctness (&ex) == 0 && !ex.job->eval.check_sizes_only
    &&  s_timing (&ex) == 0 && ex.job->eval.profile)
        s_profile (&ex);
done:
    for (int p = 0; p < 3; p++)
        cpu_runner_destroy (&ex.prog [p].runner);
    s_slot_release (self, slot);
    free (ex.inputs);
    free (ex.expected);
    out->seed = cjob->seed;
    out->run_s = common_now_s () - start;
    s_job_free (cjob);
}

//  ---------------------------------------------------------------------
//  The backend table (worker_backend.h)

//  Jobs at once: one core each (a job runs one program at a time, with the
//  harness between runs), leaving one core for compiles and the worker.
static uint32_t
s_default_slots (const worker_eval_config_t *cfg)
{
    (void) cfg;
    cpu_set_t set;
    int cpus = sched_getaffinity (0, sizeof set, &set) == 0? CPU_COUNT (&set): 1;
    int slots = cpus > 1? cpus - 1: 1;
    return (uint32_t) (slots > MAX_SLOTS? MAX_SLOTS: slots);
}

static void *
s_create (const worker_eval_config_t *cfg, worker_cache_t *cache, char *err, size_t errlen)
{
    return s_new (cfg, cache, err, errlen);
}

static void
s_destroy_op (void **self_p)
{
    cpu_backend_t *self = *self_p;
    s_destroy (&self);
    *self_p = NULL;
}

static void *
s_prepare_op (void *self, const common_job_t *job, uint64_t seed, worker_outcome_t *out)
{
    return s_prepare (self, job, seed, out);
}

static void
s_execute_op (void *self, void **job_p, worker_outcome_t *out)
{
    cpu_backend_job_t *job = *job_p;
    *job_p = NULL;
    s_execute (self, &job, out);
}

static void
s_job_destroy_op (void **job_p)
{
    s_job_free (*job_p);
    *job_p = NULL;
}

static const char *
s_device_op (void *self)
{
    return s_device (self);
}

static const char *
s_caps_op (void *self)
{
    (void) self;
    return sandbox_host_caps ();
}

static int
s_compile_op (worker_cache_t *cache, const common_program_t *program, const char *target,
              double timeout_s, worker_compile_t *result)
{
    (void) target;
    memset (result, 0, sizeof *result);
    char err [512] = "";
    if (cpu_cc_check_options (program->options, program->noptions, err, sizeof err)) {
        result->status = STATUS_INVALID;
        result->log = strdup (err);
        return 0;
    }
    sandbox_config_t sandbox;
    sandbox_config_default (&sandbox);
    cpu_cc_result_t res;
    memset (&res, 0, sizeof res);
    int rc = cpu_cc_compile (cache, &sandbox, program->source, program->options, program->noptions,
                             timeout_s, &res, err, sizeof err);
    result->status = rc == 0? STATUS_OK: rc == 1 || rc == 2? STATUS_COMPILE_ERROR: STATUS_INTERNAL_ERROR;
    if (rc == 0 || rc == 1)
        result->log = res.log? strdup (res.log): NULL;
    else
    if (rc == 2 && !*err) {
        if (asprintf (&result->log, "compile timed out after %g s", timeout_s) < 0)
            result->log = NULL;
    }
    else
        result->log = strdup (err);
    snprintf (result->key, sizeof result->key, "%s", res.key);
    result->cache_hit = res.cache_hit;
    result->seconds = res.seconds;
    cpu_cc_result_free (&res);
    return 0;
}

const worker_backend_t cpu_backend = {
    .info = { .name = "cpu", .targets = { "cpu" }, .langs = { "c" } },
    .summary = "C kernels built with the system compiler and run on the CPU",
    .device_ordinal = false,
    .default_slots = s_default_slots,
    .create = s_create,
    .destroy = s_destroy_op,
    .prepare = s_prepare_op,
    .execute = s_execute_op,
    .job_destroy = s_job_destroy_op,
    .device = s_device_op,
    .device_uuid = NULL,
    .caps = s_caps_op,
    .quarantined = NULL,
    .probe = NULL,
    .compile = s_compile_op,
};
