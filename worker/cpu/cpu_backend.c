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
#include "worker_host.h"
#include "common_compare.h"
#include "common_log.h"
#include "common_philox.h"
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PROG_CANDIDATE 0
#define PROG_REFERENCE 1
#define PROG_BASELINE  2
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
    uint64_t max_job_bytes;         //  memory one job may need (cfg, else from the machine)
    pthread_mutex_t lock;           //  guards the slot bitmap
    uint64_t slots_busy;            //  bit i: slot i executes a job
    uint64_t slots_used;            //  bit i: slot i's cgroups may exist
    pthread_rwlock_t calm;          //  jobs hold it shared; a confirming re-run exclusively
};

struct cpu_backend_job_t {
    const common_job_t *job;        //  borrowed
    uint64_t seed;                  //  input seed
    int so_fd[3];                   //  memfd per program, -1 when absent
};



static uint32_t s_default_slots (const worker_eval_config_t *cfg);

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

//  The table's create: find the runner, learn the CPU.
static void *
s_create (const worker_eval_config_t *cfg, worker_cache_t *cache, char *err, size_t errlen)
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
    pthread_rwlock_init (&self->calm, NULL);
    //  Default per-job memory: half the machine, shared by the slots.
    self->max_job_bytes = worker_backend_job_bytes (cfg, s_default_slots (cfg));
    s_read_cpu_model (self->device, sizeof self->device);
    return self;
}

static void
s_destroy (void **self_p)
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
    pthread_rwlock_destroy (&self->calm);
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
s_device (void *self)
{
    return ((cpu_backend_t *) self)->device;
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

static void
s_job_destroy (void **job_p)
{
    s_job_free (*job_p);
    *job_p = NULL;
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

//  Compile one program with the system compiler (cpu_cc), the options
//  checked first; build says how it ended (its strings point into res and
//  err, which the caller frees or keeps).
static void
s_build (worker_cache_t *cache, const common_program_t *program, double timeout_s,
         cpu_cc_result_t *res, worker_grade_build_t *build, char *err, size_t errlen)
{
    memset (res, 0, sizeof *res);
    memset (build, 0, sizeof *build);
    build->detail = err;
    if (cpu_cc_check_options (program->options, program->noptions, err, errlen)) {
        build->how = GRADE_BUILD_REFUSED;
        return;
    }
    sandbox_config_t sandbox;
    sandbox_config_default (&sandbox);
    int rc = cpu_cc_compile (cache, &sandbox, program->source, program->options, program->noptions,
                             timeout_s, res, err, errlen);
    build->how = rc == 0? GRADE_BUILD_OK: rc == 1? GRADE_BUILD_ERROR: rc == 2? GRADE_BUILD_TIMEOUT
               : GRADE_BUILD_OURS;
    if (rc == 2 && !*err)
        snprintf (err, errlen, "compile timed out after %.3g s", timeout_s);
    build->log = res->log;
    build->key = res->key;
    build->cache_hit = res->cache_hit;
    build->seconds = res->seconds;
}

//  Compile one program. Returns 0 or -1 with out set (the grading core
//  decides the verdict by whose program failed).
static int
s_compile (cpu_backend_t *self, cpu_backend_job_t *job, int which, const common_program_t *program,
           worker_outcome_t *out)
{
    const char *what = s_prog_names [which];
    if (program->lang && strcmp (program->lang, "c") != 0) {
        worker_outcome_fail (out, STATUS_INVALID, "%s: lang '%s' is not served by the cpu backend",
                             what, program->lang);
        return -1;
    }
    char err [512] = "";
    cpu_cc_result_t result;
    worker_grade_build_t build;
    s_build (self->cache, program, job->job->eval.compile_timeout_s, &result, &build, err, sizeof err);
    //  s_prog_names follow worker_grade_who_t: candidate, reference, baseline.
    int rc = worker_grade_compiled (out, (worker_grade_who_t) which, &build);
    if (rc == 0) {
        job->so_fd [which] = s_memfd_from (result.so, result.so_size);
        if (job->so_fd [which] < 0) {
            worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "cannot hold the %s module: %s",
                                 what, strerror (errno));
            rc = -1;
        }
    }
    cpu_cc_result_free (&result);
    return rc;
}

static void *
s_prepare (void *state, const common_job_t *job, uint64_t seed, worker_outcome_t *out)
{
    cpu_backend_t *self = state;
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
//
//  Memory: each program's runner maps its own shared memory holding the
//  task's tensors (the same 64-byte aligned offsets for every program); its
//  workspace is the runner's private memory, sized in the request and never
//  mapped here. The supervisor keeps the inputs it generated and the
//  reference's outputs in its heap, which no runner can reach. What a job
//  needs is checked against the per-job cap before anything is allocated.
//
//  Time: every run is timed here, from waking the runner to its reply (no
//  figure of the runner's is used). The candidate's budget (eval.timeout)
//  is its own CPU time, read from its process CPU clock, so load from
//  other jobs is never charged to it; a wall-clock cap WALL_FACTOR times
//  larger catches a candidate that sleeps. Every run, timed ones included,
//  gets inputs generated for it alone. After every call the runner is
//  stopped and must be down to its one thread, and at the end its CPU
//  clock must agree with the sum of its calls: work left behind fails it.

#define WALL_FACTOR     10.0            //  candidate wall time per second of its CPU budget
#define RUNNER_SLACK    (256ull << 20)  //  runner memory beyond its tensors and workspace
#define OUTSIDE_NS      5000000ull      //  CPU a runner may use outside its calls (signals, exit)
#define TIMING_TRIAL0   TASK_MAX_TRIALS //  trial numbers of timed runs start here

//  Where each tensor of one program lives in its shared memory.
typedef struct {
    uint64_t offset[TASK_MAX_ARGS]; //  per task arg (tensors only)
    uint64_t total;                 //  bytes of all tensors
} s_plan_t;

//  One program with its runner and layouts.
typedef struct {
    const common_program_t *program;        //  borrowed
    cpu_runner_t *runner;                   //  owned
    uint8_t *shm;                           //  runner's shared memory (mapped here)
    common_layout_t layout;                 //  of the current size
    s_plan_t plan;                          //  of the current size
    runner_request_t request;               //  of the current size
    uint64_t cpu_start_ns;                  //  its CPU clock once loaded
    uint64_t cpu_calls_ns;                  //  CPU time its calls used
} s_prog_t;

//  Everything execute needs, so helpers take one pointer.
typedef struct {
    cpu_backend_t *self;
    const common_job_t *job;
    const common_task_t *task;
    uint64_t seed;                          //  the job's: correctness trials
    uint64_t time_seed;                     //  drawn here: timed runs and after (s_seed_of)
    worker_outcome_t *out;
    worker_grade_tolerance_t tol;           //  the task's
    s_prog_t prog[3];
    bool has_baseline;
    uint8_t *inputs;                        //  tensors as generated (inputs valid)
    uint8_t *expected;                      //  the reference's tensors after its run
    size_t area;                            //  bytes allocated for each
    double cpu_used_s;                      //  the candidate's CPU time so far
    double wall_used_s;                     //  its wall time so far
    bool retry;                             //  a failure worth one more try on fresh runners
    sandbox_config_t sandbox;               //  caps of this job's runners
    cpu_run_outcome_t last;                 //  the last run's outcome
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
    plan->total = at? at: 64;
}

//  The runner request for one program at one size.
static void
s_request (const common_task_t *task, s_prog_t *prog)
{
    runner_request_t *req = &prog->request;
    memset (req, 0, offsetof (runner_request_t, args));
    req->op = RUNNER_OP_RUN;
    req->nargs = (uint32_t) task->nargs + 1;
    req->workspace_bytes = prog->layout.workspace_bytes;
    for (size_t i = 0; i < task->nargs; i++) {
        const common_arg_t *arg = &task->args [i];
        runner_arg_t *rarg = &req->args [i];
        memset (rarg, 0, sizeof *rarg);
        if (arg->kind == ARG_SCALAR) {
            rarg->kind = RUNNER_ARG_SCALAR;
            rarg->dtype = (uint32_t) arg->dtype;
            rarg->bits = common_dtype_scalar_bits (arg->dtype, prog->layout.scalar [i],
                                                   prog->layout.scalar_int [i]);
        }
        else {
            rarg->kind = RUNNER_ARG_PTR;
            rarg->offset = prog->plan.offset [i];
        }
    }
    runner_arg_t *ws = &req->args [task->nargs];
    memset (ws, 0, sizeof *ws);
    ws->kind = RUNNER_ARG_WORKSPACE;
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
    size_t area = ex->prog [PROG_REFERENCE].plan.total;
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

//  The seed of a trial's inputs. The correctness trials' come from the
//  job's seed (the result's: reproducible); the timed runs' and later from
//  one drawn for this execution alone, so that a seed known beforehand (a
//  task's fixed one) tells nothing of the inputs of a call that is timed:
//  their outputs can't have been computed ahead, at load.
static uint64_t
s_seed_of (const s_exec_t *ex, uint32_t trial)
{
    return trial >= TIMING_TRIAL0? ex->time_seed: ex->seed;
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
                              ref->layout.count [i], s_seed_of (ex, trial),
                              kgym_stream ((uint32_t) size_index, trial, (uint32_t) i));
    }
}

//  Load the inputs into a program's shared memory and poison its outputs.
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
                                s_seed_of (ex, trial) ^ POISON_KEY,
                                kgym_stream ((uint32_t) size_index, trial, (uint32_t) i));
    }
}

//  Run one program; on failure sets out (worker_grade decides the blame).
//  0 or -1. The last run's outcome stays in ex->last.
static int
s_run (s_exec_t *ex, int which, uint64_t *elapsed_ns)
{
    s_prog_t *prog = &ex->prog [which];
    cpu_run_outcome_t *run = &ex->last;
    worker_grade_who_t who = which == PROG_CANDIDATE? GRADE_CANDIDATE
                           : which == PROG_REFERENCE? GRADE_REFERENCE: GRADE_BASELINE;
    double budget = ex->job->eval.timeout_s;
    double wall = TRUSTED_RUN_S, cpu = 0;
    char detail [512];
    if (which == PROG_CANDIDATE) {
        cpu = budget - ex->cpu_used_s;
        wall = WALL_FACTOR * budget - ex->wall_used_s;
        if (cpu <= 0 || wall <= 0) {
            snprintf (detail, sizeof detail, "timed out: the candidate used up its budget (%.3g s of CPU "
                  "time, %.3g s of wall time)", budget, WALL_FACTOR * budget);
            worker_grade_run_failed (ex->out, who, GRADE_FAIL_TIMEOUT, detail);
            return -1;
        }
    }
    if (cpu_runner_run (prog->runner, &prog->request, wall, cpu, run) != 0) {
        //  Gone since its last call: it exited after replying.
        snprintf (detail, sizeof detail, "the %s's runner is gone (it exited after an earlier call)",
                  s_prog_names [which]);
        worker_grade_run_failed (ex->out, who, GRADE_FAIL_CRASH, detail);
        ex->retry = which != PROG_CANDIDATE;
        return -1;
    }
    prog->cpu_calls_ns += run->cpu_ns;
    if (which == PROG_CANDIDATE) {
        ex->cpu_used_s += (double) run->cpu_ns / 1e9;
        ex->wall_used_s += (double) run->wall_ns / 1e9;
    }
    if (run->status == RUN_OK && run->threads > 1) {
        snprintf (detail, sizeof detail, "the %s left %u thread%s running after its call returned",
                  s_prog_names [which], run->threads - 1, run->threads == 2? "": "s");
        worker_grade_run_failed (ex->out, who, GRADE_FAIL_MISBEHAVED, detail);
        return -1;
    }
    if (run->status == RUN_OK) {
        *elapsed_ns = run->wall_ns;
        return 0;
    }
    //  A candidate over its CPU time is over it whatever else ran; a wall
    //  timeout, or any failure of the task's own programs, load can cause.
    ex->retry = which != PROG_CANDIDATE || (run->status == RUN_TIMEOUT && !run->over_cpu);
    if (run->status == RUN_TIMEOUT) {
        if (which == PROG_CANDIDATE && cpu > 0)
            snprintf (detail, sizeof detail, "timed out: the candidate %s (its budget: %.3g s of CPU "
                      "time, %.3g s of wall time)", run->message, budget, WALL_FACTOR * budget);
        else
            snprintf (detail, sizeof detail, "timed out: %s", run->message);
        worker_grade_run_failed (ex->out, who, GRADE_FAIL_TIMEOUT, detail);
    }
    else
        worker_grade_run_failed (ex->out, who, run->status == RUN_ERROR? GRADE_FAIL_REFUSED
                                                                       : GRADE_FAIL_CRASH, run->message);
    return -1;
}

//  The judge's view of a program's tensors after a run against expected.
static size_t
s_tensors (s_exec_t *ex, const s_prog_t *prog, const uint8_t *expected, worker_grade_tensor_t *t)
{
    size_t n = 0;
    for (size_t i = 0; i < ex->task->nargs; i++) {
        const common_arg_t *arg = &ex->task->args [i];
        if (arg->kind == ARG_SCALAR)
            continue;
        uint64_t off = prog->plan.offset [i];
        t [n].name = arg->name;
        t [n].kind = arg->kind;
        t [n].dtype = arg->dtype;
        t [n].count = prog->layout.count [i];
        t [n].before = ex->inputs + off;
        t [n].expected = expected + off;
        t [n].got = prog->shm + off;
        n++;
    }
    return n;
}

//  Check the candidate's tensors against expected and the inputs.
static int
s_check (s_exec_t *ex, const uint8_t *expected, size_t size_index, uint32_t trial, const char *when)
{
    worker_grade_tensor_t tensors [TASK_MAX_ARGS];
    size_t n = s_tensors (ex, &ex->prog [PROG_CANDIDATE], expected, tensors);
    return worker_grade_check (ex->out, tensors, n, &ex->tol, (uint32_t) size_index, trial, when);
}

//  Run the reference on the inputs in ex->inputs; its answer into expected.
static int
s_reference_run (s_exec_t *ex, size_t size_index, uint32_t trial, uint8_t *expected)
{
    s_prog_t *ref = &ex->prog [PROG_REFERENCE];
    uint64_t ns;
    s_load (ex, ref, size_index, trial);
    if (s_run (ex, PROG_REFERENCE, &ns))
        return -1;
    memcpy (expected, ref->shm, ref->plan.total);
    worker_grade_tensor_t tensors [TASK_MAX_ARGS];
    size_t n = s_tensors (ex, ref, expected, tensors);
    return worker_grade_reference (ex->out, tensors, n, (uint32_t) size_index, 1);
}

static int
s_correctness (s_exec_t *ex)
{
    for (size_t s = 0; s < ex->task->nsizes; s++) {
        if (s_setup_size (ex, s))
            return -1;
        for (uint32_t t = 0; t < ex->job->eval.trials; t++) {
            uint64_t ns;
            s_generate (ex, s, t);
            if (s_reference_run (ex, s, t, ex->expected))
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

//  One timed round on inputs of its own: the baseline (or the reference)
//  and the candidate, in the order given, then the check.
static int
s_timed_round (s_exec_t *ex, size_t ts, uint32_t i, bool candidate_first, uint64_t *cns, uint64_t *bns)
{
    uint32_t trial = TIMING_TRIAL0 + i;
    s_prog_t *cand = &ex->prog [PROG_CANDIDATE];
    int base_which = ex->has_baseline? PROG_BASELINE: PROG_REFERENCE;
    s_generate (ex, ts, trial);
    for (int turn = 0; turn < 2; turn++) {
        if ((turn == 0) == candidate_first) {
            s_load (ex, cand, ts, trial);
            if (s_run (ex, PROG_CANDIDATE, cns))
                return -1;
            continue;
        }
        s_prog_t *base = &ex->prog [base_which];
        s_load (ex, base, ts, trial);
        if (s_run (ex, base_which, bns))
            return -1;
        //  The timed reference's answer is the expected one; a separate
        //  baseline's is not, so the reference runs too (untimed).
        if (!ex->has_baseline) {
            memcpy (ex->expected, base->shm, base->plan.total);
            worker_grade_tensor_t tensors [TASK_MAX_ARGS];
            size_t n = s_tensors (ex, base, ex->expected, tensors);
            if (worker_grade_reference (ex->out, tensors, n, (uint32_t) ts, 1))
                return -1;
        }
        else
        if (s_reference_run (ex, ts, trial, ex->expected))
            return -1;
    }
    char when [64];
    snprintf (when, sizeof when, "timed run %u", i);
    return s_check (ex, ex->expected, ts, trial, when);
}

static int
s_timing (s_exec_t *ex)
{
    const common_eval_t *eval = &ex->job->eval;
    size_t ts = ex->task->timing_size;
    if (s_setup_size (ex, ts))
        return -1;
    double *cand_us = calloc (eval->timed, sizeof (double));
    double *base_us = calloc (eval->timed, sizeof (double));
    int rc = -1;
    if (!cand_us || !base_us) {
        worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR, "out of memory for timing samples");
        goto done;
    }
    //  Timed runs until the speedup is known well enough for the reward
    //  (worker_grade_stop), eval.timed at most.
    worker_grade_stop_t rule;
    worker_grade_stop_init (&rule, eval->timed, ex->job->reward.clip);
    worker_grade_stop_why_t why = GRADE_STOP_NONE;
    uint32_t n = 0;
    for (uint32_t i = 0; why == GRADE_STOP_NONE; i++) {
        uint64_t cns = 0, bns = 0;
        //  Alternate who goes first so neither always inherits a warm cache.
        if (s_timed_round (ex, ts, i, i % 2 == 0, &cns, &bns))
            goto done;
        if (i >= eval->warmup) {
            cand_us [n] = (double) cns / 1000.0;
            base_us [n] = (double) bns / 1000.0;
            n++;
            why = worker_grade_stop_check_paired (&rule, cand_us, base_us, n);
        }
    }
    //  Each round's two runs are a pair: their ratios, so a change of the
    //  host's speed that outlasts a round moves neither the speedup nor its
    //  interval.
    ex->out->speedup = worker_grade_speedup_paired (cand_us, base_us, n,
                                                    &ex->out->speedup_lo, &ex->out->speedup_hi);
    worker_grade_timing (&ex->out->candidate, cand_us, n);
    worker_grade_timing (&ex->out->baseline, base_us, n);
    ex->out->baseline_kind = ex->has_baseline? "baseline": "reference";
    ex->out->timing_stopped = worker_grade_stop_name (why);
    rc = 0;
done:
    free (cand_us);
    free (base_us);
    return rc;
}

//  Nothing of a runner may run outside its calls: its CPU clock since it
//  loaded must agree with what its calls used.
static int
s_nothing_outside (s_exec_t *ex)
{
    for (int p = 0; p < 3; p++) {
        s_prog_t *prog = &ex->prog [p];
        if (!prog->runner || !cpu_runner_alive (prog->runner))
            continue;
        uint64_t now = cpu_runner_cpu_ns (prog->runner);
        uint64_t lifetime = now > prog->cpu_start_ns? now - prog->cpu_start_ns: 0;
        if (lifetime > prog->cpu_calls_ns + OUTSIDE_NS + prog->cpu_calls_ns / 20) {
            char detail [256];
            snprintf (detail, sizeof detail, "the %s used %.3g ms of CPU time outside its calls",
                      s_prog_names [p], (double) (lifetime - prog->cpu_calls_ns) / 1e6);
            worker_grade_run_failed (ex->out, p == PROG_CANDIDATE? GRADE_CANDIDATE
                                     : p == PROG_REFERENCE? GRADE_REFERENCE: GRADE_BASELINE,
                                     GRADE_FAIL_MISBEHAVED, detail);
            return -1;
        }
    }
    return 0;
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
//  (so measuring never touches the reward), on inputs of its own, with wall
//  and CPU time per launch. The figures come from inside the runner:
//  informational only.
static void
s_profile (s_exec_t *ex)
{
    size_t ts = ex->task->timing_size;
    uint32_t trial = TIMING_TRIAL0 + ex->job->eval.warmup + ex->job->eval.timed;
    json_t *profile = json_pack ("{s:b, s:s, s:s}", "available", 1, "backend", "cpu",
                                 "measured", "per launch, inside the runner (wall and process CPU time); "
                                 "informational, never used for the reward");
    if (s_setup_size (ex, ts))
        goto done;
    s_generate (ex, ts, trial);
    if (s_reference_run (ex, ts, trial, ex->expected))
        goto done;
    int order [3] = { PROG_CANDIDATE, PROG_REFERENCE, PROG_BASELINE };
    for (int i = 0; i < 3; i++) {
        int which = order [i];
        s_prog_t *prog = &ex->prog [which];
        if (!prog->runner)
            continue;
        uint64_t ns;
        s_load (ex, prog, ts, trial);
        if (s_run (ex, which, &ns))
            break;
        if (which == PROG_CANDIDATE && s_check (ex, ex->expected, ts, trial, "profiled run"))
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
done:
    if (!ex->out->extra)
        ex->out->extra = json_object ();
    json_object_set_new (ex->out->extra, "profile", profile);
}

//  What one job needs, checked against the worker's per-job cap before
//  anything is allocated. 0, or -1 with out set to invalid.
static int
s_budget_memory (s_exec_t *ex, uint64_t *runner_mem)
{
    uint64_t tensors = 0, workspace [3] = { 0, 0, 0 };
    char err [512];
    for (int p = 0; p < 3; p++) {
        if (!ex->prog [p].program)
            continue;
        for (size_t s = 0; s < ex->task->nsizes; s++) {
            common_layout_t layout;
            if (common_task_layout (ex->task, ex->prog [p].program, s, ex->self->cfg.max_tensor_bytes,
                                    &layout, err, sizeof err)) {
                worker_outcome_fail (ex->out, STATUS_INVALID, "%s: %s", s_prog_names [p], err);
                return -1;
            }
            uint64_t t = layout.total_bytes - layout.workspace_bytes;
            if (t > tensors)
                tensors = t;
            if (layout.workspace_bytes > workspace [p])
                workspace [p] = layout.workspace_bytes;
        }
    }
    //  Inputs and expected here, one shared memory per program, each
    //  runner's workspace, and each runner's own slack.
    int nprogs = ex->has_baseline? 3: 2;
    uint64_t need = 2 * tensors;
    uint64_t most = 0;
    for (int p = 0; p < nprogs; p++) {
        need += tensors + workspace [p] + RUNNER_SLACK;
        if (workspace [p] > most)
            most = workspace [p];
    }
    if (need > ex->self->max_job_bytes) {
        worker_outcome_fail (ex->out, STATUS_INVALID, "the job needs %.3g GiB of memory (tensors %.3g "
                             "GiB, largest workspace %.3g GiB); this worker allows %.3g GiB per job "
                             "(--max-job-memory)", (double) need / (1u << 30),
                             (double) tensors / (1u << 30), (double) most / (1u << 30),
                             (double) ex->self->max_job_bytes / (1u << 30));
        return -1;
    }
    *runner_mem = tensors + most + RUNNER_SLACK;
    return 0;
}

//  Start every runner, then wait for them: their start-up overlaps. A
//  candidate whose runner fails after it was spawned (its module does not
//  load, its constructors crash or hang) fails there; ours is internal.
static int
s_start_runners (s_exec_t *ex, cpu_backend_job_t *cjob)
{
    char err [512];
    for (int p = 0; p < 3; p++) {
        if (cjob->so_fd [p] < 0)
            continue;
        ex->prog [p].runner = cpu_runner_start (&ex->sandbox, cjob->so_fd [p], err, sizeof err);
        if (!ex->prog [p].runner) {
            worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR, "cannot start the %s's runner: %s",
                                 s_prog_names [p], err);
            return -1;
        }
    }
    //  Every runner checked by the sandbox before any loads its module; one
    //  that is not confined as asked is the sandbox's failure, not the code's.
    for (int p = 0; p < 3; p++)
        if (ex->prog [p].runner && cpu_runner_confirm (ex->prog [p].runner, err, sizeof err) != 0) {
            worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR, "cannot start the %s's runner: %s",
                                 s_prog_names [p], err);
            return -1;
        }
    for (int p = 0; p < 3; p++) {
        s_prog_t *prog = &ex->prog [p];
        if (!prog->runner)
            continue;
        if (cpu_runner_ready (prog->runner, err, sizeof err) == 0) {
            prog->cpu_start_ns = cpu_runner_cpu_ns (prog->runner);
            continue;
        }
        bool load = strncmp (err, "load: ", 6) == 0;
        if (p == PROG_CANDIDATE && load && strstr (err, "dlopen"))
            worker_outcome_fail (ex->out, STATUS_COMPILE_ERROR, "the candidate does not link: %s", err + 6);
        else
        if (p == PROG_CANDIDATE)
            worker_outcome_fail (ex->out, STATUS_RUNTIME_ERROR, "the candidate failed while loading: %s",
                                 load? err + 6: err);
        else {
            worker_outcome_fail (ex->out, STATUS_INVALID, "the task's %s does not load: %s",
                                 s_prog_names [p], load? err + 6: err);
            ex->retry = true;
        }
        return -1;
    }
    return 0;
}

//  One grading of a prepared job on fresh runners. Returns true when the
//  verdict deserves one more try on a calm worker: a timeout of wall time
//  (load can cause it; running over its CPU time is the candidate's own
//  doing), a failure of the task's own programs or of ours.
static bool
s_execute_once (cpu_backend_t *self, cpu_backend_job_t *cjob, worker_outcome_t *out)
{
    int slot = -1;
    s_exec_t ex;
    memset (&ex, 0, sizeof ex);
    ex.self = self;
    ex.job = cjob->job;
    ex.task = cjob->job->task;
    ex.seed = cjob->seed;
    randombytes_buf (&ex.time_seed, sizeof ex.time_seed);
    ex.out = out;
    ex.has_baseline = cjob->job->task->baseline != NULL;
    worker_grade_tolerance (ex.task, &ex.tol);
    ex.prog [PROG_CANDIDATE].program = cjob->job->candidate;
    ex.prog [PROG_REFERENCE].program = &cjob->job->task->reference;
    ex.prog [PROG_BASELINE].program = cjob->job->task->baseline;
    sandbox_config_t *sandbox = &ex.sandbox;
    uint64_t runner_mem = 0;
    if (s_budget_memory (&ex, &runner_mem))
        goto done;
    sandbox_config_default (sandbox);
    sandbox->mem_bytes = runner_mem;
    sandbox->pinned = true;         //  see cpu_runner_pin below
    char slot_name [64];
    slot = s_slot_acquire (self);
    if (slot >= 0) {
        snprintf (slot_name, sizeof slot_name, "%d-%d", (int) getpid (), slot);
        sandbox->slot = slot_name;
    }
    if (s_start_runners (&ex, cjob))
        goto done;
    //  The job's programs take turns on one core (worker_backend_slot_cpu).
    int cpu = worker_backend_slot_cpu (slot);
    for (int p = 0; p < 3 && cpu >= 0; p++)
        if (ex.prog [p].runner && cpu_runner_pin (ex.prog [p].runner, cpu) != 0) {
            log_debug ("cpu", "the %s's runner not pinned to CPU %d: each where the host puts it",
                       s_prog_names [p], cpu);
            break;
        }
    snprintf (out->sandbox, sizeof out->sandbox, "%s", cpu_runner_caps (ex.prog [PROG_CANDIDATE].runner));
    if (s_correctness (&ex) == 0 && !ex.job->eval.check_sizes_only
    &&  s_timing (&ex) == 0 && s_nothing_outside (&ex) == 0 && ex.job->eval.profile)
        s_profile (&ex);
done:
    for (int p = 0; p < 3; p++)
        cpu_runner_destroy (&ex.prog [p].runner);
    s_slot_release (self, slot);
    free (ex.inputs);
    free (ex.expected);
    return out->status == STATUS_INTERNAL_ERROR || ex.retry;
}

//  Grade a prepared job. A verdict that load or a passing fault could have
//  caused is confirmed once more with this worker calm: no other job of it
//  runs meanwhile (other processes on the host are not ours to stop).
static void
s_execute (void *state, void **job_p, worker_outcome_t *out)
{
    cpu_backend_t *self = state;
    cpu_backend_job_t *cjob = *job_p;
    *job_p = NULL;
    double start = common_now_s ();
    pthread_rwlock_rdlock (&self->calm);
    bool again = s_execute_once (self, cjob, out);
    pthread_rwlock_unlock (&self->calm);
    if (again) {
        char first [sizeof out->message];
        snprintf (first, sizeof first, "%s", out->message);
        worker_status_t was = out->status;
        //  Keep what prepare found (compile figures, log); redo the rest.
        worker_outcome_t again_out = *out;
        again_out.extra = NULL;
        again_out.compile_log = NULL;
        again_out.status = STATUS_OK;
        again_out.message [0] = 0;
        again_out.nmismatches = 0;
        again_out.bad_elements = 0;
        again_out.max_abs = again_out.max_rel = 0;
        pthread_rwlock_wrlock (&self->calm);
        s_execute_once (self, cjob, &again_out);
        pthread_rwlock_unlock (&self->calm);
        json_decref (out->extra);
        again_out.compile_log = out->compile_log;
        *out = again_out;
        out->retried = true;
        log_info ("cpu", "%s (%s) graded again on a calm worker: %s", worker_status_name (was), first,
                  worker_status_name (out->status));
    }
    out->seed = cjob->seed;
    out->run_s = common_now_s () - start;
    s_job_free (cjob);
}

//  ---------------------------------------------------------------------
//  The backend table (worker_backend.h)

//  Jobs at once: one core each (a job runs one program at a time, with the
//  harness between runs), leaving one core for the worker.
static uint32_t
s_default_slots (const worker_eval_config_t *cfg)
{
    (void) cfg;
    uint32_t cpus = worker_host_cores ();
    uint32_t slots = cpus > 1? cpus - 1: 1;
    return slots > MAX_SLOTS? MAX_SLOTS: slots;
}

//  Compiles at once: one per run slot. Compiles and runs share the cores,
//  so more compiles would only slow the timed runs.
static uint32_t
s_default_compilers (const worker_eval_config_t *cfg)
{
    return s_default_slots (cfg);
}

static const char *
s_caps (void *self)
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
    cpu_cc_result_t res;
    worker_grade_build_t build;
    s_build (cache, program, timeout_s, &res, &build, err, sizeof err);
    worker_compile_set (result, &build);
    cpu_cc_result_free (&res);
    return 0;
}

const worker_backend_t cpu_backend = {
    .info = { .name = "cpu", .targets = { "cpu" }, .langs = { "c" } },
    .summary = "C kernels built with the system compiler and run on the CPU",
    .device_ordinal = false,
    .default_slots = s_default_slots,
    .default_compilers = s_default_compilers,
    .create = s_create,
    .destroy = s_destroy,
    .prepare = s_prepare,
    .execute = s_execute,
    .job_destroy = s_job_destroy,
    .device = s_device,
    .device_uuid = NULL,
    .caps = s_caps,
    .quarantined = NULL,
    .probe = NULL,
    .compile = s_compile_op,
};
