/*  python_backend - PyTorch-reference tasks: Python candidates in sandboxed runners.

    A job's two programs run in two processes of the worker's interpreter
    (python_proc, kgym_pyrunner.py), each in its own sandbox: the task's
    reference (R), which only the task's code ever runs in, and the
    candidate (C). Neither sees the other; this supervisor drives both.

    Order of work, and why:
      0. In prepare (the worker's compile pool, before the job may take its
         GPU): a candidate that builds an extension is imported by a third
         runner without a GPU, the builder, and its build kept under the
         job's key (s_prebuild); nothing it says is a verdict.
      1. R loads the task; when timing is asked, R times the baseline (the
         eager reference) first, before the candidate's module is even
         imported: nothing of the candidate can run beside the baseline.
      2. C imports the candidate (its Triton and extension builds: the
         compile step) and builds ModelNew from the same seeded init inputs.
      3. For every size and trial, with a seed drawn for that run alone
         (a keyed hash of the job's seed: not guessable from earlier ones),
         R computes the expected outputs into its shared memory, C makes the
         same inputs and runs its forward; its outputs are copied, inside
         the call, into C's shared memory where this side has poisoned the
         bytes. The moment C replies, random positions are read: a poisoned
         one means C replied before its output was complete. Then C is
         stopped and every byte compared here (worker_grade). Shape, dtype,
         device and plain-tensor-ness are compared with R's.
      4. Timed runs: the same, each on inputs of its own, with R flushing
         the GPU's L2 first. Their seeds come from one drawn for this
         execution, not from the job's: a job's seed may be known ahead (a
         task's fixed seed), and C could then make a timed run's inputs, and
         compute its outputs, at import. On a GPU each timed call makes its
         inputs in its own request (R's too, the same way): the wall clock
         runs from the moment they exist, so work C starts on them (a
         wrapped get_inputs, GPU work left in flight) cannot run where
         nothing is timed. On the CPU a timed run's inputs are R's, handed
         over (s_share_inputs): C's code never runs between the moment they
         exist and its call. A call's time is the GPU time C
         reports (CUDA events around forward; no profiler runs in a timed
         call, its own cost would be in the window and C could skip it)
         when this side's wall clock around the call agrees: the wall time
         beyond it within the spread of R's own (the reply, the output's
         copy). Otherwise the wall time less R's overhead, less that
         spread. And over all the timed runs the wall clock's median must
         agree within the noise of a median: a lie small enough to pass
         call by call (inside the spread) does not pass n times
         (s_wall_floor). C's reports are never trusted beyond what this
         side's clock can check.
      5. The wrapper check: from kernel records (the profiler) of a few
         untimed calls of C's at the timing size, checked like the rest,
         the share of C's GPU time in library kernels (ATen, cuBLAS, cuDNN,
         inductor's). R's operator table likewise, from calls of its own.
    See docs/sandbox.md ("Python runners") for the argument in full.
*/
#include "common_util.h"
#include "python_backend.h"
#include "python_proc.h"
#include "worker_eval.h"
#include "worker_grade.h"
#include "common_dtype.h"
#include "common_log.h"
#include "kgym_config.h"
#include "worker_cache.h"
#include "common_hash.h"
#include <dirent.h>
#include <sched.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <sys/stat.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HELLO_S         180.0       //  interpreter start and `import torch` on a cold disk
#define TRUSTED_S       120.0       //  one request of the reference
#define LOAD_MIN_S      120.0       //  a candidate's import (its builds) gets at least this
#define CALIBRATIONS    7           //  calls timed to know the cost of the reply and the copy
#define SAMPLES         4096        //  output positions read the moment a reply arrives
#define MAX_OUTPUTS     16          //  tensors a forward may return
#define MAX_INPUTS      64          //  get_inputs() values whose bytes are compared
#define WARM_MAX        (256ull << 20)  //  heap faulted in before a CPU job's timed runs (s_timing)
#define WALL_FACTOR     3.0         //  candidate wall time allowed per second of its budget
#define PROFILED_CALLS  3           //  untimed profiled calls that give a side's kernel table
#define OVER_MAX        256         //  samples of the reference's overhead kept
#define POISON_TILE     (1u << 20)  //  bytes of poison, repeated over an output area
#define BUILD_MAX_BYTES (1ull << 30)//  one build's artifacts kept at most
#define BUILD_MAX_FILES 4096        //  and as many files
#define BUILDS_MAX_BYTES (8ull << 30)   //  all kept builds at most (KGYM_PYTHON_BUILDS_MAX)

#define SLOTS           64          //  CPU jobs at once at most

//  A slot's runners for its next job, started ahead: fresh interpreters
//  (nothing of any candidate has run in them) that import torch while the
//  slot's job runs and set up the device (CUDA, the profiler's first
//  session: seconds) when told: between that job's baseline and its
//  candidate's timed runs, which wait until they are done.
typedef struct {
    python_proc_t *ref, *cand;      //  NULL when none
    char target [16];               //  the target they were started for
} s_spare_t;

//  What a target's runners said of themselves (the fields of a build's
//  key, and the architectures its extensions are built for), once one
//  candidate runner has started there.
typedef struct {
    bool set;
    char torch [64], triton [64], gpu [128], arch [32];
} s_known_t;

typedef struct {
    worker_eval_config_t cfg;       //  copy (strings borrowed from the caller)
    char python [4096];             //  the interpreter
    char script [4096];             //  kgym_pyrunner.py
    char device [256];              //  "cpu: ... (torch 1.13.1)", "NVIDIA H200 (torch 2.11.0)"
    char caps [512];                //  what the sandbox enforces
    uint64_t max_job_bytes;         //  memory one job may need
    char builds [4096];             //  the build cache: one folder per candidate key ("" = none)
    uint64_t builds_max;            //  its bytes at most: the least recently used go first
    pthread_mutex_t trim;           //  one trim of it at a time
    pthread_mutex_t gpu;            //  one job on the GPU at a time
    pthread_mutex_t lock;           //  guards the next fields
    uint64_t slots_busy;            //  CPU jobs at once: bit i, slot i holds a job
    bool prewarm;                   //  start each slot's next runners ahead
                                    //  (KGYM_PYTHON_PREWARM=0: off)
    bool prebuild;                  //  build extensions before the job runs
                                    //  (KGYM_PYTHON_PREBUILD=0: off)
    s_known_t known [2];            //  the CPU's runners, a GPU's: as their hellos said
    s_spare_t spares [SLOTS + 1];   //  CPU slot i at i, the GPU at SLOTS; the job holding
                                    //  its slot alone touches one
    //  A runner dies with the thread that spawned it (PR_SET_PDEATHSIG),
    //  and a worker's job threads end with their jobs: runners started
    //  ahead are spawned by this backend's own thread.
    pthread_t spawner;
    bool spawner_up;
    pthread_mutex_t spawn_lock;     //  guards the next fields
    pthread_cond_t spawn_cond;      //  a request came, or one was done
    struct s_spawn_req_t *spawn_req;//  the next request, NULL when none
    bool spawn_quit;
} python_backend_t;

//  One request to the spawner: fill spare with runners for target.
typedef struct s_spawn_req_t {
    s_spare_t *spare;
    const char *target;
    bool done;
} s_spawn_req_t;

typedef struct {
    const common_job_t *job;        //  borrowed
    uint64_t seed;                  //  the job's seed
} python_job_t;

//  One output slot: where a tensor of the reference's goes, and what it is.
typedef struct {
    uint64_t offset, nbytes;        //  in the candidate's shared memory
    common_dtype_t dtype;           //  element type
    char shape [128];               //  the reference's shape, as JSON text
    char device [16];               //  "cpu", "cuda"
} s_slot_t;

typedef struct {
    python_backend_t *self;
    const common_job_t *job;
    const common_task_t *task;
    worker_outcome_t *out;
    const char *target;             //  "cpu" or "cuda"
    bool gpu;                       //  target is a GPU
    uint64_t seed;                  //  the job's: weights, correctness trials
    uint64_t time_seed;             //  drawn here: timed and profiled runs (s_timing)
    python_proc_t *ref, *cand;
    s_slot_t slots [MAX_OUTPUTS];   //  the current run's outputs
    size_t nslots;
    uint8_t *expected;              //  the reference's outputs, in R's mapping (see s_reference_call)
    size_t expected_size;           //  their bytes, 0 before the first
    //  R's inputs after its kept call, as it copied them behind its outputs
    //  (when the call copied them: ref_in_at > 0): what C's must equal after
    //  its call. Offsets from ref_in_at (C's from the end of its outputs).
    uint64_t ref_in_at;
    uint64_t in_rel [MAX_INPUTS], in_nbytes [MAX_INPUTS];
    size_t in_esize [MAX_INPUTS];
    size_t nin;
    uint64_t in_span;               //  from the first input's start to the last's end
    worker_grade_tolerance_t tol;
    double over_s;                  //  a timed call's wall time beyond its GPU time (R's median)
    double over_dev_s;              //  its spread (1.4826 MAD: a standard deviation, robustly)
    double over [OVER_MAX];         //  R's samples of it: the baseline's, then the timed runs'
    uint32_t nover;
    uint32_t nover_base;            //  of which the baseline's (taken before C existed)
    double gap [OVER_MAX];          //  C's timed calls' wall time beyond their reported GPU time
    uint32_t ngap;
    double last_wall_s;             //  the last timed call's wall time (the candidate's)
    double wall_factor;             //  what s_wall_floor scaled the timed runs by (0: nothing)
    int cpu;                        //  the CPU both runners share (a CPU job), -1: not pinned
    double inputs_excess_us;        //  the median of C's inputs requests' time beyond R's
    //  A timed run's inputs on the CPU, handed from R to C (s_share_inputs):
    //  R's words on them (offsets in R's memory), NULL when not handed over.
    json_t *shared;
    uint64_t share_at, share_end;   //  their bytes in R's memory
    uint64_t ref_writes_max;        //  beyond what R's calls write, at any size so far
    uint32_t given_runs;            //  timed runs whose inputs were handed over
    char unshared [160];            //  why the last run's were not
    uint32_t base_n;                //  the baseline's timed runs made beforehand (GPU)
    double used_s;                  //  the candidate's time so far (its budget)
    double wall_s;                  //  its wall time so far
    uint32_t fallbacks;             //  timed calls whose records the wall clock did not confirm
    char fallback_why [256];        //  the first one's reason
    json_t *cand_kernels;           //  name -> {us, launches}
    json_t *ref_kernels;            //  likewise, the reference's
} s_exec_t;

//  --- finding things ---

static bool
s_file (const char *path)
{
    return path && access (path, R_OK) == 0;
}

static void
s_find_script (char *buf, size_t len)
{
    const char *env = getenv ("KGYM_PYRUNNER");
    const char *places [] = {
        env, KGYM_SOURCE_DIR "/worker/python/kgym_pyrunner.py", KGYM_DATADIR "/kgym_pyrunner.py", NULL
    };
    buf [0] = 0;
    for (int i = 0; i < 3; i++)
        if (places [i] && *places [i] && s_file (places [i])) {
            snprintf (buf, len, "%s", places [i]);
            return;
        }
}

//  --- seeds ---

//  The seed of one run: a keyed hash (SipHash) of the job's seed, so seeds
//  seen by a candidate tell nothing of the next one.
static uint64_t
s_seed (uint64_t job_seed, const char *what, uint64_t a, uint64_t b)
{
    unsigned char key [crypto_shorthash_KEYBYTES];
    memset (key, 0, sizeof key);
    memcpy (key, &job_seed, sizeof job_seed);
    memcpy (key + 8, "kgym-py!", 8);
    char msg [96];
    int n = snprintf (msg, sizeof msg, "%s/%llu/%llu", what, (unsigned long long) a, (unsigned long long) b);
    unsigned char hash [crypto_shorthash_BYTES];
    crypto_shorthash (hash, (const unsigned char *) msg, (unsigned long long) n, key);
    uint64_t seed;
    memcpy (&seed, hash, sizeof seed);
    return seed & INT64_MAX;
}

//  --- requests ---

//  A verdict from a runner's error reply ({error, kind, traceback}).
static void
s_fail_reply (s_exec_t *ex, json_t *reply, const char *who, worker_status_t fallback)
{
    const char *error = json_string_value (json_object_get (reply, "error"));
    const char *kind = json_string_value (json_object_get (reply, "kind"));
    const char *tb = json_string_value (json_object_get (reply, "traceback"));
    worker_status_t status = fallback;
    if (kind && strcmp (kind, "compile_error") == 0)
        status = STATUS_COMPILE_ERROR;
    else
    if (kind && strcmp (kind, "runtime_error") == 0)
        status = STATUS_RUNTIME_ERROR;
    else
    if (kind && strcmp (kind, "invalid") == 0)
        status = STATUS_INVALID;
    //  The reference's failures are the task's; the candidate cannot make
    //  its own failure anyone else's.
    if (strcmp (who, "candidate") != 0)
        status = STATUS_INVALID;
    else
    if (status == STATUS_INVALID || status == STATUS_INTERNAL_ERROR)
        status = fallback;
    worker_outcome_fail (ex->out, status, "%s: %s", who, error? error: "failed");
    if (tb && *tb) {
        free (ex->out->compile_log);
        ex->out->compile_log = strdup (tb);
    }
}

//  Send op to a runner; 0 with *reply, -1 with the verdict set (who's fault
//  it is decided by who: the reference's failures make the task invalid).
static int
s_ask (s_exec_t *ex, python_proc_t *proc, json_t *req, double timeout_s, json_t **reply,
       double *wall_s)
{
    bool is_cand = proc == ex->cand;
    const char *who = is_cand? "candidate": "the task's reference";
    char err [512] = "";
    double t0 = common_now_s ();
    int rc = python_proc_request (proc, req, timeout_s, reply, wall_s, err, sizeof err);
    log_debug ("python", "%s %s: %.3f ms", is_cand? "candidate": "reference",
               json_string_value (json_object_get (req, "op")), (common_now_s () - t0) * 1e3);
    json_decref (req);
    if (rc == 1) {
        worker_outcome_fail (ex->out, is_cand? STATUS_TIMEOUT: STATUS_INVALID, "%s: %s", who, err);
        return -1;
    }
    if (rc != 0) {
        worker_outcome_fail (ex->out, is_cand? STATUS_RUNTIME_ERROR: STATUS_INVALID, "%s: %s", who, err);
        return -1;
    }
    if (json_object_get (*reply, "error")) {
        s_fail_reply (ex, *reply, who, is_cand? STATUS_RUNTIME_ERROR: STATUS_INVALID);
        json_decref (*reply);
        *reply = NULL;
        return -1;
    }
    return 0;
}

static int
s_simple (s_exec_t *ex, python_proc_t *proc, json_t *req, double timeout_s)
{
    json_t *reply = NULL;
    int rc = s_ask (ex, proc, req, timeout_s, &reply, NULL);
    json_decref (reply);
    return rc;
}

//  Both programs' model for size s, built after the same seed.
static int
s_size (s_exec_t *ex, python_proc_t *proc, size_t s)
{
    const common_size_t *size = &ex->task->sizes [s];
    json_t *constants = json_object ();
    for (size_t k = 0; k < size->nvars; k++)
        json_object_set_new (constants, size->names [k], json_integer ((json_int_t) size->values [k]));
    json_t *req = json_pack ("{s:s, s:o, s:I}", "op", "size", "constants", constants,
                             "seed", (json_int_t) s_seed (ex->seed, "init", s, 0));
    if (proc == ex->ref && strcmp (ex->task->module.baseline, "compile") == 0)
        json_object_set_new (req, "compile", json_true ());
    double timeout = proc == ex->cand? fmax (ex->job->eval.compile_timeout_s, LOAD_MIN_S): TRUSTED_S;
    return s_simple (ex, proc, req, timeout);
}

//  Make the inputs of seed in proc; *wall_s (may be NULL) gets the
//  request's wall time.
static int
s_inputs_timed (s_exec_t *ex, python_proc_t *proc, uint64_t seed, double *wall_s)
{
    json_t *reply = NULL;
    int rc = s_ask (ex, proc, json_pack ("{s:s, s:I}", "op", "inputs", "seed", (json_int_t) seed),
                    TRUSTED_S + (proc == ex->cand? ex->job->eval.timeout_s: 0), &reply, wall_s);
    json_decref (reply);
    return rc;
}

static int
s_inputs (s_exec_t *ex, python_proc_t *proc, uint64_t seed)
{
    return s_inputs_timed (ex, proc, seed, NULL);
}

//  The candidate's inputs are made in its own process, by the task's code,
//  before its call: code of the candidate's can run there too (it can wrap
//  get_inputs) and do the call's work ahead, out of the timed call. So what
//  the candidate's inputs took beyond the reference's (the same code, the
//  same seed, just before) is the candidate's time, less a slack for noise:
//  0.5 ms and a quarter of the reference's.
static double
s_inputs_excess (s_exec_t *ex, double ref_s, double cand_s)
{
    double excess = cand_s - ref_s - (5e-4 + 0.25 * ref_s);
    if (!(excess > 0))
        return 0;
    if (!ex->fallbacks++)
        snprintf (ex->fallback_why, sizeof ex->fallback_why, "its inputs took %.3g ms to make, the "
                  "reference's %.3g ms: the difference is counted as its time", cand_s * 1e3, ref_s * 1e3);
    return excess;
}

//  The median of n samples (sorted in place).
static double
s_median (double *v, size_t n)
{
    worker_timing_t t;
    worker_grade_timing (&t, v, n);
    return t.median_us;
}

//  One more sample of R's overhead per call; its median and spread anew.
static void
s_over_add (s_exec_t *ex, double over_s)
{
    if (ex->nover < OVER_MAX)
        ex->over [ex->nover++] = fmax (over_s, 0);
    double v [OVER_MAX];
    memcpy (v, ex->over, ex->nover * sizeof (double));
    ex->over_s = s_median (v, ex->nover);
    for (uint32_t i = 0; i < ex->nover; i++)
        v [i] = fabs (ex->over [i] - ex->over_s);
    ex->over_dev_s = 1.4826 * s_median (v, ex->nover);
}

//  Over all the timed runs, the same: work of the candidate's in its
//  inputs requests, under the slack each time, shows in the median of the
//  differences once it is above that median's noise (and 50 us). The runs
//  alternate who goes first, and making inputs first or after the other's
//  call costs each program differently (its caches): a round (two runs, one
//  of each order) is one sample, its two differences' mean. What n runs
//  say: 0 nothing to count (the median at 50 us or under), 1 the median
//  counts (*median_us), -1 not known yet (over 50 us but within its noise,
//  or under two rounds).
static int
s_inputs_verdict (const double *in_us, uint32_t n, double *median_us)
{
    *median_us = 0;
    uint32_t rounds = n / 2;
    if (rounds == 0)
        return n && in_us [0] > 50? -1: 0;
    double *d = malloc (rounds * sizeof (double));
    if (!d)
        return -1;
    for (uint32_t i = 0; i < rounds; i++)
        d [i] = (in_us [2 * i] + in_us [2 * i + 1]) / 2;
    double median = s_median (d, rounds);
    for (uint32_t i = 0; i < rounds; i++)
        d [i] = fabs ((in_us [2 * i] + in_us [2 * i + 1]) / 2 - median);
    double dev = 1.4826 * s_median (d, rounds);
    free (d);
    *median_us = median;
    if (median <= 50)
        return 0;
    return rounds >= 2 && median > 50 + 3 * 1.25 * dev / sqrt ((double) rounds)? 1: -1;
}

//  Each run counts at least that median, when it counts (less what was
//  added to it already).
static void
s_inputs_floor (s_exec_t *ex, double *cand_us, double *wall_us, const double *in_us,
                const double *added_us, uint32_t n)
{
    double median;
    int verdict = s_inputs_verdict (in_us, n, &median);
    ex->inputs_excess_us = median;
    if (verdict <= 0)
        return;
    for (uint32_t i = 0; i < n; i++)
        if (median > added_us [i]) {
            cand_us [i] += median - added_us [i];
            wall_us [i] += median - added_us [i];
        }
    if (!ex->fallbacks++)
        snprintf (ex->fallback_why, sizeof ex->fallback_why, "over its timed runs its inputs took %.4g us "
                  "longer to make than the reference's (the median): counted as its time", median);
}

//  The paired stop rule on the CPU, judged on the times the speedup will be
//  made of: each run with the inputs' median added when it counts; and no
//  stop but the maximum while it is not known whether it counts (a
//  candidate fast only because its work went into its inputs would stop
//  at once, as clipped, before there were runs enough to tell).
static worker_grade_stop_why_t
s_stop_cpu (worker_grade_stop_t *rule, const double *cand_us, const double *base_us, const double *in_us,
            const double *added_us, double *scratch_us, uint32_t n)
{
    double median;
    int verdict = s_inputs_verdict (in_us, n, &median);
    const double *judged = cand_us;
    if (verdict > 0) {
        for (uint32_t i = 0; i < n; i++)
            scratch_us [i] = cand_us [i] + fmax (median - added_us [i], 0);
        judged = scratch_us;
    }
    worker_grade_stop_why_t why = worker_grade_stop_check_paired (rule, judged, base_us, n);
    return verdict < 0 && why != GRADE_STOP_MAX_RUNS? GRADE_STOP_NONE: why;
}

//  --- the reference's outputs ---

//  What a call is for, on a GPU: checked only; timed (CUDA events around
//  forward, no profiler: the profiler's own cost would be in the wall
//  clock's window, and a candidate can skip it); profiled (the kernels it
//  ran, for the kernel tables and the wrapper check; not timed).
typedef enum { S_CHECKED, S_TIMED, S_PROFILED } s_how_t;

//  Whether a call copies its inputs out after it (the reference's and the
//  candidate's alike, so both are timed alike), for the candidate's to be
//  compared with the reference's: every call but a timed one on a GPU. A
//  GPU kernel's time gains nothing from writing over its inputs (the same
//  bytes move either way), and a timed call's copies there are GBs of wall
//  time at KernelBench's shapes, the clock's noise; on the CPU an output
//  not allocated is time saved.
static bool
s_copies_inputs (const s_exec_t *ex, s_how_t how)
{
    return !ex->gpu || how != S_TIMED;
}

//  Where the current outputs end in a runner's shared memory.
static uint64_t
s_slots_end (const s_exec_t *ex)
{
    uint64_t end = 0;
    for (size_t i = 0; i < ex->nslots; i++)
        if (ex->slots [i].offset + ex->slots [i].nbytes > end)
            end = ex->slots [i].offset + ex->slots [i].nbytes;
    return end;
}

//  --- a timed run's inputs on the CPU, handed over ---
//
//  C's inputs for a timed run are R's: R makes them and copies their bytes
//  behind everything else in its memory (s_share_inputs); just before each
//  program's timed call this side copies those bytes into that program's
//  own memory, where its call runs on views of them (s_give_inputs). So no
//  code of C's runs between the moment its inputs exist and its timed call
//  (its wrapped get_inputs is never called there: no work done ahead, out
//  of the clock's sight), nothing of its process's state (its heap's: a
//  few MB of page faults more or less) makes them cheaper or dearer to make
//  than R's, and both calls meet inputs just written by the same copy,
//  whoever goes first. Inputs that cannot be handed over (a dict, a NumPy
//  array, a tensor subclass: the runner's share_inputs says which) C makes
//  itself, and what they took beyond R's is counted as its time
//  (s_inputs_excess, s_inputs_floor).

//  Where R copies them: past everything its calls write (its outputs, a
//  "compile" baseline's beyond them, its inputs behind each).
static uint64_t
s_ref_writes (const s_exec_t *ex)
{
    uint64_t used = ((ex->expected_size + 4095) & ~(uint64_t) 4095) + ((s_slots_end (ex) + 63) & ~(uint64_t) 63)
                  + ex->in_span + 64;
    return (used + 4095) & ~(uint64_t) 4095;
}

//  At every size's (the last size checked may be smaller than the timing size).
static uint64_t
s_share_at (s_exec_t *ex)
{
    if (s_ref_writes (ex) > ex->ref_writes_max)
        ex->ref_writes_max = s_ref_writes (ex);
    return ex->ref_writes_max;
}

//  Every tensor's bytes of metas (R's words, items of lists and tuples too)
//  within [at, end), and, with shift, its offset moved by delta. False when
//  one is not, or the nesting is deeper than the runner makes.
static bool
s_shared_walk (json_t *metas, uint64_t at, uint64_t end, bool shift, int64_t delta, int depth)
{
    if (!json_is_array (metas) || depth > 5)
        return false;
    for (size_t i = 0; i < json_array_size (metas); i++) {
        json_t *meta = json_array_get (metas, i);
        const char *kind = json_string_value (json_object_get (meta, "kind"));
        if (!kind)
            return false;
        if (strcmp (kind, "list") == 0 || strcmp (kind, "tuple") == 0) {
            if (!s_shared_walk (json_object_get (meta, "items"), at, end, shift, delta, depth + 1))
                return false;
            continue;
        }
        if (strcmp (kind, "tensor") != 0)
            continue;
        json_int_t offset = json_integer_value (json_object_get (meta, "offset"));
        json_int_t nbytes = json_integer_value (json_object_get (meta, "nbytes"));
        if (offset < (json_int_t) at || nbytes < 0 || (uint64_t) offset + (uint64_t) nbytes > end)
            return false;
        if (shift)
            json_object_set_new (meta, "offset", json_integer (offset + delta));
    }
    return true;
}

//  R makes the inputs of seed and copies them out. 0: ex->shared set, or
//  NULL when they cannot be handed over (ex->unshared says why); -1 failed.
static int
s_share_inputs (s_exec_t *ex, uint64_t seed)
{
    json_decref (ex->shared);
    ex->shared = NULL;
    uint64_t at = s_share_at (ex);
    json_t *reply = NULL;
    if (s_ask (ex, ex->ref, json_pack ("{s:s, s:I, s:I}", "op", "inputs", "seed", (json_int_t) seed,
                                       "share", (json_int_t) at), TRUSTED_S, &reply, NULL))
        return -1;
    json_t *metas = json_object_get (reply, "shared");
    json_int_t end = json_integer_value (json_object_get (reply, "shared_end"));
    //  R runs only the task's code; still, nothing it says is used unchecked.
    if (json_is_array (metas) && end >= (json_int_t) at && (uint64_t) end - at <= ex->self->max_job_bytes / 4
    &&  json_array_size (metas) <= MAX_INPUTS && s_shared_walk (metas, at, (uint64_t) end, false, 0, 0)) {
        ex->shared = json_incref (metas);
        ex->share_at = at;
        ex->share_end = (uint64_t) end;
    }
    else
        snprintf (ex->unshared, sizeof ex->unshared, "%s", json_is_string (metas)? json_string_value (metas)
                  : "the reference's runner said where they are out of bounds");
    json_decref (reply);
    return 0;
}

static int
s_fail_map (s_exec_t *ex)
{
    worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR, "cannot map a runner's shared memory for the "
                         "inputs it is handed");
    return -1;
}

//  Copy the shared inputs into proc's memory from given_at: the "given" of
//  its call (R's words, the offsets its own). NULL when memory failed.
static json_t *
s_give_inputs (s_exec_t *ex, python_proc_t *proc, uint64_t given_at)
{
    uint64_t span = ex->share_end - ex->share_at;
    //  R's mapping first, at its largest (mapping more may move it).
    uint8_t *src = python_proc_shm (ex->ref, proc == ex->ref? given_at + span: ex->share_end);
    if (!src)
        return NULL;
    ex->expected = src;
    uint8_t *dst = proc == ex->ref? src: python_proc_shm (proc, given_at + span);
    if (!dst)
        return NULL;
    memcpy (dst + given_at, src + ex->share_at, span);
    json_t *given = json_deep_copy (ex->shared);
    if (given)
        s_shared_walk (given, ex->share_at, ex->share_end, true, (int64_t) given_at - (int64_t) ex->share_at, 0);
    return given;
}

//  Run the reference (the compiled baseline, with baseline) on its current
//  inputs, or, with inputs_seed, on inputs it makes of that seed in the
//  same request (a timed run's, made as the candidate's are); its outputs
//  become the slots (and, with keep, the expected bytes). 0 or -1.
//  The expected bytes are read where R wrote them, in its mapping, not
//  copied (GBs a call at KernelBench's shapes): only the task's code runs in
//  R, and R writes there only when told. A call that does not keep (a
//  "compile" baseline's on the CPU, timed before R's kept call) writes its
//  outputs beyond them: every call still copies
//  its outputs out, as the candidate's do, so both are timed alike. So
//  do its inputs (s_copies_inputs): with keep, where C's are compared
//  with them after C's call.
static int
s_reference_call (s_exec_t *ex, bool keep, bool baseline, s_how_t how, json_t **gpu, double *wall_s,
                  const uint64_t *inputs_seed, json_t *given)
{
    json_t *reply = NULL;
    bool inputs = s_copies_inputs (ex, how);
    json_t *req = json_pack ("{s:s, s:b, s:b, s:b, s:b}", "op", "call", "profile", how == S_PROFILED,
                             "events", how == S_TIMED, "baseline", baseline, "inputs", inputs);
    if (inputs_seed)
        json_object_set_new (req, "seed", json_integer ((json_int_t) *inputs_seed));
    if (given)
        json_object_set (req, "given", given);
    if (!keep && ex->expected_size) {
        uint64_t beyond = (ex->expected_size + 4095) & ~(uint64_t) 4095;
        json_t *slots = json_array ();
        for (size_t i = 0; i < ex->nslots; i++)
            json_array_append_new (slots, json_pack ("{s:I, s:I}", "offset",
                                   (json_int_t) (beyond + ex->slots [i].offset), "nbytes",
                                   (json_int_t) ex->slots [i].nbytes));
        json_object_set_new (req, "slots", slots);
    }
    if (s_ask (ex, ex->ref, req, TRUSTED_S, &reply, wall_s))
        return -1;
    json_t *outputs = json_object_get (reply, "outputs");
    size_t n = json_array_size (outputs);
    if (n == 0 || n > MAX_OUTPUTS) {
        worker_outcome_fail (ex->out, STATUS_INVALID, "the task's reference returned %zu outputs "
                             "(1 to %d tensors)", n, MAX_OUTPUTS);
        json_decref (reply);
        return -1;
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *meta = json_array_get (outputs, i);
        s_slot_t *slot = &ex->slots [i];
        const char *kind = json_string_value (json_object_get (meta, "kind"));
        slot->dtype = common_dtype_parse (json_string_value (json_object_get (meta, "dtype")));
        if (!kind || strcmp (kind, "tensor") != 0 || slot->dtype == DTYPE_INVALID) {
            worker_outcome_fail (ex->out, STATUS_INVALID, "the task's reference output %zu is not a "
                                 "tensor of a supported dtype", i);
            json_decref (reply);
            return -1;
        }
        slot->nbytes = (uint64_t) json_integer_value (json_object_get (meta, "nbytes"));
        slot->offset = offset;
        offset += (slot->nbytes + 63) & ~(uint64_t) 63;
        char *shape = json_dumps (json_object_get (meta, "shape"), JSON_COMPACT);
        snprintf (slot->shape, sizeof slot->shape, "%s", shape? shape: "?");
        free (shape);
        const char *device = json_string_value (json_object_get (meta, "device"));
        snprintf (slot->device, sizeof slot->device, "%s", device? device: "?");
    }
    ex->nslots = n;
    if (gpu)
        *gpu = json_incref (json_object_get (reply, "gpu"));
    //  Where R's inputs went, after its outputs (R runs only the task's code).
    if (keep) {
        ex->ref_in_at = 0;
        ex->nin = 0;
        ex->in_span = 0;
        json_t *metas = json_object_get (reply, "inputs");
        if (inputs && (!json_is_array (metas) || json_array_size (metas) > MAX_INPUTS)) {
            worker_outcome_fail (ex->out, STATUS_INVALID, "the task's get_inputs() made %zu values "
                                 "(this worker compares %d at most)", json_array_size (metas), MAX_INPUTS);
            json_decref (reply);
            return -1;
        }
        uint64_t at = (offset + 63) & ~(uint64_t) 63;
        for (size_t i = 0; inputs && i < json_array_size (metas); i++) {
            json_t *meta = json_array_get (metas, i);
            const char *kind = json_string_value (json_object_get (meta, "kind"));
            bool tensor = kind && strcmp (kind, "tensor") == 0;
            common_dtype_t dtype = common_dtype_parse (json_string_value (json_object_get (meta, "dtype")));
            ex->in_rel [i] = at - ((offset + 63) & ~(uint64_t) 63);
            ex->in_nbytes [i] = tensor? (uint64_t) json_integer_value (json_object_get (meta, "nbytes")): 0;
            ex->in_esize [i] = dtype != DTYPE_INVALID? common_dtype_size (dtype): 1;
            at = (at + ex->in_nbytes [i] + 63) & ~(uint64_t) 63;
            ex->nin = i + 1;
        }
        if (inputs) {
            ex->ref_in_at = (offset + 63) & ~(uint64_t) 63;
            if ((uint64_t) json_integer_value (json_object_get (reply, "inputs_at")) != ex->ref_in_at) {
                worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR, "the reference's runner put its "
                                     "inputs elsewhere than after its outputs");
                json_decref (reply);
                return -1;
            }
            ex->in_span = at - ex->ref_in_at;
            offset = at;
        }
    }
    json_decref (reply);
    if (offset > ex->self->max_job_bytes / 4) {
        worker_outcome_fail (ex->out, STATUS_INVALID, "the outputs (and the inputs behind them) need "
                             "%.3g GiB; this worker allows %.3g GiB per job (--max-job-memory)",
                             (double) offset / (1u << 30),
                             (double) ex->self->max_job_bytes / (1u << 30));
        return -1;
    }
    if (!keep)
        return 0;
    ex->expected = python_proc_shm (ex->ref, offset);
    ex->expected_size = ex->expected? offset: 0;
    s_share_at (ex);
    if (!ex->expected) {
        worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR, "cannot map %llu bytes of outputs",
                             (unsigned long long) offset);
        return -1;
    }
    //  A reference answer of NaN could never be matched: the task is broken.
    worker_grade_tensor_t tensors [MAX_OUTPUTS];
    for (size_t i = 0; i < n; i++) {
        size_t esize = common_dtype_size (ex->slots [i].dtype);
        tensors [i] = (worker_grade_tensor_t) { .name = "output", .kind = ARG_OUTPUT,
            .dtype = ex->slots [i].dtype, .count = esize? ex->slots [i].nbytes / esize: 0,
            .expected = ex->expected + ex->slots [i].offset };
    }
    return worker_grade_reference (ex->out, tensors, n, 0, ex->tol.threads);
}

//  --- the candidate's calls ---

//  Poison the candidate's output area with bits that depend on this run: a
//  tile of them, repeated (what matters is that a right value rarely
//  equals the poison at its place, not that the poison is secret: writing
//  it would be wrong anyway; and outputs are hundreds of MB).
typedef struct {
    uint8_t *area;
    size_t from, to;                //  tiles
    size_t size;
    const uint8_t *tile;
} s_poison_part_t;

static void *
s_poison_part (void *arg)
{
    s_poison_part_t *part = arg;
    for (size_t t = part->from; t < part->to; t++) {
        size_t at = t * POISON_TILE;
        memcpy (part->area + at, part->tile, part->size - at < POISON_TILE? part->size - at: POISON_TILE);
    }
    return NULL;
}

//  On up to threads threads (GBs at KernelBench's shapes: one core writes
//  ~10 GB/s at best).
static void
s_poison (uint8_t *area, size_t size, uint8_t *tile, uint64_t seed, uint32_t threads)
{
    randombytes_buf_deterministic (tile, POISON_TILE, (const unsigned char *) (uint64_t [4]) { seed, ~seed, seed ^ 0x5bd1e995u, 7 });
    size_t tiles = (size + POISON_TILE - 1) / POISON_TILE;
    size_t parts = threads < 1? 1: threads > 16? 16: threads;
    if (tiles < 64 * parts)         //  under 64 MiB a thread: not worth one
        parts = tiles / 64 > 1? tiles / 64: 1;
    s_poison_part_t part [16];
    for (size_t p = 0; p < parts; p++)
        part [p] = (s_poison_part_t) { .area = area, .size = size, .tile = tile,
                                       .from = tiles * p / parts, .to = tiles * (p + 1) / parts };
    common_run_parts (s_poison_part, part, sizeof part [0], (unsigned) parts);
}

//  Whether two areas hold the same bytes, on up to threads threads (an
//  input is GBs at KernelBench's shapes; one core compares ~10 GB/s).
typedef struct {
    const uint8_t *a, *b;
    size_t size;
    bool differ;
} s_same_part_t;

static void *
s_same_part (void *arg)
{
    s_same_part_t *part = arg;
    part->differ = memcmp (part->a, part->b, part->size) != 0;
    return NULL;
}

static bool
s_same (const uint8_t *a, const uint8_t *b, size_t size, uint32_t threads)
{
    size_t parts = threads < 1? 1: threads > 16? 16: threads;
    if (size < ((size_t) 64 << 20) * parts)     //  under 64 MiB a thread: not worth one
        parts = size / (64 << 20) > 1? size / (64 << 20): 1;
    s_same_part_t part [16];
    for (size_t p = 0; p < parts; p++)
        part [p] = (s_same_part_t) { .a = a + size * p / parts, .b = b + size * p / parts,
                                     .size = size * (p + 1) / parts - size * p / parts };
    common_run_parts (s_same_part, part, sizeof part [0], (unsigned) parts);
    for (size_t p = 0; p < parts; p++)
        if (part [p].differ)
            return false;
    return true;
}

//  Positions of the output at offset in area read the moment the reply
//  arrives: how many still hold poison.
static uint32_t
s_still_poisoned (const uint8_t *area, size_t offset, size_t size, size_t esize, const uint8_t *tile)
{
    if (size < esize || esize == 0)
        return 0;
    size_t count = size / esize;
    uint32_t hits = 0;
    for (int i = 0; i < SAMPLES; i++) {
        size_t at = offset + (size_t) (randombytes_uniform (UINT32_MAX) * (uint64_t) count / UINT32_MAX) % count * esize;
        if (memcmp (area + at, tile + at % POISON_TILE, esize) == 0)
            hits++;
    }
    return hits;
}

//  KGYM_TIMING_TRACE set: a log line per timed GPU call, the supervisor's
//  wall time beside what the runner says of it (its events, and where its
//  own clock saw the time go: making the inputs when the call made them,
//  before forward, forward's launches, the wait, the output's copy); on the
//  CPU a line per timed run (s_timing: both calls and both inputs, who went
//  first). For reading why clocks disagree; never used.
static bool
s_tracing (void)
{
    static int on = -1;
    if (on < 0)
        on = getenv ("KGYM_TIMING_TRACE") != NULL;
    return on;
}

static void
s_trace (s_exec_t *ex, const char *who, double wall_s, json_t *gpu)
{
    if (!s_tracing () || !ex->gpu)
        return;
    char *phases = json_dumps (json_object_get (gpu, "phases_us"), JSON_COMPACT | JSON_ENCODE_ANY);
    log_info ("python", "trace %s: wall %.1f us, events %.1f us, runner %s%s", who, wall_s * 1e6,
              json_number_value (json_object_get (gpu, "event_us")), phases? phases: "-",
              json_is_false (json_object_get (gpu, "pinned"))? " (outputs' memory not pinned)": "");
    free (phases);
}

//  The time of one call, from both clocks (see the file's header). On the
//  CPU it is the wall time of the call, measured here (the baseline's the
//  same way, through the same harness). On a GPU it is the GPU time the
//  call's runner reports (CUDA events around forward), when this side's
//  wall clock agrees: the wall time beyond it must not exceed what it is for
//  the reference's own calls (the reply, the output's copy) by more than
//  their spread allows. Otherwise the wall clock's reading less that slack
//  (the wall time less the reference's overhead, less the slack): what the
//  clocks agree on at the least, so a reading just past the slack does not
//  jump to the whole difference. What a lie can keep under the slack, the
//  floor over all the runs takes back (s_wall_floor).
static double
s_call_time (s_exec_t *ex, double wall_s, json_t *gpu)
{
    if (!ex->gpu)
        return wall_s;
    double t = json_number_value (json_object_get (gpu, "event_us")) / 1e6;
    s_trace (ex, "candidate", wall_s, gpu);
    if (t > 0 && ex->ngap < OVER_MAX)
        ex->gap [ex->ngap++] = wall_s - t;
    double by_wall = wall_s - ex->over_s;
    double slack = 1e-4 + 4 * ex->over_dev_s + 0.05 * t;
    bool agrees = t > 0 && wall_s - t <= ex->over_s + slack;
    if (agrees)
        return t;
    if (!ex->fallbacks++) {
        if (!(t > 0))
            snprintf (ex->fallback_why, sizeof ex->fallback_why, "its call reported no GPU time");
        else        //  the figures say by how much, for whoever tunes the slack
            snprintf (ex->fallback_why, sizeof ex->fallback_why, "its wall time %.4g ms was longer than "
                      "its reported GPU time %.4g ms and the reference's overhead %.4g ms (+ %.3g ms) "
                      "account for", wall_s * 1e3, t * 1e3, ex->over_s * 1e3, slack * 1e3);
    }
    if (!(t > 0))           //  nothing reported: the wall clock's reading, whole
        return by_wall > 0? by_wall: wall_s;
    return by_wall - slack > t? by_wall - slack: t;
}

//  Over all the timed runs, the wall clock must agree too: each run's wall
//  time less the reference's overhead is an unbiased reading of its time,
//  as noisy as that overhead. A slack per call (s_call_time) lets a call
//  whose reported time is too low through when the difference is inside
//  the noise; over n runs the noise of the median shrinks by sqrt(n), so
//  when the wall clock's median is above the reported median by more than
//  one standard error of it, every run's time is scaled up to the wall
//  clock's median less that: no lie gains more than one standard error.
//  The floor is continuous, so an honest candidate the noise puts past the
//  line (one in six) is charged only what is beyond it, a small fraction
//  of that error on average, not the whole difference. 0, or the factor
//  applied.
static double
s_wall_floor (s_exec_t *ex, double *cand_us, const double *wall_us, uint32_t n)
{
    if (!ex->gpu || n == 0)
        return 0;
    double *a = malloc (2 * n * sizeof (double));
    if (!a)
        return 0;
    memcpy (a, cand_us, n * sizeof (double));
    memcpy (a + n, wall_us, n * sizeof (double));
    double reported = s_median (a, n), by_wall = s_median (a + n, n);
    free (a);
    double noise_us = 1e6 * (1.25 * ex->over_dev_s / sqrt ((double) n)) + 2;
    if (!(reported > 0) || by_wall <= reported + noise_us)
        return 0;
    double factor = (by_wall - noise_us) / reported;
    for (uint32_t i = 0; i < n; i++)
        cand_us [i] *= factor;
    if (!ex->fallbacks++)
        snprintf (ex->fallback_why, sizeof ex->fallback_why, "over its timed runs the wall clock read "
                  "%.4g us a call, its reported GPU time %.4g us: the wall clock's less its noise "
                  "(%.3g us) is used", by_wall, reported, noise_us);
    return factor;
}

//  Add a call's kernel records to totals (name -> {us, launches}).
static void
s_add_kernels (json_t *totals, json_t *gpu)
{
    json_t *kernels = json_object_get (gpu, "kernels");
    size_t i;
    json_t *k;
    json_array_foreach (kernels, i, k) {
        const char *name = json_string_value (json_object_get (k, "name"));
        if (!name)
            continue;
        char key [256];
        snprintf (key, sizeof key, "%s", name);
        json_t *entry = json_object_get (totals, key);
        if (!entry) {
            if (json_object_size (totals) >= 256)
                continue;
            entry = json_pack ("{s:f, s:i}", "us", 0.0, "launches", 0);
            json_object_set_new (totals, key, entry);
        }
        json_object_set_new (entry, "us", json_real (json_number_value (json_object_get (entry, "us"))
                                                     + json_number_value (json_object_get (k, "us"))));
        json_object_set_new (entry, "launches",
                             json_integer (json_integer_value (json_object_get (entry, "launches")) + 1));
    }
}

//  How a candidate call is made: on inputs it makes of the run's seed in
//  the same request (a timed run on a GPU); resumed first (it was stopped
//  since its inputs request).
#define S_MAKE_INPUTS   1
#define S_RESUME        2
#define S_DEFER         4           //  C left stopped, its outputs not compared yet (s_candidate_compare)
#define S_GIVEN         8           //  on R's inputs, handed over (s_give_inputs)

//  C's outputs (and inputs, when its call copied them) against R's, every
//  byte, C stopped (since its reply): nothing of it runs while they are
//  read. C continues after. 0 right; -1 with the verdict set.
static int
s_candidate_compare (s_exec_t *ex, bool inputs, uint32_t size_index, uint32_t trial, const char *when)
{
    uint64_t in_at = (s_slots_end (ex) + 63) & ~(uint64_t) 63;
    uint8_t *shm = python_proc_shm (ex->cand, inputs? in_at + ex->in_span: s_slots_end (ex));
    if (!shm) {
        python_proc_continue (ex->cand);
        worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR, "cannot map the candidate's outputs");
        return -1;
    }
    worker_grade_tensor_t tensors [MAX_OUTPUTS];
    char names [MAX_OUTPUTS][16];
    for (size_t i = 0; i < ex->nslots; i++) {
        const s_slot_t *slot = &ex->slots [i];
        size_t esize = common_dtype_size (slot->dtype);
        snprintf (names [i], sizeof names [i], "output %zu", i);
        tensors [i] = (worker_grade_tensor_t) { .name = names [i], .kind = ARG_OUTPUT, .dtype = slot->dtype,
            .count = slot->nbytes / esize, .expected = ex->expected + slot->offset,
            .got = shm + slot->offset };
    }
    int rc = worker_grade_check (ex->out, tensors, ex->nslots, &ex->tol, size_index, trial, when);
    //  Its inputs, as its call left them, must be the reference's, byte for
    //  byte: read here, where it wrote them before its reply, not asked of
    //  its process (which could answer anything, or remake them from the
    //  seed once no clock runs).
    for (size_t i = 0; rc == 0 && inputs && i < ex->nin; i++) {
        const uint8_t *got = shm + in_at + ex->in_rel [i];
        const uint8_t *want = ex->expected + ex->ref_in_at + ex->in_rel [i];
        if (ex->in_nbytes [i] == 0 || s_same (got, want, ex->in_nbytes [i], ex->tol.threads))
            continue;
        uint64_t at = 0;
        while (at < ex->in_nbytes [i] && got [at] == want [at])
            at++;
        worker_outcome_fail (ex->out, STATUS_INCORRECT, "input %zu was not the reference's after the "
                             "candidate's call (changed by it, from element %llu; %s)", i,
                             (unsigned long long) (at / (ex->in_esize [i]? ex->in_esize [i]: 1)), when);
        rc = -1;
    }
    python_proc_continue (ex->cand);
    return rc? -1: 0;
}

//  One candidate call on the inputs it holds (or makes, S_MAKE_INPUTS),
//  checked against ex->expected. *time_s gets its time when timed. 0 right;
//  -1 with the verdict set.
static int
s_candidate_call (s_exec_t *ex, uint64_t seed, s_how_t how, const char *when, uint32_t size_index,
                  uint32_t trial, double *time_s, unsigned flags)
{
    //  Where its outputs go (and its inputs after the call, behind them),
    //  poisoned, and what the poison was.
    bool inputs = s_copies_inputs (ex, how) && ex->ref_in_at;
    uint64_t in_at = (s_slots_end (ex) + 63) & ~(uint64_t) 63;
    uint64_t total = inputs? in_at + ex->in_span: s_slots_end (ex);
    uint8_t *shm = python_proc_shm (ex->cand, total? total: 1);
    uint8_t *poison = malloc (POISON_TILE);
    if (shm && poison)
        s_poison (shm, total, poison, seed ^ 0xC0FFEEull, ex->tol.threads);
    //  Its inputs, R's, written after the poison (as R's are) while it is stopped.
    json_t *given = shm && poison && (flags & S_GIVEN)? s_give_inputs (ex, ex->cand, (total + 4095) & ~(uint64_t) 4095): NULL;
    if (flags & S_RESUME)
        python_proc_continue (ex->cand);
    if (!shm || !poison || ((flags & S_GIVEN) && !given)) {
        free (poison);
        json_decref (given);
        worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR, "cannot map %llu bytes", (unsigned long long) total);
        return -1;
    }
    shm = python_proc_shm (ex->cand, total? total: 1);     //  the mapping may have moved
    json_t *slots = json_array ();
    for (size_t i = 0; i < ex->nslots; i++)
        json_array_append_new (slots, json_pack ("{s:I, s:I}", "offset", (json_int_t) ex->slots [i].offset,
                                                 "nbytes", (json_int_t) ex->slots [i].nbytes));
    double budget = ex->job->eval.timeout_s;
    double left = WALL_FACTOR * budget - ex->wall_s;
    if (left <= 0 || ex->used_s > budget) {
        free (poison);
        json_decref (slots);
        json_decref (given);
        worker_outcome_fail (ex->out, STATUS_TIMEOUT, "timed out: the candidate used up its %.3g s budget",
                             budget);
        return -1;
    }
    json_t *reply = NULL;
    double wall = 0;
    //  No call waits past what is left of the budget (and a margin for what
    //  a call's wall time holds beyond its counted time): a hang ends then.
    double wait = budget - ex->used_s + 5.0 + 2 * ex->over_s;
    if (wait > left)
        wait = left;
    bool timed = how == S_TIMED;
    json_t *req = json_pack ("{s:s, s:o, s:b, s:b, s:b}", "op", "call", "slots", slots, "profile",
                             how == S_PROFILED && ex->gpu, "events", timed && ex->gpu, "inputs", inputs);
    if (flags & S_MAKE_INPUTS)
        json_object_set_new (req, "seed", json_integer ((json_int_t) seed));
    if (given)
        json_object_set_new (req, "given", given);
    int rc = s_ask (ex, ex->cand, req, wait, &reply, &wall);
    ex->wall_s += wall;
    if (rc) {
        free (poison);
        if (ex->out->status == STATUS_TIMEOUT)
            snprintf (ex->out->message, sizeof ex->out->message, "timed out: the candidate's call (%s) "
                      "ran past its budget of %.3g s", when, budget);
        return -1;
    }
    //  What came back, as the reply says (checked against the reference's first).
    json_t *outputs = json_object_get (reply, "outputs");
    if (json_array_size (outputs) != ex->nslots) {
        worker_outcome_fail (ex->out, STATUS_INCORRECT, "the candidate returned %zu outputs, the "
                             "reference %zu (%s)", json_array_size (outputs), ex->nslots, when);
        json_decref (reply);
        free (poison);
        return -1;
    }
    for (size_t i = 0; i < ex->nslots; i++) {
        json_t *meta = json_array_get (outputs, i);
        const s_slot_t *slot = &ex->slots [i];
        const char *kind = json_string_value (json_object_get (meta, "kind"));
        const char *dtype = json_string_value (json_object_get (meta, "dtype"));
        const char *device = json_string_value (json_object_get (meta, "device"));
        char *shape = json_dumps (json_object_get (meta, "shape"), JSON_COMPACT);
        char problem [256] = "";
        if (!kind || strcmp (kind, "tensor") != 0)
            snprintf (problem, sizeof problem, "is a %.64s, not a plain torch.Tensor", kind? kind: "?");
        else
        if (!dtype || common_dtype_parse (dtype) != slot->dtype)
            snprintf (problem, sizeof problem, "has dtype %.16s, the reference's %s", dtype? dtype: "?",
                      common_dtype_name (slot->dtype));
        else
        if (!shape || strcmp (shape, slot->shape) != 0)
            snprintf (problem, sizeof problem, "has shape %.60s, the reference's %.60s", shape? shape: "?",
                      slot->shape);
        else
        if (!device || strcmp (device, slot->device) != 0)
            snprintf (problem, sizeof problem, "is on %.16s, the reference's on %s", device? device: "?",
                      slot->device);
        free (shape);
        if (problem [0]) {
            worker_outcome_fail (ex->out, STATUS_INCORRECT, "output %zu %s (%s)", i, problem, when);
            json_decref (reply);
            free (poison);
            return -1;
        }
    }
    //  Then, at once: an output still holding poison was not complete when
    //  the reply was sent.
    for (size_t i = 0; i < ex->nslots; i++) {
        const s_slot_t *slot = &ex->slots [i];
        size_t esize = common_dtype_size (slot->dtype);
        uint32_t hits = s_still_poisoned (shm, slot->offset, slot->nbytes, esize, poison);
        //  A right value equal to the poison by chance: 1 in 2^(8 esize).
        uint32_t chance = esize == 1? SAMPLES / 32: esize == 2? 8: 2;
        if (hits > chance) {
            free (poison);
            json_decref (reply);
            worker_outcome_fail (ex->out, STATUS_INCORRECT, "output %zu was not complete when the "
                                 "candidate's call returned (%u of %d positions read at once were "
                                 "never written; %s)", i, hits, SAMPLES, when);
            return -1;
        }
    }
    free (poison);
    json_t *gpu = json_object_get (reply, "gpu");
    if (timed) {
        ex->last_wall_s = wall;
        double t = s_call_time (ex, wall, gpu);
        ex->used_s += t;
        *time_s = t;
    }
    else
        ex->used_s += wall;
    if (how == S_PROFILED && ex->gpu && json_is_object (gpu))
        s_add_kernels (ex->cand_kernels, gpu);
    json_decref (reply);
    //  Every byte, with the candidate stopped: nothing of it runs while its
    //  outputs are read.
    if (python_proc_stop (ex->cand)) {
        worker_outcome_fail (ex->out, STATUS_RUNTIME_ERROR, "the candidate's runner exited or could "
                             "not be stopped after its call (%s)", when);
        return -1;
    }
    if (flags & S_DEFER)
        return 0;
    return s_candidate_compare (ex, inputs, size_index, trial, when);
}

//  --- the build cache ---
//
//  A candidate's import builds its extensions (load_inline: ninja, nvcc)
//  and Triton compiles its kernels, into folders of the candidate process's
//  own directory. After a job whose candidate imported, those folders are
//  kept under the candidate's key (a hash of its source and of everything
//  else that changes a build); a later job with the same key starts with a
//  copy of them, so the same build is found up to date. A build is only ever
//  seen by jobs of the key that made it: one candidate cannot plant an
//  artifact another loads. Copies take regular files and folders only (never
//  a link), bounded in bytes and files.

static void
s_build_key_of (python_backend_t *self, const char *target, const char *torch, const char *triton,
                const char *gpu, const char *source, char key [2 * COMMON_HASH_BYTES + 1])
{
    key [0] = 0;
    common_hash_t *hash = common_hash_new ();
    if (!hash)
        return;
    const char *fields [] = { "kgym-pybuild 1", self->python, target, torch, triton, gpu, source };
    for (size_t i = 0; i < sizeof fields / sizeof fields [0]; i++)
        common_hash_add_str (hash, 'f', fields [i]? fields [i]: "");
    uint8_t digest [COMMON_HASH_BYTES];
    common_hash_final (hash, digest);
    common_hash_hex (digest, key);
    common_hash_destroy (&hash);
}

//  A job's build key from its candidate runner's hello.
static void
s_build_key (s_exec_t *ex, json_t *hello, char key [2 * COMMON_HASH_BYTES + 1])
{
    s_build_key_of (ex->self, ex->target, json_string_value (json_object_get (hello, "torch")),
                    json_string_value (json_object_get (hello, "triton")),
                    json_string_value (json_object_get (hello, "gpu")), ex->job->candidate->source, key);
}

//  Remember what a target's candidate runner said (the next jobs' builders
//  need it before any runner of theirs is there).
static void
s_learn (python_backend_t *self, bool gpu, json_t *hello)
{
    s_known_t *k = &self->known [gpu];
    const char *fields [4] = { "torch", "triton", "gpu", "arch" };
    char *into [4] = { k->torch, k->triton, k->gpu, k->arch };
    size_t sizes [4] = { sizeof k->torch, sizeof k->triton, sizeof k->gpu, sizeof k->arch };
    pthread_mutex_lock (&self->lock);
    for (int i = 0; i < 4; i++) {
        const char *value = json_string_value (json_object_get (hello, fields [i]));
        snprintf (into [i], sizes [i], "%s", value? value: "");
    }
    k->set = true;
    pthread_mutex_unlock (&self->lock);
}

//  Copy one regular file, opened at name in the folder dirfd, to `to`: at
//  most the size it had when opened (a file still growing is not followed).
static int
s_copy_file (int dirfd, const char *name, const char *to, int owner, uint64_t *bytes, uint32_t *files)
{
    //  O_NONBLOCK: whatever the name is by now, opening it never waits.
    int in = openat (dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (in < 0)                     //  a link, a socket, gone meanwhile: skipped
        return errno == ELOOP || errno == ENXIO || errno == ENOENT || errno == EOPNOTSUPP? 0: -1;
    if (fstat (in, &st) != 0 || !S_ISREG (st.st_mode)) {
        close (in);
        return 0;                   //  links, sockets, devices: never
    }
    if (++*files > BUILD_MAX_FILES || (*bytes += (uint64_t) st.st_size) > BUILD_MAX_BYTES) {
        close (in);
        return -1;
    }
    int out = open (to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 0755);
    char buf [65536];
    off_t left = st.st_size;
    ssize_t n = 0;
    while (out >= 0 && left > 0
       &&  (n = read (in, buf, left < (off_t) sizeof buf? (size_t) left: sizeof buf)) > 0) {
        if (write (out, buf, (size_t) n) != n) {
            n = -1;
            break;
        }
        left -= n;
    }
    int rc = out < 0 || n < 0? -1: 0;
    if (rc == 0) {
        struct timespec times [2] = { st.st_atim, st.st_mtim };
        futimens (out, times);
        if (owner >= 0 && fchown (out, (uid_t) owner, (gid_t) owner) != 0)
            rc = -1;
    }
    close (in);
    if (out >= 0)
        close (out);
    return rc;
}

//  Copy the tree of the folder src (a descriptor, taken) into to (made),
//  regular files and folders only, owned by owner when given (>= 0), mtimes
//  kept (a build found up to date). Folder by folder through descriptors:
//  the runner may still be renaming things in its tree, and no path is
//  ever resolved again (a folder swapped for a link leads nowhere).
static int
s_copy_tree_at (int src, const char *to, int owner, uint64_t *bytes, uint32_t *files, int depth)
{
    if (depth > 16
    ||  (mkdir (to, 0700) != 0 && errno != EEXIST)
    ||  (owner >= 0 && chown (to, (uid_t) owner, (gid_t) owner) != 0)) {
        close (src);
        return -1;
    }
    DIR *dir = fdopendir (src);
    if (!dir) {
        close (src);
        return -1;
    }
    int rc = 0;
    struct dirent *ent;
    while (rc == 0 && (ent = readdir (dir))) {
        if (strcmp (ent->d_name, ".") == 0 || strcmp (ent->d_name, "..") == 0)
            continue;
        char b [PATH_MAX];
        if (snprintf (b, sizeof b, "%s/%s", to, ent->d_name) >= (int) sizeof b)
            continue;
        int sub = openat (dirfd (dir), ent->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0)
            rc = s_copy_tree_at (sub, b, owner, bytes, files, depth + 1);
        else
            rc = s_copy_file (dirfd (dir), ent->d_name, b, owner, bytes, files);
    }
    closedir (dir);
    return rc;
}

static int
s_copy_tree (const char *from, const char *to, int owner, uint64_t *bytes, uint32_t *files)
{
    int src = open (from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return src < 0? -1: s_copy_tree_at (src, to, owner, bytes, files, 0);
}

static int
s_rm_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st; (void) flag; (void) ftw;
    remove (path);
    return 0;
}

static const char *s_build_parts [] = { "extensions", "triton", NULL };

//  Before the candidate imports: its key's kept build, when there is one.
static bool
s_build_restore (s_exec_t *ex, const char *key)
{
    if (!ex->self->builds [0] || !key [0])
        return false;
    char kept [PATH_MAX];
    snprintf (kept, sizeof kept, "%s/%s", ex->self->builds, key);
    struct stat st;
    if (lstat (kept, &st) != 0 || !S_ISDIR (st.st_mode))
        return false;
    //  Used now: the last to go when the cache is trimmed.
    utimensat (AT_FDCWD, kept, NULL, AT_SYMLINK_NOFOLLOW);
    //  The files are the candidate's runner's (its own uid), as its directory is.
    int owner = geteuid () == 0? (int) python_proc_uid (ex->cand): -1;
    bool any = false;
    for (int i = 0; s_build_parts [i]; i++) {
        //  Copied beside, then put in place whole: a part that did not copy
        //  entirely (trimmed meanwhile, say) is never half there.
        char from [PATH_MAX], to [PATH_MAX], part [PATH_MAX];
        snprintf (from, sizeof from, "%s/%s", kept, s_build_parts [i]);
        snprintf (to, sizeof to, "%s/%s", python_proc_dir (ex->cand), s_build_parts [i]);
        snprintf (part, sizeof part, "%s/.restore-%s", python_proc_dir (ex->cand), s_build_parts [i]);
        uint64_t bytes = 0;
        uint32_t files = 0;
        if (lstat (from, &st) != 0)
            continue;
        if (s_copy_tree (from, part, owner, &bytes, &files) == 0 && rename (part, to) == 0)
            any = true;
        else {
            log_warn ("python", "the kept build of %.12s (%s) did not copy: %s", key, s_build_parts [i],
                      strerror (errno));
            nftw (part, s_rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
        }
    }
    log_debug ("python", "build of %.12s restored: %s", key, any? "yes": "no");
    return any;
}

//  A kept build's size, in the file "bytes" of its folder.
static int
s_bytes_write (const char *folder, uint64_t bytes)
{
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/bytes", folder);
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    char text [32];
    int len = snprintf (text, sizeof text, "%llu\n", (unsigned long long) bytes);
    int rc = write (fd, text, (size_t) len) == len? 0: -1;
    close (fd);
    return rc;
}

static uint64_t
s_bytes_read (const char *folder)
{
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/bytes", folder);
    FILE *file = fopen (path, "re");
    unsigned long long bytes = 0;
    if (file && fscanf (file, "%llu", &bytes) != 1)
        bytes = 0;
    if (file)
        fclose (file);
    return bytes;
}

//  Keep the build cache under its bound: the kept builds used least
//  recently (a restore touches its folder) go first, until the rest fit.
//  Each folder says its bytes (the file "bytes", written when it was kept).
typedef struct {
    char name [2 * COMMON_HASH_BYTES + 1];
    uint64_t bytes;
    struct timespec used;
} s_kept_t;

static int
s_kept_older (const void *a, const void *b)
{
    const struct timespec *x = &((const s_kept_t *) a)->used, *y = &((const s_kept_t *) b)->used;
    return x->tv_sec != y->tv_sec? (x->tv_sec > y->tv_sec) - (x->tv_sec < y->tv_sec)
                                  : (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

static void
s_builds_trim (python_backend_t *self)
{
    pthread_mutex_lock (&self->trim);
    DIR *dir = opendir (self->builds);
    s_kept_t *all = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *ent;
    while (dir && (ent = readdir (dir))) {
        if (ent->d_name [0] == '.' || strlen (ent->d_name) != 2 * COMMON_HASH_BYTES)
            continue;           //  ".", "..", builds being kept (".KEY.pid.n")
        char path [PATH_MAX];
        struct stat st;
        snprintf (path, sizeof path, "%s/%s", self->builds, ent->d_name);
        if (lstat (path, &st) != 0 || !S_ISDIR (st.st_mode))
            continue;
        if (n == cap) {
            s_kept_t *more = realloc (all, (cap = cap? 2 * cap: 64) * sizeof *all);
            if (!more)
                break;
            all = more;
        }
        snprintf (all [n].name, sizeof all [n].name, "%s", ent->d_name);
        all [n].bytes = s_bytes_read (path);
        all [n].used = st.st_mtim;
        total += all [n++].bytes;
    }
    if (dir)
        closedir (dir);
    if (total > self->builds_max) {
        qsort (all, n, sizeof *all, s_kept_older);
        for (size_t i = 0; i < n && total > self->builds_max; i++) {
            //  Out of the way at once (a rename), then removed.
            char path [PATH_MAX], gone [PATH_MAX];
            snprintf (path, sizeof path, "%s/%s", self->builds, all [i].name);
            snprintf (gone, sizeof gone, "%s/.gone.%s", self->builds, all [i].name);
            if (rename (path, gone) == 0)
                nftw (gone, s_rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
            total -= all [i].bytes;
            log_debug ("python", "build cache over %llu bytes: dropped %.12s (%llu bytes)",
                       (unsigned long long) self->builds_max, all [i].name,
                       (unsigned long long) all [i].bytes);
        }
    }
    free (all);
    pthread_mutex_unlock (&self->trim);
}

//  Is there a kept build of key?
static bool
s_build_kept (python_backend_t *self, const char *key)
{
    char kept [PATH_MAX];
    struct stat st;
    snprintf (kept, sizeof kept, "%s/%s", self->builds, key);
    return self->builds [0] && key [0] && lstat (kept, &st) == 0;
}

//  After a candidate's module imported in the runner whose directory is
//  dir: keep what it built under its key.
static void
s_build_keep (python_backend_t *self, const char *dir, const char *key)
{
    if (!self->builds [0] || !key [0] || s_build_kept (self, key))
        return;                     //  kept already: the first build of a key stays
    char kept [PATH_MAX], tmp [PATH_MAX];
    snprintf (kept, sizeof kept, "%s/%s", self->builds, key);
    struct stat st;
    //  Two jobs of one key may build at once (two compile threads).
    static _Atomic unsigned s_tmp_count;
    snprintf (tmp, sizeof tmp, "%s/.%s.%d.%u", self->builds, key, (int) getpid (), s_tmp_count++);
    if (mkdir (tmp, 0700) != 0)
        return;
    uint64_t bytes = 0;
    uint32_t files = 0;
    int rc = 0;
    for (int i = 0; s_build_parts [i] && rc == 0; i++) {
        char from [PATH_MAX], to [PATH_MAX];
        snprintf (from, sizeof from, "%s/%s", dir, s_build_parts [i]);
        snprintf (to, sizeof to, "%s/%s", tmp, s_build_parts [i]);
        if (lstat (from, &st) == 0 && S_ISDIR (st.st_mode))
            rc = s_copy_tree (from, to, -1, &bytes, &files);
    }
    if (rc == 0 && files == 0) {
        nftw (tmp, s_rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
        return;                     //  nothing built: nothing to find next time
    }
    if (rc == 0 && s_bytes_write (tmp, bytes) == 0 && rename (tmp, kept) == 0) {
        log_info ("python", "kept the build of %.12s: %u files, %llu bytes", key, files,
                  (unsigned long long) bytes);
        s_builds_trim (self);
        return;
    }
    //  ENOTEMPTY, EEXIST: another job of the key kept its build first.
    if (rc != 0 || (errno != ENOTEMPTY && errno != EEXIST))
        log_warn ("python", "the build of %.12s is not kept (%u files, %llu bytes so far): %s", key,
                  files, (unsigned long long) bytes, strerror (errno));
    nftw (tmp, s_rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

//  --- phases ---

//  Poison size bytes of R's mapping from offset from: where a call of R's
//  is about to write, as C's area is before each of C's calls (this side's
//  writes leave those lines in another core's caches, and the copy into
//  them then costs the same on both sides: ~300 us of a 1 MB ReLU's ~400 on
//  the CPU here when only C's was poisoned).
static void
s_poison_ref (s_exec_t *ex, uint64_t from, uint64_t size, uint64_t seed)
{
    uint8_t *tile = size? malloc (POISON_TILE): NULL;
    uint8_t *shm = tile? python_proc_shm (ex->ref, from + size): NULL;
    if (shm) {
        ex->expected = shm;         //  the mapping may have moved
        s_poison (shm + from, size, tile, seed, ex->tol.threads);
    }
    free (tile);
}

//  A timed call of R's on the GPU, made as the candidate's are: on inputs
//  it makes of seed in the same request, into memory this side has just
//  poisoned (the copy into memory just written is what the candidate's
//  calls meet). Its wall time beyond its GPU time is one more sample of R's
//  overhead per call (making the inputs, the reply, the output's copy);
//  *t_s gets its GPU time (its wall time when it reported none).
static int
s_reference_sampled (s_exec_t *ex, bool keep, bool baseline, uint64_t seed, uint64_t poison_seed,
                     double *t_s)
{
    s_poison_ref (ex, 0, s_slots_end (ex), poison_seed);
    json_t *gpu = NULL;
    double wall = 0;
    if (s_reference_call (ex, keep, baseline, S_TIMED, &gpu, &wall, &seed, NULL)) {
        json_decref (gpu);
        return -1;
    }
    double gpu_s = json_number_value (json_object_get (gpu, "event_us")) / 1e6;
    s_trace (ex, baseline? "reference (baseline)": "reference", wall, gpu);
    json_decref (gpu);
    if (gpu_s > 0)
        s_over_add (ex, wall - gpu_s);
    *t_s = gpu_s > 0? gpu_s: wall;
    return 0;
}

//  The baseline (the eager reference) timed in R, before the candidate's
//  module exists. Samples into base_us (ex->base_n of them: eval.timed at
//  most, fewer once its median is known well enough for the speedup's
//  interval, worker_grade_stop_baseline).
static int
s_baseline (s_exec_t *ex, double *base_us)
{
    const common_eval_t *eval = &ex->job->eval;
    size_t ts = ex->task->timing_size;
    if (s_size (ex, ex->ref, ts))
        return -1;
    worker_grade_stop_t rule;
    worker_grade_stop_init (&rule, eval->timed, ex->job->reward.clip);
    ex->base_n = 0;
    ex->nover = 0;
    for (uint32_t i = 0; i < eval->warmup + eval->timed; i++) {
        double t = 0;
        if (s_simple (ex, ex->ref, json_pack ("{s:s}", "op", "flush"), TRUSTED_S)
        ||  s_reference_sampled (ex, false, true, s_seed (ex->seed, "base", i, 0),
                                 s_seed (ex->seed, "base-poison", i, 0), &t))
            return -1;
        if (i >= eval->warmup) {
            base_us [ex->base_n++] = t * 1e6;
            if (worker_grade_stop_baseline (&rule, base_us, ex->base_n))
                break;
        }
    }
    ex->nover_base = ex->nover;
    //  The reference's kernels, from calls of their own (untimed).
    for (int i = 0; ex->gpu && i < PROFILED_CALLS; i++) {
        json_t *gpu = NULL;
        if (s_reference_call (ex, false, true, S_PROFILED, &gpu, NULL, NULL, NULL)) {
            json_decref (gpu);
            return -1;
        }
        s_add_kernels (ex->ref_kernels, gpu);
        json_decref (gpu);
    }
    return 0;
}

static int
s_correctness (s_exec_t *ex)
{
    for (size_t s = 0; s < ex->task->nsizes; s++) {
        if (s_size (ex, ex->ref, s) || s_size (ex, ex->cand, s))
            return -1;
        for (uint32_t t = 0; t < ex->job->eval.trials; t++) {
            uint64_t seed = s_seed (ex->seed, "check", s, t);
            char when [64];
            snprintf (when, sizeof when, "trial %u", t);
            if (s_inputs (ex, ex->ref, seed) || s_reference_call (ex, true, false, S_CHECKED, NULL, NULL, NULL, NULL)
            ||  s_inputs (ex, ex->cand, seed)
            ||  s_candidate_call (ex, seed, S_CHECKED, when, (uint32_t) s, t, NULL, 0))
                return -1;
        }
    }
    return 0;
}

//  R's call of a timed run on a GPU, which gives the expected outputs: timed
//  too, on inputs made in the same request, into memory poisoned as the
//  candidate's is just before its call: one more sample of R's overhead per
//  call, made in the same phase, the same way, as the candidate's calls it
//  is held against.
static int
s_reference_timed (s_exec_t *ex, uint64_t seed)
{
    double t;
    return s_reference_sampled (ex, true, false, seed, seed ^ 0xBEEFull, &t);
}

//  Stop C (SIGSTOP, seen stopped). 0, or -1 with the verdict set.
static int
s_cand_stop (s_exec_t *ex, const char *when)
{
    if (python_proc_stop (ex->cand) == 0)
        return 0;
    worker_outcome_fail (ex->out, STATUS_RUNTIME_ERROR, "the candidate's runner exited or could "
                         "not be stopped (%s)", when);
    return -1;
}

//  A request that does nothing, just before a program's timed call on
//  inputs handed over: each call then follows a request of its own program,
//  as when each made its inputs (R's would follow its sharing request in
//  half the runs and C's never, and R's process still in the core's caches).
static int
s_ping (s_exec_t *ex, python_proc_t *proc)
{
    return s_simple (ex, proc, json_pack ("{s:s}", "op", "flush"), proc == ex->cand? ex->job->eval.timeout_s: TRUSTED_S);
}

//  The same for C, stopped before and after.
static int
s_cand_ping (s_exec_t *ex, const char *when)
{
    python_proc_continue (ex->cand);
    return s_ping (ex, ex->cand) || s_cand_stop (ex, when);
}

//  R's part of a timed run on the CPU: its inputs (timed into *in_s), then
//  at once its call on them, into memory just poisoned (as C's is), timed
//  into *b_s: the baseline's sample, and the expected outputs. With a
//  "compile" baseline the timed call is the compiled model's (its outputs
//  beyond), and the eager model's call after it gives the expected ones.
//  With given, the inputs were made and shared (s_share_inputs): each call
//  runs on a copy of them written just before it.
static int
s_reference_cpu (s_exec_t *ex, uint64_t seed, bool given, double *in_s, double *b_s)
{
    if (!given && s_inputs_timed (ex, ex->ref, seed, in_s))
        return -1;
    if (given && s_ping (ex, ex->ref))
        return -1;
    //  Stopped and woken around the poisoning, as C is: the same before both calls.
    python_proc_stop (ex->ref);
    bool compiled = strcmp (ex->task->module.baseline, "compile") == 0;
    uint64_t from = compiled? (ex->expected_size + 4095) & ~(uint64_t) 4095: 0;
    s_poison_ref (ex, from, ((s_slots_end (ex) + 63) & ~(uint64_t) 63) + ex->in_span, seed ^ 0xBEEFull);
    uint64_t given_at = (ex->share_end + 4095) & ~(uint64_t) 4095;
    json_t *inputs = given? s_give_inputs (ex, ex->ref, given_at): NULL;
    python_proc_continue (ex->ref);
    if (given && !inputs)
        return s_fail_map (ex);
    int rc = s_reference_call (ex, !compiled, compiled, S_CHECKED, NULL, b_s, NULL, inputs);
    json_decref (inputs);
    if (rc || !compiled)
        return rc? -1: 0;
    //  The eager call, on the same inputs afresh (the compiled one may have written over them).
    inputs = given? s_give_inputs (ex, ex->ref, given_at): NULL;
    if (given && !inputs)
        return s_fail_map (ex);
    rc = s_reference_call (ex, true, false, S_CHECKED, NULL, NULL, NULL, inputs);
    json_decref (inputs);
    return rc? -1: 0;
}

//  One timed run on the CPU. Each program calls on the run's inputs (the
//  same bytes) at once, and nothing else comes between: the two calls meet
//  the same state of the caches, whoever goes first (base_first,
//  alternating by run: worker_grade_speedup_paired pairs the runs of each
//  order). C is stopped while R works (a thread of its spinning beside R,
//  on their CPU, would slow R's call, and R's inputs, where they are the
//  measure of C's) and until its call. The inputs are R's, handed over
//  (s_share_inputs); where they cannot be, each program makes its own, and
//  C is stopped from its inputs' reply to its call (nothing of it runs
//  while this side poisons its outputs' memory). When C goes first its
//  outputs are compared once R's exist, C stopped from its reply until
//  then. *t, *b: the two calls' times; *ref_in, *cand_in: the inputs'
//  (0 when handed over).
static int
s_timed_run_cpu (s_exec_t *ex, uint64_t seed, bool base_first, const char *when, uint32_t trial,
                 double *t, double *b, double *ref_in, double *cand_in)
{
    uint32_t ts = (uint32_t) ex->task->timing_size;
    if (s_cand_stop (ex, when))
        return -1;
    //  Tried until one run's cannot be (the same get_inputs: nor will the next's).
    if (!ex->unshared [0] && s_share_inputs (ex, seed)) {
        python_proc_continue (ex->cand);
        return -1;
    }
    bool given = ex->shared != NULL;
    ex->given_runs += given;
    bool inputs = s_copies_inputs (ex, S_TIMED) && ex->ref_in_at;
    if (base_first) {
        if (s_reference_cpu (ex, seed, given, ref_in, b)) {
            python_proc_continue (ex->cand);
            return -1;
        }
        if (given)
            return s_cand_ping (ex, when) || s_candidate_call (ex, seed, S_TIMED, when, ts, trial, t, S_RESUME | S_GIVEN);
        python_proc_continue (ex->cand);
        return s_inputs_timed (ex, ex->cand, seed, cand_in) || s_cand_stop (ex, when)
            || s_candidate_call (ex, seed, S_TIMED, when, ts, trial, t, S_RESUME);
    }
    //  The slots C writes to are R's of the last run (the same size).
    if (given) {
        if (s_cand_ping (ex, when) || s_candidate_call (ex, seed, S_TIMED, when, ts, trial, t, S_RESUME | S_DEFER | S_GIVEN))
            return -1;
    }
    else {
        python_proc_continue (ex->cand);
        if (s_inputs_timed (ex, ex->cand, seed, cand_in) || s_cand_stop (ex, when)
        ||  s_candidate_call (ex, seed, S_TIMED, when, ts, trial, t, S_RESUME | S_DEFER))
            return -1;
    }
    if (s_reference_cpu (ex, seed, given, ref_in, b)) {
        python_proc_continue (ex->cand);
        return -1;
    }
    return s_candidate_compare (ex, inputs, ts, trial, when);
}

//  The candidate's timed runs. On the CPU the baseline's are interleaved
//  with them, on the same inputs, the candidate stopped meanwhile: both
//  meet the same load (a host's load changes faster than a phase lasts).
//  On a GPU the baseline was timed before the candidate existed
//  (s_baseline): a GPU kernel left running is not stopped by a signal.
static int
s_timing (s_exec_t *ex, double *cand_us, double *base_us, uint32_t *runs)
{
    const common_eval_t *eval = &ex->job->eval;
    size_t ts = ex->task->timing_size;
    if (s_size (ex, ex->ref, ts) || s_size (ex, ex->cand, ts))
        return -1;
    //  On the CPU, both heaps faulted in for the calls ahead (the runner's
    //  op_warm): eight times what R's calls write at the largest size (its
    //  outputs twice, its inputs), 256 MiB and an eighth of a job's memory
    //  at most (a runner's cap is half of it). Else whichever program's
    //  heap has not settled yet pays a page fault per 4 KiB its call
    //  allocates: the reference's calls took 256 faults each (4.1 ms against
    //  the candidate's 1.3), and an unchanged ReLU read 4.7x.
    if (!ex->gpu) {
        uint64_t bytes = 8 * s_share_at (ex);
        if (bytes > WARM_MAX)
            bytes = WARM_MAX;
        if (bytes > ex->self->max_job_bytes / 8)
            bytes = ex->self->max_job_bytes / 8;
        if (s_simple (ex, ex->ref, json_pack ("{s:s, s:I}", "op", "warm", "bytes", (json_int_t) bytes), TRUSTED_S)
        ||  s_simple (ex, ex->cand, json_pack ("{s:s, s:I}", "op", "warm", "bytes", (json_int_t) bytes),
                      ex->job->eval.timeout_s))
            return -1;
    }
    //  Timed runs until the speedup is known well enough for the reward
    //  (worker_grade_stop), eval.timed at most.
    worker_grade_stop_t rule;
    worker_grade_stop_init (&rule, eval->timed, ex->job->reward.clip);
    worker_grade_stop_why_t why = GRADE_STOP_NONE;
    uint32_t n = 0;
    double *wall_us = calloc (eval->timed + 1, sizeof (double));
    double *in_us = calloc (3 * (eval->timed + 1), sizeof (double));
    double *added_us = in_us? in_us + eval->timed + 1: NULL;
    double *stop_us = in_us? in_us + 2 * (eval->timed + 1): NULL;
    if (!wall_us || !in_us) {
        free (wall_us);
        free (in_us);
        worker_outcome_fail (ex->out, STATUS_INTERNAL_ERROR, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; why == GRADE_STOP_NONE && i < eval->warmup + eval->timed; i++) {
        //  Not from the job's seed: a seed known beforehand (a task's fixed
        //  one) would let C make these inputs, and their outputs, at import.
        uint64_t seed = s_seed (ex->time_seed, "time", i, 0);
        char when [64];
        snprintf (when, sizeof when, "timed run %u", i);
        double t = 0, b = 0, ref_in = 0, cand_in = 0;
        //  Nothing of C's may run between the moment its inputs exist and
        //  its timed call, out of the clock's sight: on a GPU it makes them
        //  in the call's own request; on the CPU in a request of their own,
        //  just before, and it is stopped from that reply until its call
        //  (s_timed_run_cpu).
        if (!ex->gpu) {
            if (s_timed_run_cpu (ex, seed, i % 2 == 0, when, TASK_MAX_TRIALS + i, &t, &b, &ref_in, &cand_in)) {
                free (wall_us);
                free (in_us);
                return -1;
            }
            if (s_tracing ())       //  on the CPU: a line per timed run, as s_trace's per GPU call
                log_info ("python", "trace run %u (%s first): candidate %.1f us, baseline %.1f us; "
                          "inputs %.1f / %.1f us", i, i % 2 == 0? "baseline": "candidate", t * 1e6,
                          b * 1e6, cand_in * 1e6, ref_in * 1e6);
        }
        else
        if (s_reference_timed (ex, seed)
        ||  s_simple (ex, ex->ref, json_pack ("{s:s}", "op", "flush"), TRUSTED_S)
        ||  s_candidate_call (ex, seed, S_TIMED, when, (uint32_t) ts, TASK_MAX_TRIALS + i, &t, S_MAKE_INPUTS)) {
            free (wall_us);
            free (in_us);
            return -1;
        }
        double excess = s_inputs_excess (ex, ref_in, cand_in);
        ex->used_s += excess;
        t += excess;
        if (i >= eval->warmup) {
            in_us [n] = (cand_in - ref_in) * 1e6;
            added_us [n] = excess * 1e6;
            wall_us [n] = (ex->last_wall_s + excess) * 1e6;   //  less R's overhead below
            cand_us [n] = t * 1e6;
            //  On a GPU, timing stops early only when the wall clock knows
            //  the time as well as the reports do: a report of the same
            //  1 us every call is as precise as can be, and would stop the
            //  runs at the fewest, where s_wall_floor's noise is widest.
            stop_us [n] = ex->gpu? fmax (cand_us [n], wall_us [n] - ex->over_s * 1e6): cand_us [n];
            if (!ex->gpu)
                base_us [n] = b * 1e6;
            n++;
            //  On the CPU, run i's two calls are a pair (side by side, who
            //  goes first alternating): their ratios, not two medians apart.
            why = ex->gpu? worker_grade_stop_check_n (&rule, stop_us, n, base_us, ex->base_n)
                         : s_stop_cpu (&rule, cand_us, base_us, in_us, added_us, stop_us, n);
        }
    }
    ex->out->timing_stopped = worker_grade_stop_name (why);
    *runs = n;
    //  The wall clock's readings, less R's overhead as known at the end.
    for (uint32_t i = 0; i < n; i++)
        wall_us [i] -= ex->over_s * 1e6;
    s_inputs_floor (ex, cand_us, wall_us, in_us, added_us, n);
    ex->wall_factor = s_wall_floor (ex, cand_us, wall_us, n);
    free (wall_us);
    free (in_us);
    //  The candidate's kernels, from calls of their own at the timing size
    //  (untimed, checked like any other).
    for (uint32_t i = 0; ex->gpu && i < PROFILED_CALLS; i++) {
        uint64_t seed = s_seed (ex->time_seed, "profile", i, 0);
        char when [64];
        snprintf (when, sizeof when, "profiled run %u", i);
        if (s_inputs (ex, ex->ref, seed) || s_reference_call (ex, true, false, S_CHECKED, NULL, NULL, NULL, NULL)
        ||  s_inputs (ex, ex->cand, seed)
        ||  s_candidate_call (ex, seed, S_PROFILED, when, (uint32_t) ts, TASK_MAX_TRIALS + eval->warmup
                              + eval->timed + i, NULL, 0))
            return -1;
    }
    return 0;
}

//  A kernel of a library (ATen, cuBLAS, cuDNN, CUTLASS, cuFFT, inductor's
//  generated Triton), not one the candidate compiled itself.
static bool
s_library_kernel (const char *name)
{
    static const char *marks [] = {
        "at::", "at_cuda_detail", "c10::", "cublas", "cutlass", "cudnn", "xmma", "nvjet", "gemm",
        "gemv", "fft", "splitKreduce", "cub::", "thrust::", "elementwise_kernel", "reduce_kernel",
        "triton_poi_", "triton_red_", "triton_per_", "triton_tem_", "sm90_", "sm80_", "ampere_",
        "hopper_", "volta_", "turing_", NULL
    };
    for (int i = 0; marks [i]; i++)
        if (strstr (name, marks [i]))
            return true;
    return false;
}

//  The kernels' table and shares; the wrapper check. 0 or -1 (invalid).
static int
s_kernels (s_exec_t *ex, json_t *profile)
{
    double own_us = 0, lib_us = 0, triton_us = 0, cuda_us = 0;
    json_t *table = json_array ();
    const char *name;
    json_t *entry;
    json_object_foreach (ex->cand_kernels, name, entry) {
        double us = json_number_value (json_object_get (entry, "us"));
        bool library = s_library_kernel (name);
        if (library)
            lib_us += us;
        else {
            own_us += us;
            //  Triton kernels carry their Python name; C++ ones a signature.
            if (strchr (name, '(') || strncmp (name, "_Z", 2) == 0 || strstr (name, "void "))
                cuda_us += us;
            else
                triton_us += us;
        }
        json_array_append_new (table, json_pack ("{s:s, s:f, s:O, s:s}", "name", name, "total_us", us,
                                                 "launches", json_object_get (entry, "launches"),
                                                 "origin", library? "library": "own"));
    }
    double total = own_us + lib_us;
    size_t i;
    json_array_foreach (table, i, entry)
        json_object_set_new (entry, "share", json_real (total > 0? json_number_value (
                             json_object_get (entry, "total_us")) / total: 0));
    json_object_set_new (profile, "kernels", table);
    json_object_set_new (profile, "total_us", json_real (total));
    json_object_set_new (profile, "library_share", total > 0? json_real (lib_us / total): json_null ());
    //  The reference's kernels by share of its GPU time (its operators).
    double ref_total = 0;
    json_object_foreach (ex->ref_kernels, name, entry)
        ref_total += json_number_value (json_object_get (entry, "us"));
    json_t *ops = json_array ();
    json_object_foreach (ex->ref_kernels, name, entry)
        json_array_append_new (ops, json_pack ("{s:s, s:f, s:f}", "name", name, "total_us",
                               json_number_value (json_object_get (entry, "us")), "share",
                               ref_total > 0? json_number_value (json_object_get (entry, "us")) / ref_total: 0));
    json_object_set_new (profile, "reference", json_pack ("{s:o, s:f}", "operators", ops, "total_us", ref_total));

    const common_module_t *m = &ex->task->module;
    if (strcmp (m->kernel, "torch") == 0 || ex->out->status != STATUS_OK)
        return 0;
    if (total <= 0) {
        worker_outcome_fail (ex->out, STATUS_INVALID, "a wrapper, not a kernel: no GPU kernel of the "
                             "candidate's was recorded in its timed runs");
        return -1;
    }
    if (lib_us / total > m->library_share_max) {
        worker_outcome_fail (ex->out, STATUS_INVALID, "a wrapper, not a kernel: %.0f%% of the "
                             "candidate's GPU time is in library kernels (ATen, cuBLAS, cuDNN...), more "
                             "than the task allows (%.0f%%)", 100 * lib_us / total, 100 * m->library_share_max);
        return -1;
    }
    double want = strcmp (m->kernel, "triton") == 0? triton_us: strcmp (m->kernel, "cuda") == 0? cuda_us: own_us;
    if (want <= 0) {
        worker_outcome_fail (ex->out, STATUS_INVALID, "the task asks for %s kernels; none of the "
                             "candidate's kernels is one", m->kernel);
        return -1;
    }
    return 0;
}

//  What the candidate's load_inline calls did (its runner's word, so
//  information only): "extensions": {name: "kept" | "built"}, bounded.
static void
s_extensions (worker_outcome_t *out, json_t *said)
{
    if (!json_is_object (said) || json_object_size (said) == 0)
        return;
    json_t *extensions = json_object ();
    const char *name;
    json_t *how;
    json_object_foreach (said, name, how) {
        const char *word = json_string_value (how);
        if (json_object_size (extensions) >= 16 || strlen (name) > 64 || !word
        ||  (strcmp (word, "kept") != 0 && strcmp (word, "built") != 0))
            continue;
        json_object_set_new (extensions, name, json_string (word));
    }
    if (!out->extra)
        out->extra = json_object ();
    json_object_set_new (out->extra, "extensions", extensions);
}

static int
s_load (s_exec_t *ex, python_proc_t *proc)
{
    const common_module_t *m = &ex->task->module;
    json_t *req = json_pack ("{s:s, s:s, s:s, s:s}", "op", "load", "task", ex->task->reference.source,
                             "entry", m->entry, "candidate_entry", m->candidate_entry);
    if (m->dtype != DTYPE_INVALID)
        json_object_set_new (req, "dtype", json_string (common_dtype_name (m->dtype)));
    bool cand = proc == ex->cand;
    if (cand)
        json_object_set_new (req, "candidate", json_string (ex->job->candidate->source));
    double timeout = cand? fmax (ex->job->eval.compile_timeout_s, LOAD_MIN_S): TRUSTED_S;
    double t0 = common_now_s ();
    json_t *reply = NULL;
    int rc = s_ask (ex, proc, req, timeout, &reply, NULL);
    if (cand && rc == 0)
        s_extensions (ex->out, json_object_get (reply, "extensions"));
    json_decref (reply);
    if (cand) {
        ex->out->compile_s += common_now_s () - t0;
        if (rc && ex->out->status == STATUS_RUNTIME_ERROR)
            ex->out->status = STATUS_COMPILE_ERROR;       //  it did not import
        if (rc && ex->out->status == STATUS_TIMEOUT)
            worker_outcome_fail (ex->out, STATUS_COMPILE_ERROR, "the candidate's module did not "
                                 "import (and build) within %.3g s", timeout);
    }
    return rc;
}

static python_proc_t *
s_start_for (python_backend_t *self, const char *target, const char *role, char *err, size_t errlen)
{
    bool gpu = strcmp (target, "cpu") != 0;
    sandbox_config_t sandbox;
    sandbox_config_default (&sandbox);
    //  torch maps far more address space than it uses (CUDA: all device
    //  memory too): the memory cgroup is the cap that means something.
    sandbox.mem_bytes = gpu? self->max_job_bytes: self->max_job_bytes / 2;
    sandbox.max_pids = 512;
    sandbox.cpu_s = 3600;
    python_proc_config_t cfg = {
        .python = self->python, .script = self->script, .role = role,
        .device = target, .gpu = self->cfg.device, .sandbox = &sandbox, .dir = NULL
    };
    return python_proc_new (&cfg, err, errlen);
}

static python_proc_t *
s_start (s_exec_t *ex, const char *role, char *err, size_t errlen)
{
    return s_start_for (ex->self, ex->target, role, err, errlen);
}

//  A runner's hello. One started ahead (spared) that died meanwhile is
//  started again, once.
static json_t *
s_hello (s_exec_t *ex, python_proc_t **proc, bool *spared, const char *role, char *err, size_t errlen)
{
    double t0 = common_now_s ();
    json_t *hello = python_proc_hello (*proc, HELLO_S, err, errlen);
    if (!hello && *spared) {
        *spared = false;
        log_warn ("python", "the %s runner started ahead is gone (%s); starting another", role, err);
        python_proc_destroy (proc);
        *proc = s_start (ex, role, err, errlen);
        hello = *proc? python_proc_hello (*proc, HELLO_S, err, errlen): NULL;
    }
    log_debug ("python", "%s hello: %.3f ms%s", role, (common_now_s () - t0) * 1e3,
               *spared? " (started ahead)": "");
    return hello;
}

static void
s_spare_drop (s_spare_t *spare)
{
    python_proc_destroy (&spare->ref);
    python_proc_destroy (&spare->cand);
}

static void *
s_spawner (void *arg)
{
    python_backend_t *self = arg;
    pthread_mutex_lock (&self->spawn_lock);
    //  A request taken in is always answered, quitting or not: its asker waits.
    while (!self->spawn_quit || self->spawn_req) {
        s_spawn_req_t *req = self->spawn_req;
        if (!req) {
            pthread_cond_wait (&self->spawn_cond, &self->spawn_lock);
            continue;
        }
        self->spawn_req = NULL;
        pthread_mutex_unlock (&self->spawn_lock);
        char err [512] = "";
        s_spare_t *spare = req->spare;
        spare->ref = s_start_for (self, req->target, "reference", err, sizeof err);
        spare->cand = spare->ref? s_start_for (self, req->target, "candidate", err, sizeof err): NULL;
        snprintf (spare->target, sizeof spare->target, "%s", req->target);
        if (!spare->cand) {
            log_warn ("python", "cannot start runners ahead: %s", err);
            s_spare_drop (spare);
        }
        pthread_mutex_lock (&self->spawn_lock);
        req->done = true;
        pthread_cond_broadcast (&self->spawn_cond);
    }
    pthread_mutex_unlock (&self->spawn_lock);
    return NULL;
}

//  Start the slot's runners for its next job (the spawner's thread spawns
//  them; spawning takes milliseconds, their imports go on meanwhile); they
//  set up the device when s_spare_go says.
static void
s_spare_start (s_exec_t *ex, s_spare_t *spare)
{
    python_backend_t *self = ex->self;
    s_spare_drop (spare);
    if (!self->spawner_up)
        return;
    s_spawn_req_t req = { .spare = spare, .target = ex->target, .done = false };
    pthread_mutex_lock (&self->spawn_lock);
    while (self->spawn_req && !self->spawn_quit)
        pthread_cond_wait (&self->spawn_cond, &self->spawn_lock);
    if (!self->spawn_quit) {
        self->spawn_req = &req;
        pthread_cond_broadcast (&self->spawn_cond);
        while (!req.done)
            pthread_cond_wait (&self->spawn_cond, &self->spawn_lock);
    }
    pthread_mutex_unlock (&self->spawn_lock);
}

static void
s_spare_go (s_spare_t *spare)
{
    if (spare->ref)
        python_proc_go (spare->ref);
    if (spare->cand)
        python_proc_go (spare->cand);
}

//  Before timed runs: runners told to set up the GPU are done with it
//  (nothing of theirs runs beside the candidate's timed calls); those that
//  could not are dropped.
static void
s_spare_ready (s_spare_t *spare)
{
    char err [512];
    if (!spare->ref || !spare->cand)
        return;
    if (!python_proc_hello (spare->ref, HELLO_S, err, sizeof err)
    ||  !python_proc_hello (spare->cand, HELLO_S, err, sizeof err)) {
        log_warn ("python", "runners started ahead failed: %s", err);
        s_spare_drop (spare);
    }
}

//  The device a job ran on, as its reference's interpreter saw it:
//  "NVIDIA H200 (python 3.12.3, torch 2.11.0)".
static void
s_device_words (s_exec_t *ex, json_t *hello, char *buf, size_t len)
{
    const char *gpu = json_string_value (json_object_get (hello, "gpu"));
    const char *python = json_string_value (json_object_get (hello, "python"));
    const char *torch = json_string_value (json_object_get (hello, "torch"));
    snprintf (buf, len, "%s (python %s, torch %s)", ex->gpu && gpu? gpu: "cpu",
              python? python: "?", torch? torch: "?");
}

//  --- the backend ---

//  Threads a GPU job's comparisons use: half the host's cores, 8 at most
//  (a pass over 32 M floats is memory-bound beyond that).
static unsigned
s_compare_threads (void)
{
    long cpus = sysconf (_SC_NPROCESSORS_ONLN);
    long n = cpus / 2;
    return n < 1? 1: n > 8? 8: (unsigned) n;
}

static void
s_execute_locked (python_backend_t *self, python_job_t *pjob, int slot, worker_outcome_t *out)
{
    s_exec_t ex;
    memset (&ex, 0, sizeof ex);
    ex.self = self;
    ex.job = pjob->job;
    ex.task = pjob->job->task;
    ex.out = out;
    ex.seed = pjob->seed;
    ex.cpu = -1;
    randombytes_buf (&ex.time_seed, sizeof ex.time_seed);
    ex.target = ex.task->backend;
    ex.gpu = strcmp (ex.target, "cpu") != 0;
    ex.cand_kernels = json_object ();
    ex.ref_kernels = json_object ();
    worker_grade_tolerance (ex.task, &ex.tol);
    //  A GPU job's outputs (hundreds of MB) are compared while the GPU
    //  waits, with the candidate stopped: on some of the host's cores.
    //  A CPU job's on one (the cores are other jobs' timed runs').
    ex.tol.threads = ex.gpu? s_compare_threads (): 1;
    const common_eval_t *eval = &ex.job->eval;
    double *base_us = calloc (eval->timed + 1, sizeof (double));
    double *cand_us = calloc (eval->timed + 1, sizeof (double));
    char err [512] = "";
    //  The runners the slot started ahead, else two now (their interpreters
    //  import torch side by side); told to set up the device either way.
    s_spare_t *spare = &self->spares [ex.gpu? SLOTS: slot];
    bool spared = spare->ref && spare->cand && strcmp (spare->target, ex.target) == 0;
    if (spared) {
        ex.ref = spare->ref;
        ex.cand = spare->cand;
        spare->ref = spare->cand = NULL;
    }
    s_spare_drop (spare);
    if (!spared) {
        ex.ref = s_start (&ex, "reference", err, sizeof err);
        ex.cand = ex.ref? s_start (&ex, "candidate", err, sizeof err): NULL;
    }
    if (ex.ref)
        python_proc_go (ex.ref);
    if (ex.cand)
        python_proc_go (ex.cand);
    if (!ex.ref || !ex.cand || !base_us || !cand_us) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "cannot start the Python runners: %s", err);
        goto done;
    }
    bool ref_ahead = spared, cand_ahead = spared;
    json_t *hello_ref = s_hello (&ex, &ex.ref, &ref_ahead, "reference", err, sizeof err);
    if (!hello_ref) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "%s", err);
        goto done;
    }
    snprintf (out->sandbox, sizeof out->sandbox, "%s", python_proc_caps (ex.cand));
    s_device_words (&ex, hello_ref, out->device, sizeof out->device);
    out->baseline_kind = strcmp (ex.task->module.baseline, "compile") == 0? "compile": "reference";
    bool timing = !eval->check_sizes_only;
    //  The candidate's interpreter has imported torch and waits (idle) before
    //  the baseline is timed: its start-up never slows the baseline.
    json_t *hello = s_hello (&ex, &ex.cand, &cand_ahead, "candidate", err, sizeof err);
    if (!hello) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "%s", err);
        goto done;
    }
    s_learn (self, ex.gpu, hello);
    if (!out->extra)
        out->extra = json_object ();
    json_object_set_new (out->extra, "runners_ahead", json_boolean (ref_ahead && cand_ahead));
    //  On the CPU both runners share one core (worker_backend_slot_cpu).
    //  They never compute at once: the candidate is stopped during the
    //  baseline's calls, the reference waits during the candidate's.
    if (!ex.gpu) {
        int cpu = worker_backend_slot_cpu (slot);
        if (cpu >= 0 && python_proc_pin (ex.ref, cpu) == 0 && python_proc_pin (ex.cand, cpu) == 0)
            ex.cpu = cpu;
        else
            log_debug ("python", "runners not pinned to one CPU (%d): each where the host puts it", cpu);
    }
    //  A GPU's next runners import torch now, on the host's other cores;
    //  they touch the GPU only after this job's timed runs.
    if (self->prewarm && ex.gpu)
        s_spare_start (&ex, spare);
    if (s_load (&ex, ex.ref) || (timing && ex.gpu && s_baseline (&ex, base_us)))
        goto done;
    //  Between the baseline's timed runs and the candidate's, the next
    //  runners set up the GPU (while the candidate imports and is checked).
    s_spare_go (spare);
    char key [2 * COMMON_HASH_BYTES + 1];
    s_build_key (&ex, hello, key);
    snprintf (out->cache_key, sizeof out->cache_key, "%s", key);
    out->cache_hit [0] = s_build_restore (&ex, key);
    if (s_load (&ex, ex.cand))
        goto done;
    if (!out->cache_hit [0])
        s_build_keep (self, python_proc_dir (ex.cand), key);
    uint32_t runs = 0;
    if (s_correctness (&ex))
        goto done;
    if (timing) {
        s_spare_ready (spare);
        if (s_timing (&ex, cand_us, base_us, &runs))
            goto done;
    }
    if (timing) {
        //  A GPU's baseline was timed beforehand (base_n runs); the CPU's beside each run.
        //  The CPU's are pairs: their ratios (worker_grade_speedup_paired).
        uint32_t base_n = ex.gpu? ex.base_n: runs;
        out->speedup = ex.gpu? worker_grade_speedup (cand_us, runs, base_us, base_n,
                                                     &out->speedup_lo, &out->speedup_hi)
                             : worker_grade_speedup_paired (cand_us, base_us, runs,
                                                            &out->speedup_lo, &out->speedup_hi);
        worker_grade_timing (&out->candidate, cand_us, runs);
        worker_grade_timing (&out->baseline, base_us, base_n);
    }
    json_t *profile = json_pack ("{s:b, s:s, s:s, s:s}", "available", ex.gpu, "backend", "python",
                                 "device", ex.target, "measured", ex.gpu
                                 ? "each timed call's GPU time (CUDA events around forward), checked "
                                   "against the supervisor's wall clock call by call and over all "
                                   "the timed runs; kernels from untimed profiled calls"
                                 : "the supervisor's wall clock around each call (the baseline's "
                                   "the same way)");
    json_object_set_new (profile, "timing_fallbacks", json_integer (ex.fallbacks));
    if (ex.cpu >= 0)
        json_object_set_new (profile, "cpu", json_integer (ex.cpu));
    if (ex.fallbacks)
        json_object_set_new (profile, "timing_fallback_why", json_string (ex.fallback_why));
    if (ex.gpu) {
        json_object_set_new (profile, "call_overhead_us", json_real (ex.over_s * 1e6));
        json_object_set_new (profile, "call_overhead_dev_us", json_real (ex.over_dev_s * 1e6));
        json_object_set_new (profile, "wall_factor", json_real (ex.wall_factor));
        //  What the clocks said, apart: R's overhead before C existed and
        //  beside C's timed runs, and C's own calls' (wall less reported).
        double v [OVER_MAX];
        memcpy (v, ex.over, ex.nover_base * sizeof (double));
        json_object_set_new (profile, "call_overhead_baseline_us", json_real (s_median (v, ex.nover_base) * 1e6));
        memcpy (v, ex.over + ex.nover_base, (ex.nover - ex.nover_base) * sizeof (double));
        json_object_set_new (profile, "call_overhead_timed_us",
                             json_real (s_median (v, ex.nover - ex.nover_base) * 1e6));
        memcpy (v, ex.gap, ex.ngap * sizeof (double));
        json_object_set_new (profile, "candidate_overhead_us", json_real (s_median (v, ex.ngap) * 1e6));
    }
    if (timing)
        json_object_set_new (profile, "inputs_excess_us", json_real (ex.inputs_excess_us));
    if (timing && !ex.gpu) {
        json_object_set_new (profile, "inputs_given", json_integer (ex.given_runs));
        if (ex.unshared [0])
            json_object_set_new (profile, "inputs_not_given", json_string (ex.unshared));
    }
    if (ex.gpu && timing)
        s_kernels (&ex, profile);
    if (!out->extra)
        out->extra = json_object ();
    json_object_set_new (out->extra, "profile", profile);
done:
    python_proc_destroy (&ex.cand);
    python_proc_destroy (&ex.ref);
    //  A CPU slot's next runners start when nothing of its job runs (they
    //  would compete with its timed runs for the cores).
    if (self->prewarm && !ex.gpu && !spare->ref)
        s_spare_start (&ex, spare);
    s_spare_go (spare);
    free (base_us);
    free (cand_us);
    json_decref (ex.cand_kernels);
    json_decref (ex.shared);
    json_decref (ex.ref_kernels);
}

static void *
s_create (const worker_eval_config_t *cfg, worker_cache_t *cache, char *err, size_t errlen)
{
    (void) cache;
    python_backend_t *self = calloc (1, sizeof *self);
    if (!self) {
        common_seterr (err, errlen, "out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    //  KGYM_PYTHON_PREWARM=0: no runners started ahead (a one-shot run).
    const char *prewarm = getenv ("KGYM_PYTHON_PREWARM");
    self->prewarm = !prewarm || strcmp (prewarm, "0") != 0;
    const char *prebuild = getenv ("KGYM_PYTHON_PREBUILD");
    self->prebuild = !prebuild || strcmp (prebuild, "0") != 0;
    const char *builds_max = getenv ("KGYM_PYTHON_BUILDS_MAX");
    self->builds_max = builds_max && *builds_max? strtoull (builds_max, NULL, 10): BUILDS_MAX_BYTES;
    pthread_mutex_init (&self->trim, NULL);
    pthread_mutex_init (&self->gpu, NULL);
    pthread_mutex_init (&self->spawn_lock, NULL);
    pthread_cond_init (&self->spawn_cond, NULL);
    const char *python = cfg->python? cfg->python: getenv ("KGYM_PYTHON");
    snprintf (self->python, sizeof self->python, "%s", python && *python? python: "/usr/bin/python3");
    s_find_script (self->script, sizeof self->script);
    if (self->python [0] != '/' || access (self->python, X_OK) != 0) {
        common_seterr (err, errlen, "the python backend needs an interpreter with torch: '%s' is not "
                       "one (--python PATH)", self->python);
        goto fail;
    }
    if (!self->script [0]) {
        common_seterr (err, errlen, "kgym_pyrunner.py not found (set KGYM_PYRUNNER)");
        goto fail;
    }
    self->max_job_bytes = worker_backend_job_bytes (cfg, 1);
    snprintf (self->device, sizeof self->device, "%s (python %s)",
              cfg->backend && strcmp (cfg->backend, "cpu") != 0? "GPU": "cpu", self->python);
    snprintf (self->caps, sizeof self->caps, "%s", sandbox_host_caps ());
    pthread_mutex_init (&self->lock, NULL);
    //  The build cache: beside the compile cache, private to this user.
    char *place = worker_cache_default_path (cfg->cache_path);
    char *slash = place? strrchr (place, '/'): NULL;
    if (slash) {
        *slash = 0;
        snprintf (self->builds, sizeof self->builds, "%s/pybuild", place);
        if (mkdir (self->builds, 0700) != 0 && errno != EEXIST)
            self->builds [0] = 0;
    }
    free (place);
    self->spawner_up = self->prewarm && pthread_create (&self->spawner, NULL, s_spawner, self) == 0;
    int swept = python_proc_sweep ();
    if (swept)
        log_info ("python", "removed %d runner directories that workers gone before left", swept);
    return self;
fail:
    pthread_cond_destroy (&self->spawn_cond);
    pthread_mutex_destroy (&self->spawn_lock);
    pthread_mutex_destroy (&self->gpu);
    free (self);
    return NULL;
}

static void
s_destroy (void **self_p)
{
    python_backend_t *self = *self_p;
    if (!self)
        return;
    if (self->spawner_up) {
        pthread_mutex_lock (&self->spawn_lock);
        self->spawn_quit = true;
        pthread_cond_broadcast (&self->spawn_cond);
        pthread_mutex_unlock (&self->spawn_lock);
        pthread_join (self->spawner, NULL);
    }
    for (int i = 0; i <= SLOTS; i++)
        s_spare_drop (&self->spares [i]);
    pthread_cond_destroy (&self->spawn_cond);
    pthread_mutex_destroy (&self->spawn_lock);
    pthread_mutex_destroy (&self->gpu);
    pthread_mutex_destroy (&self->lock);
    pthread_mutex_destroy (&self->trim);
    free (self);
    *self_p = NULL;
}

//  Build ahead (the worker's compile pool calls prepare before the job may
//  take its GPU, beside other jobs' runs): a candidate that builds an
//  extension (load_inline, cpp_extension) has its module imported by a
//  builder, a runner with no GPU in its view and the GPU's architectures
//  named, and what it built is kept under the job's key; the job's
//  candidate then finds the build done (cache.candidate). The builder's
//  outcome is never a verdict: whatever failed there (a module that needs
//  a GPU at import, a broken build) is met again, and judged, in the job's
//  own runner. Needs what a candidate runner of the target said before (the
//  key's versions, the architectures): from a target's second job on.
static void
s_prebuild (python_backend_t *self, const common_job_t *job, worker_outcome_t *out)
{
    const char *source = job->candidate->source;
    const char *target = job->task->backend;
    bool gpu = strcmp (target, "cpu") != 0;
    if (!self->prebuild || !self->builds [0] || !source
    ||  (!strstr (source, "load_inline") && !strstr (source, "cpp_extension")))
        return;
    s_known_t known;
    pthread_mutex_lock (&self->lock);
    known = self->known [gpu];
    pthread_mutex_unlock (&self->lock);
    if (!known.set)
        return;
    char key [2 * COMMON_HASH_BYTES + 1];
    s_build_key_of (self, target, known.torch, known.triton, known.gpu, source, key);
    if (!key [0] || s_build_kept (self, key))
        return;
    double t0 = common_now_s ();
    sandbox_config_t sandbox;
    sandbox_config_default (&sandbox);
    sandbox.mem_bytes = self->max_job_bytes / 2;
    sandbox.max_pids = 512;
    sandbox.cpu_s = 3600;
    python_proc_config_t cfg = {
        .python = self->python, .script = self->script, .role = "builder", .device = "cpu",
        .gpu = self->cfg.device, .arch = gpu && known.arch [0]? known.arch: NULL, .sandbox = &sandbox
    };
    char err [512] = "";
    python_proc_t *builder = python_proc_new (&cfg, err, sizeof err);
    json_t *reply = NULL;
    int rc = -1;
    bool ready = builder && python_proc_hello (builder, HELLO_S, err, sizeof err);
    //  It may run beside other jobs' timed runs: only on time they leave.
    if (ready && python_proc_idle (builder) != 0) {
        snprintf (err, sizeof err, "cannot lower its priority: %s", strerror (errno));
        ready = false;
    }
    if (ready) {
        json_t *req = json_pack ("{s:s, s:s}", "op", "build", "candidate", source);
        rc = python_proc_request (builder, req, fmax (job->eval.compile_timeout_s, LOAD_MIN_S), &reply,
                                  NULL, err, sizeof err);
        json_decref (req);
    }
    const char *problem = rc? err: json_string_value (json_object_get (reply, "error"));
    if (builder)
        s_build_keep (self, python_proc_dir (builder), key);
    bool built = s_build_kept (self, key);
    log_debug ("python", "built %.12s ahead in %.3f s: %s%s%s", key, common_now_s () - t0,
               built? "kept": "nothing kept", problem? "; the builder said: ": "", problem? problem: "");
    json_decref (reply);
    python_proc_destroy (&builder);
    if (!out->extra)
        out->extra = json_object ();
    json_object_set_new (out->extra, "built_ahead", json_boolean (built));
    out->compile_s += common_now_s () - t0;
}

static void *
s_prepare (void *state, const common_job_t *job, uint64_t seed, worker_outcome_t *out)
{
    python_backend_t *self = state;
    if (!job->task->is_module) {
        worker_outcome_fail (out, STATUS_INVALID, "the python backend grades module tasks only");
        return NULL;
    }
    python_job_t *pjob = calloc (1, sizeof *pjob);
    if (!pjob) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    pjob->job = job;
    pjob->seed = seed;
    s_prebuild (self, job, out);
    return pjob;
}

static void
s_execute (void *state, void **job_p, worker_outcome_t *out)
{
    python_backend_t *self = state;
    python_job_t *pjob = *job_p;
    *job_p = NULL;
    double t0 = common_now_s (), compiled = out->compile_s;     //  the builder's, in prepare
    bool gpu = strcmp (pjob->job->task->backend, "cpu") != 0;
    int slot = 0;
    if (gpu)
        pthread_mutex_lock (&self->gpu);
    else {
        //  A slot of its own: the candidate's directory is the slot's.
        pthread_mutex_lock (&self->lock);
        while (slot < SLOTS - 1 && (self->slots_busy & (1ull << slot)))
            slot++;
        self->slots_busy |= 1ull << slot;
        pthread_mutex_unlock (&self->lock);
    }
    s_execute_locked (self, pjob, slot, out);
    if (gpu)
        pthread_mutex_unlock (&self->gpu);
    else {
        pthread_mutex_lock (&self->lock);
        self->slots_busy &= ~(1ull << slot);
        pthread_mutex_unlock (&self->lock);
    }
    out->seed = pjob->seed;
    out->run_s = common_now_s () - t0 - (out->compile_s - compiled);
    free (pjob);
}

static void
s_job_destroy (void **job_p)
{
    free (*job_p);
    *job_p = NULL;
}

static const char *
s_device (void *state)
{
    return ((python_backend_t *) state)->device;
}

static const char *
s_caps (void *state)
{
    return ((python_backend_t *) state)->caps;
}

static uint32_t
s_default_slots (const worker_eval_config_t *cfg)
{
    //  A GPU grades one job at a time; the CPU one per two cores (two processes a job).
    if (cfg && cfg->backend && strcmp (cfg->backend, "cpu") != 0)
        return 1;
    long cpus = sysconf (_SC_NPROCESSORS_ONLN);
    return cpus > 3? (uint32_t) (cpus / 2): 1;
}

//  Without creating the backend: does the default interpreter ($KGYM_PYTHON,
//  else /usr/bin/python3) import torch? (kgym demo asks before grading the
//  PyTorch pool.) A trusted interpreter with fixed arguments: no sandbox.
static int
s_probe (int device, char *desc, size_t desclen, char *err, size_t errlen)
{
    (void) device;
    const char *python = getenv ("KGYM_PYTHON");
    if (!python || !*python)
        python = "/usr/bin/python3";
    if (access (python, X_OK) != 0) {
        common_seterr (err, errlen, "no Python interpreter at %s", python);
        return 1;
    }
    char command [4200];
    snprintf (command, sizeof command, "timeout 120 '%s' -I -c 'import torch; print(torch.__version__)' 2>/dev/null",
              python);
    FILE *pipe = popen (command, "r");
    char version [64] = "";
    if (pipe && !fgets (version, sizeof version, pipe))
        version [0] = 0;
    int status = pipe? pclose (pipe): -1;
    version [strcspn (version, "\n")] = 0;
    if (status != 0 || !version [0]) {
        common_seterr (err, errlen, "%s cannot import torch", python);
        return 1;
    }
    snprintf (desc, desclen, "%s (torch %s)", python, version);
    return 0;
}

const worker_backend_t python_backend = {
    .info = { .name = "python", .targets = { "cpu", "cuda" }, .langs = { "python" }, .modules = true },
    .summary = "PyTorch-reference tasks: Python candidates (Triton, load_inline, torch) in sandboxed interpreters",
    .device_ordinal = false,
    .default_slots = s_default_slots,
    .create = s_create,
    .destroy = s_destroy,
    .prepare = s_prepare,
    .execute = s_execute,
    .job_destroy = s_job_destroy,
    .device = s_device,
    .device_uuid = NULL,
    .caps = s_caps,
    .quarantined = NULL,
    .probe = s_probe,
    .compile = NULL,
};
