/*  cuda_backend - the CUDA backend, supervisor side (in the worker process).  */
#include "common_util.h"
#include "worker_grade.h"
#include "cuda_backend.h"
#include "cuda_kernels.h"
#include "cuda_msg.h"
#include "cuda_plan.h"
#include "sandbox.h"
#include "cuda_nvrtc.h"
#include "worker_host.h"
#include "common_log.h"
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HELLO_TIMEOUT   60.0            //  cuInit can take seconds on a cold machine
#define INIT_TIMEOUT    60.0
#define HEAP_BYTES      (64u << 20)     //  candidate's device malloc heap
#define RUNNER_PIDS     256             //  pids.max counts CUDA's threads too
#define DEFAULT_HOST_MEM (4ull << 30)

struct cuda_backend_t {
    int device;                 //  CUDA ordinal
    uint64_t max_tensor_bytes;  //  per-size cap on tensors + workspace
    uint64_t host_mem;          //  runner cgroup memory.max
    bool fresh_runner;          //  a new runner per job
    bool reload;                //  trusted modules reloaded after every candidate run
    worker_cache_t *cache;      //  borrowed, may be NULL
    //  learnt from the first runner (immutable afterwards)
    char arch [16];             //  "sm_90"
    char device_text [512];     //  "NVIDIA H200 (sm_90, 0000:1B:00.0)"
    char uuid [48];             //  "GPU-..." ("" when the driver would not say)
    uint64_t mem_total;         //  device memory
    uint8_t *internal;          //  cubin of cuda_kernels_source
    size_t internal_size;       //  its bytes
    //  the runner (guarded by lock)
    pthread_mutex_t lock;       //  execute and runner lifecycle
    sandbox_t *runner;          //  current runner, NULL when none
    bool ready;                 //  HELLO read and INIT acknowledged
    double spawned_at;          //  when the current runner was spawned
    char caps [512];            //  sandbox caps of the current runner (JSON)
    cuda_backend_stats_t stats;  //  counters
    //  health: after a kernel fault the next runner grades a known-good job first
    bool check_pending;         //  a fault happened since the last check
    bool quarantined;           //  the GPU failed the check: no more jobs
    char quarantine_reason [256];   //  why
    common_job_t *health_job;   //  the known-good job, parsed once
    void (*on_quarantine) (void *arg, const char *reason);
    void *on_quarantine_arg;
};

//  The known-good job: y = 2x over 1 Mi floats, candidate and reference alike.
static const char *s_health_job_json =
    "{\"task\": {\"name\": \"kgym_health\", \"backend\": \"cuda\","
    " \"args\": [{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [\"N\"]},"
    "  {\"name\": \"y\", \"kind\": \"output\", \"dtype\": \"f32\", \"shape\": [\"N\"]},"
    "  {\"name\": \"N\", \"kind\": \"scalar\", \"dtype\": \"i32\", \"value\": \"N\"}],"
    " \"sizes\": [{\"N\": 1048576}], \"tolerance\": {\"atol\": 0, \"rtol\": 0},"
    " \"reference\": {\"source\": \"extern \\\"C\\\" __global__ void r(const float *x, float *y, int n)"
    " { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * x[i]; }\","
    "  \"launches\": [{\"kernel\": \"r\", \"grid\": [\"cdiv(N,256)\"], \"block\": [256]}]}},"
    " \"candidate\": {\"source\": \"extern \\\"C\\\" __global__ void c(const float *x, float *y, int n)"
    " { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] + x[i]; }\","
    "  \"launches\": [{\"kernel\": \"c\", \"grid\": [\"cdiv(N,256)\"], \"block\": [256]}]},"
    " \"eval\": {\"trials\": 2, \"check_only\": true, \"profile\": false, \"timeout\": 20, \"seed\": 7}}";

struct cuda_backend_job_t {
    const common_job_t *job;    //  borrowed
    cuda_plan_t *plan;          //  evaluated job
    cuda_nvrtc_result_t mods [CUDA_PLAN_PROGS];   //  images
    double timeout_s;           //  supervisor's wait for the result
};


//  --- runner lifecycle (lock held) ---

static void
s_runner_stop (cuda_backend_t *self)
{
    sandbox_destroy (&self->runner);
    self->ready = false;
    self->stats.runner_pid = 0;
}

//  Start a confined runner (sandbox.h, kind cuda: its own cgroup where the
//  host allows one) and let the sandbox check its confinement; its HELLO is
//  read later, so the cuInit overlaps whatever comes next.
static sandbox_t *
s_runner_start (int device, uint64_t host_mem, char *err, size_t errlen)
{
    sandbox_config_t cfg;
    sandbox_config_default (&cfg);
    cfg.kind = SANDBOX_CUDA;
    cfg.mem_bytes = host_mem;
    cfg.max_pids = RUNNER_PIDS;
    cfg.cpu_s = SANDBOX_NO_LIMIT;
    char dev [16];
    snprintf (dev, sizeof dev, "%d", device);
    char *args [] = { "--serve", "--device", dev, NULL };
    sandbox_spawn_t what = { .args = args, .object_fd = -1, .out_fd = -1 };
    sandbox_t *runner = sandbox_new (&cfg, err, errlen);
    if (!runner || sandbox_spawn (runner, &what, err, errlen) || sandbox_confirm (runner, HELLO_TIMEOUT, err, errlen))
        sandbox_destroy (&runner);
    return runner;
}

static int
s_runner_spawn (cuda_backend_t *self, char *err, size_t errlen)
{
    s_runner_stop (self);
    self->spawned_at = cuda_now ();
    self->runner = s_runner_start (self->device, self->host_mem, err, errlen);
    if (!self->runner)
        return -1;
    self->stats.runner_starts++;
    self->stats.runner_pid = sandbox_pid (self->runner);
    return 0;
}

//  Read HELLO. 0 with *hello (new reference), 1 no device, -1 failure.
static int
s_read_hello (sandbox_t *runner, json_t **hello, char *err, size_t errlen)
{
    *hello = NULL;
    cuda_msg_t msg;
    char why [256];
    int rc = cuda_msg_recv (sandbox_channel (runner), &msg, HELLO_TIMEOUT, why, sizeof why);
    if (rc != 0) {
        char what [160] = "still running";
        if (sandbox_wait (runner, 0.2) == 0)
            sandbox_describe (runner, what, sizeof what);
        common_seterr (err, errlen, "kgym-cuda-runner did not say hello: %s (%s)", why, what);
        return -1;
    }
    json_error_t jerr;
    json_t *json = msg.type == CUDA_MSG_HELLO? json_loads ((const char *) msg.part [0], 0, &jerr): NULL;
    cuda_msg_free (&msg);
    if (!json) {
        common_seterr (err, errlen, "kgym-cuda-runner sent a malformed hello");
        return -1;
    }
    const char *error = json_string_value (json_object_get (json, "error"));
    if (error) {
        bool no_device = json_is_true (json_object_get (json, "no_device"));
        if (strncmp (error, "no device: ", 11) == 0)
            error += 11;
        common_seterr (err, errlen, "%s%s", no_device? "no CUDA device: ": "kgym-cuda-runner: ", error);
        json_decref (json);
        return no_device? 1: -1;
    }
    *hello = json;
    return 0;
}

//  Read the current runner's HELLO: caps and start figures into self.
//  0 with *hello (new reference), 1 no device, -1 failure (runner stopped).
static int
s_take_hello (cuda_backend_t *self, json_t **hello, char *err, size_t errlen)
{
    int rc = s_read_hello (self->runner, hello, err, errlen);
    if (rc != 0) {
        s_runner_stop (self);
        return rc;
    }
    self->stats.cuinit_s = json_number_value (json_object_get (*hello, "cuinit_s"));
    //  The supervisor's own view (sandbox_caps), after cuInit: with the
    //  address-space limit the runner set itself when it has no cgroup.
    sandbox_caps_refresh (self->runner);
    snprintf (self->caps, sizeof self->caps, "%s", sandbox_caps (self->runner));
    return 0;
}

//  INIT: the runner makes its contexts and loads our kernels.
static int
s_send_init (cuda_backend_t *self, char *err, size_t errlen)
{
    const void *blobs [1] = { self->internal };
    size_t sizes [1] = { self->internal_size };
    cuda_msg_t msg;
    char why [256] = "";
    int fd = sandbox_channel (self->runner);
    if (cuda_msg_send_text (fd, CUDA_MSG_INIT, "{}", 1, blobs, sizes)
    ||  cuda_msg_recv (fd, &msg, INIT_TIMEOUT, why, sizeof why) != 0) {
        common_seterr (err, errlen, "kgym-cuda-runner INIT failed: %s", why [0]? why: "send failed");
        s_runner_stop (self);
        return -1;
    }
    json_error_t jerr;
    json_t *reply = json_loads ((const char *) msg.part [0], 0, &jerr);
    cuda_msg_free (&msg);
    const char *status = json_string_value (json_object_get (reply, "status"));
    if (!status || strcmp (status, "ok") != 0) {
        const char *m = json_string_value (json_object_get (reply, "message"));
        common_seterr (err, errlen, "kgym-cuda-runner INIT: %s", m? m: "malformed reply");
        json_decref (reply);
        s_runner_stop (self);
        return -1;
    }
    json_decref (reply);
    self->ready = true;
    self->stats.last_start_s = cuda_now () - self->spawned_at;
    return 0;
}

//  A runner that is alive and initialised, started if need be.
static int
s_runner_ready (cuda_backend_t *self, char *err, size_t errlen)
{
    //  A runner that died while idle (its watchdog, a stray signal) is replaced.
    if (self->runner && sandbox_exited (self->runner))
        s_runner_stop (self);
    if (self->ready)
        return 0;
    if (!self->runner && s_runner_spawn (self, err, errlen))
        return -1;
    json_t *hello = NULL;
    if (s_take_hello (self, &hello, err, errlen))
        return -1;
    json_decref (hello);
    return s_send_init (self, err, errlen);
}

//  --- public ---

int
cuda_backend_probe (int device, char *arch, size_t archlen, json_t **hello_out,
                   char *err, size_t errlen)
{
    if (hello_out)
        *hello_out = NULL;
    char dev [16];
    snprintf (dev, sizeof dev, "%d", device);
    sandbox_t *runner = s_runner_start (device, DEFAULT_HOST_MEM, err, errlen);
    if (!runner)
        return -1;
    json_t *hello = NULL;
    int rc = s_read_hello (runner, &hello, err, errlen);
    sandbox_destroy (&runner);
    if (rc != 0)
        return rc;
    const char *a = json_string_value (json_object_get (json_object_get (hello, "device"), "arch"));
    snprintf (arch, archlen, "%s", a? a: "sm_90");
    if (hello_out)
        *hello_out = hello;
    else
        json_decref (hello);
    return 0;
}

cuda_backend_t *
cuda_backend_new (const worker_eval_config_t *cfg, worker_cache_t *cache, char *err, size_t errlen)
{
    cuda_backend_t *self = calloc (1, sizeof *self);
    if (!self) {
        common_seterr (err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init (&self->lock, NULL);
    self->device = cfg? cfg->device: 0;
    self->max_tensor_bytes = cfg && cfg->max_tensor_bytes? cfg->max_tensor_bytes: TASK_DEFAULT_MAX_TENSOR_BYTES;
    self->host_mem = cfg && cfg->sandbox_mem_bytes? cfg->sandbox_mem_bytes: DEFAULT_HOST_MEM;
    if (self->host_mem < (1ull << 30))
        self->host_mem = 1ull << 30;     //  a CUDA process needs a few hundred MiB of host memory
    self->fresh_runner = cfg && cfg->fresh_runner;
    self->on_quarantine = cfg? cfg->on_quarantine: NULL;
    self->on_quarantine_arg = cfg? cfg->on_quarantine_arg: NULL;
    //  KGYM_CUDA_RELOAD=0 trades the reload of trusted device code after
    //  each candidate run (docs/cuda.md) for ~0.3 ms per input set.
    const char *reload = getenv ("KGYM_CUDA_RELOAD");
    self->reload = !(reload && strcmp (reload, "0") == 0);
    self->cache = cache;
    snprintf (self->caps, sizeof self->caps, "{}");

    if (s_runner_spawn (self, err, errlen))
        goto fail;
    json_t *hello = NULL;
    int rc = s_take_hello (self, &hello, err, errlen);
    if (rc != 0)
        goto fail;
    json_t *dev = json_object_get (hello, "device");
    const char *arch = json_string_value (json_object_get (dev, "arch"));
    const char *name = json_string_value (json_object_get (dev, "name"));
    const char *bus = json_string_value (json_object_get (dev, "bus_id"));
    const char *uuid = json_string_value (json_object_get (dev, "uuid"));
    snprintf (self->uuid, sizeof self->uuid, "%s", uuid? uuid: "");
    snprintf (self->arch, sizeof self->arch, "%s", arch? arch: "");
    snprintf (self->device_text, sizeof self->device_text, "%s (%s, %s)",
              name? name: "CUDA device", self->arch, bus? bus: "?");
    self->mem_total = (uint64_t) json_integer_value (json_object_get (dev, "mem_total"));
    json_decref (hello);
    if (cuda_nvrtc_check_arch (self->arch)) {
        common_seterr (err, errlen, "runner reported a malformed arch '%s'", self->arch);
        goto fail;
    }

    //  Our own kernels go through the same cached, sandboxed compile.
    cuda_nvrtc_result_t res;
    memset (&res, 0, sizeof res);
    char why [512] = "";
    const char *source = cuda_kernels_source ();
    size_t nopts = 0;
    while (cuda_kernels_options [nopts])
        nopts++;
    rc = source? cuda_nvrtc_compile (cache, "cuda", "kgym_internal.cu", source,
                                       (char *const *) cuda_kernels_options, nopts, self->arch,
                                       120.0, &res, why, sizeof why): NVRTC_INTERNAL;
    if (rc != NVRTC_OK) {
        common_seterr (err, errlen, "compiling kgym's internal kernels failed: %s%s", why,
               rc == NVRTC_COMPILE_ERROR && res.log? res.log: "");
        cuda_nvrtc_result_free (&res);
        goto fail;
    }
    self->internal = res.image;
    self->internal_size = res.size;
    res.image = NULL;
    cuda_nvrtc_result_free (&res);

    if (s_send_init (self, err, errlen))
        goto fail;
    log_info ("cuda", "device %d: %s, runner ready in %.0f ms, caps %s", self->device,
              self->device_text, self->stats.last_start_s * 1e3, self->caps);
    return self;
fail:
    cuda_backend_destroy (&self);
    return NULL;
}

void
cuda_backend_destroy (cuda_backend_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cuda_backend_t *self = *self_p;
    pthread_mutex_lock (&self->lock);
    if (self->runner && self->ready)
        cuda_msg_send (sandbox_channel (self->runner), CUDA_MSG_EXIT, 0, NULL, NULL);
    s_runner_stop (self);
    pthread_mutex_unlock (&self->lock);
    pthread_mutex_destroy (&self->lock);
    common_job_destroy (&self->health_job);
    free (self->internal);
    free (self);
    *self_p = NULL;
}

const char *
cuda_backend_device (cuda_backend_t *self)
{
    return self->device_text;
}

const char *
cuda_backend_uuid (cuda_backend_t *self)
{
    return self->uuid;
}

const char *
cuda_backend_arch (cuda_backend_t *self)
{
    return self->arch;
}

void
cuda_backend_stats (cuda_backend_t *self, cuda_backend_stats_t *stats)
{
    pthread_mutex_lock (&self->lock);
    *stats = self->stats;
    pthread_mutex_unlock (&self->lock);
}

void
cuda_backend_job_destroy (cuda_backend_job_t **job_p)
{
    if (!job_p || !*job_p)
        return;
    cuda_backend_job_t *job = *job_p;
    cuda_plan_destroy (&job->plan);
    for (int p = 0; p < CUDA_PLAN_PROGS; p++)
        cuda_nvrtc_result_free (&job->mods [p]);
    free (job);
    *job_p = NULL;
}

//  One NVRTC compile as the grading core sees it (strings point into res and why).
static void
s_build (int rc, const cuda_nvrtc_result_t *res, const char *why, worker_grade_build_t *build)
{
    memset (build, 0, sizeof *build);
    build->how = rc == NVRTC_OK? GRADE_BUILD_OK: rc == NVRTC_COMPILE_ERROR? GRADE_BUILD_ERROR
               : rc == NVRTC_TIMEOUT? GRADE_BUILD_TIMEOUT: rc == NVRTC_INVALID? GRADE_BUILD_REFUSED
               : GRADE_BUILD_OURS;
    build->log = res->log;
    build->key = res->key;
    build->cache_hit = res->cache_hit;
    build->seconds = res->seconds;
    build->detail = why;
}

cuda_backend_job_t *
cuda_backend_prepare (cuda_backend_t *self, const common_job_t *job, uint64_t seed, worker_outcome_t *out)
{
    out->seed = seed;
    out->baseline_kind = job->task->baseline? "baseline": "reference";
    if (!job->task->backend || strcmp (job->task->backend, "cuda") != 0) {
        worker_outcome_fail (out, STATUS_INVALID, "task backend '%s' is not cuda",
                             job->task->backend? job->task->backend: "");
        return NULL;
    }
    cuda_backend_job_t *prep = calloc (1, sizeof *prep);
    if (!prep) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    prep->job = job;
    char why [512] = "";
    prep->plan = cuda_plan_from_job (job, seed, self->max_tensor_bytes, why, sizeof why);
    if (!prep->plan) {
        worker_outcome_fail (out, STATUS_INVALID, "%s", why);
        goto fail;
    }
    prep->plan->heap_bytes = HEAP_BYTES;
    prep->plan->reload = self->reload;
    uint64_t need = cuda_plan_device_bytes (prep->plan);
    if (self->mem_total && need > self->mem_total) {
        worker_outcome_fail (out, STATUS_INVALID, "the job needs %.2f GiB of device memory, the "
                             "device has %.2f GiB", (double) need / (1u << 30),
                             (double) self->mem_total / (1u << 30));
        goto fail;
    }

    const common_program_t *progs [CUDA_PLAN_PROGS] = { job->candidate, &job->task->reference, job->task->baseline };
    static const char *names [CUDA_PLAN_PROGS] = { "candidate.cu", "reference.cu", "baseline.cu" };
    for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
        const common_program_t *prog = progs [p];
        if (!prog)
            continue;
        cuda_nvrtc_result_t *res = &prep->mods [p];
        int rc = cuda_nvrtc_compile (self->cache, prog->lang, names [p], prog->source,
                                       prog->options, prog->noptions, self->arch,
                                       job->eval.compile_timeout_s, res, why, sizeof why);
        snprintf (prep->plan->keys [p], sizeof prep->plan->keys [p], "%s", res->key);
        worker_grade_build_t build;
        s_build (rc, res, why, &build);
        //  The plan's programs follow worker_grade_who_t: candidate, reference, baseline.
        if (worker_grade_compiled (out, (worker_grade_who_t) p, &build) == 0)
            continue;
        goto fail;
    }
    //  The runner holds the candidate to its budget of GPU time; this wall
    //  limit only catches a kernel that never ends, so it adds our own work
    //  on top: module loads, allocation, and per input set generation and
    //  checks, which scale with the bytes moved.
    double sets = (double) job->task->nsizes * job->eval.trials + job->eval.warmup + job->eval.timed + 4;
    prep->timeout_s = job->eval.timeout_s + 5.0 + 2.0 * (double) need / 5e9 + sets * (double) need / 1e11;
    return prep;
fail:
    cuda_backend_job_destroy (&prep);
    return NULL;
}


//  Samples array -> timing summary; returns the coefficient of variation.
static double
s_timing (json_t *array, worker_timing_t *timing)
{
    size_t n = json_array_size (array);
    double *samples = n? malloc (n * sizeof (double)): NULL;
    if (!samples) {
        worker_grade_timing (timing, NULL, 0);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        samples [i] = json_number_value (json_array_get (array, i));
    worker_grade_timing (timing, samples, n);
    free (samples);
    return timing->mean_us > 0? timing->std_us / timing->mean_us: 0;
}

//  The speedup and its interval from the runner's samples, run by run: the
//  runs of a round (2k, 2k + 1) put the programs' tensors in each other's
//  places (cuda_exec), worker_grade_speedup_paired.
static double
s_speedup (json_t *cand, json_t *base, worker_outcome_t *out)
{
    size_t n = json_array_size (cand);
    if (n == 0 || json_array_size (base) != n)
        return 0;
    double *samples = malloc (2 * n * sizeof (double));
    if (!samples)
        return 0;
    for (size_t i = 0; i < n; i++) {
        samples [i] = json_number_value (json_array_get (cand, i));
        samples [n + i] = json_number_value (json_array_get (base, i));
    }
    double speedup = worker_grade_speedup_paired (samples, samples + n, n, &out->speedup_lo, &out->speedup_hi);
    free (samples);
    return speedup;
}

static void
s_fill_outcome (worker_outcome_t *out, json_t *result)
{
    worker_status_t status = worker_status_from_name (json_string_value (json_object_get (result, "status")));
    const char *message = json_string_value (json_object_get (result, "message"));
    out->status = status;
    snprintf (out->message, sizeof out->message, "%s", message? message: "");
    out->max_abs = json_number_value (json_object_get (result, "max_abs"));
    out->max_rel = json_number_value (json_object_get (result, "max_rel"));
    out->bad_elements = (uint64_t) json_integer_value (json_object_get (result, "bad"));
    json_t *mismatches = json_object_get (result, "mismatches");
    out->nmismatches = 0;
    for (size_t i = 0; i < json_array_size (mismatches) && out->nmismatches < WORKER_MISMATCH_KEEP; i++) {
        json_t *m = json_array_get (mismatches, i);
        worker_mismatch_t *w = &out->mismatches [out->nmismatches++];
        const char *arg = json_string_value (json_object_get (m, "arg"));
        snprintf (w->arg, sizeof w->arg, "%s", arg? arg: "");
        w->size_index = (uint32_t) json_integer_value (json_object_get (m, "size"));
        w->trial = (uint32_t) json_integer_value (json_object_get (m, "trial"));
        w->index = (uint64_t) json_integer_value (json_object_get (m, "index"));
        w->expected = json_number_value (json_object_get (m, "expected"));
        w->got = json_number_value (json_object_get (m, "got"));
    }
    double cv_cand = s_timing (json_object_get (result, "candidate_us"), &out->candidate);
    double cv_base = s_timing (json_object_get (result, "baseline_us"), &out->baseline);
    out->speedup_lo = out->speedup_hi = 0;
    out->speedup = status == STATUS_OK && out->candidate.n && out->candidate.median_us > 0
                 ? s_speedup (json_object_get (result, "candidate_us"), json_object_get (result, "baseline_us"), out)
                 : 0;
    out->timing_stopped = out->candidate.n? worker_grade_stop_name (worker_grade_stop_from_name (
                              json_string_value (json_object_get (result, "stopped")))): NULL;
    json_t *extra = json_object ();
    if (extra) {
        json_t *phases = json_object_get (result, "phases");
        if (phases)
            json_object_set (extra, "gpu_phases", phases);
        json_object_set_new (extra, "timing_cv", json_pack ("{s:f, s:f}", "candidate", cv_cand,
                                                            "baseline", cv_base));
        json_t *error = json_object_get (result, "error");
        if (error)
            json_object_set (extra, "cuda_error", error);
        json_t *stat = json_object_get (result, "static_bytes");
        if (stat)
            json_object_set (extra, "module_static_bytes", stat);
        //  The profiled run's figures (docs/profile.md), as the runner wrote them.
        json_t *profile = json_object_get (result, "profile");
        if (json_is_object (profile))
            json_object_set (extra, "profile", profile);
        json_decref (out->extra);
        out->extra = extra;
    }
}

//  Run one prepared job on the runner (lock held). Sets *faulted when the
//  runner had to be replaced because of what ran (hang, death, sticky error).
static void
s_run_locked (cuda_backend_t *self, cuda_backend_job_t *prep, worker_outcome_t *out, bool *faulted,
              bool *died)
{
    char err [512] = "";
    *faulted = false;
    *died = false;
    if (s_runner_ready (self, err, sizeof err)) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "cannot start kgym-cuda-runner: %s", err);
        return;
    }
    json_t *plan = cuda_plan_to_json (prep->plan);
    char *text = plan? json_dumps (plan, JSON_COMPACT): NULL;
    json_decref (plan);
    if (!text) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "out of memory");
        return;
    }
    const void *blobs [3];
    size_t sizes [3];
    for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
        blobs [p] = prep->mods [p].image? (const void *) prep->mods [p].image: (const void *) "";
        sizes [p] = prep->mods [p].image? prep->mods [p].size: 0;
    }
    int fd = sandbox_channel (self->runner);
    int sent = cuda_msg_send_text (fd, CUDA_MSG_JOB, text, 3, blobs, sizes);
    free (text);
    cuda_msg_t msg;
    char why [256] = "";
    int rc = sent? -1: cuda_msg_recv (fd, &msg, prep->timeout_s, why, sizeof why);
    self->stats.jobs++;
    bool recycle = self->fresh_runner, fault = false;
    if (rc == 1) {
        //  Hung (or just too slow): the whole group and cgroup go.
        worker_outcome_fail (out, STATUS_TIMEOUT, "timed out after %.1f s (eval.timeout_s %g + "
                             "%.1f s allowance); the runner was replaced", prep->timeout_s,
                             prep->job->eval.timeout_s, prep->timeout_s - prep->job->eval.timeout_s);
        recycle = fault = true;
    }
    else if (rc != 0) {
        char what [160] = "no exit status";
        if (sandbox_wait (self->runner, 0.5) == 0)
            sandbox_describe (self->runner, what, sizeof what);
        bool oom = sandbox_oom (self->runner);
        worker_outcome_fail (out, STATUS_RUNTIME_ERROR, "kgym-cuda-runner died during the job "
                             "(%s%s; %s)", what, oom? ", host memory cap reached": "",
                             sent? "send failed": why);
        recycle = fault = true;
        *died = true;
    }
    else {
        json_error_t jerr;
        json_t *result = msg.type == CUDA_MSG_RESULT? json_loads ((const char *) msg.part [0], 0, &jerr): NULL;
        cuda_msg_free (&msg);
        if (!result) {
            worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "malformed result from kgym-cuda-runner");
            recycle = fault = true;
        }
        else {
            s_fill_outcome (out, result);
            if (json_is_true (json_object_get (result, "fatal")))
                recycle = fault = true;
            json_decref (result);
        }
    }
    snprintf (out->sandbox, sizeof out->sandbox, "%s", self->caps);
    *faulted = fault;
    if (recycle) {
        //  Start the next runner now: its cuInit overlaps the next prepare.
        s_runner_stop (self);
        if (s_runner_spawn (self, err, sizeof err))
            log_warn ("cuda", "cannot respawn kgym-cuda-runner: %s", err);
    }
}

//  After a fault: grade the known-good job on the fresh runner (lock held).
//  A GPU that gets it wrong is quarantined: no job is graded on it again.
static void
s_health_check (cuda_backend_t *self)
{
    self->check_pending = false;
    char err [512] = "";
    if (!self->health_job) {
        json_t *json = json_loads (s_health_job_json, 0, NULL);
        self->health_job = json? common_job_from_json (json, err, sizeof err): NULL;
        json_decref (json);
        if (!self->health_job) {
            log_error ("cuda", "the health-check job does not parse: %s", err);
            return;
        }
    }
    worker_outcome_t out;
    worker_outcome_init (&out);
    cuda_backend_job_t *prep = cuda_backend_prepare (self, self->health_job, 7, &out);
    bool faulted = false, died = false;
    if (prep)
        s_run_locked (self, prep, &out, &faulted, &died);
    cuda_backend_job_destroy (&prep);
    if (out.status == STATUS_OK)
        log_info ("cuda", "GPU %d passed its health check after a kernel fault", self->device);
    else {
        self->quarantined = true;
        snprintf (self->quarantine_reason, sizeof self->quarantine_reason,
                  "GPU %d failed its health check after a kernel fault: %s: %s", self->device,
                  worker_status_name (out.status), out.message);
        log_error ("cuda", "%s; quarantined", self->quarantine_reason);
        if (self->on_quarantine)
            self->on_quarantine (self->on_quarantine_arg, self->quarantine_reason);
    }
    worker_outcome_clear (&out);
}

void
cuda_backend_execute (cuda_backend_t *self, cuda_backend_job_t **job_p, worker_outcome_t *out)
{
    if (!job_p || !*job_p)
        return;
    double t0 = cuda_now ();
    pthread_mutex_lock (&self->lock);
    if (self->check_pending)
        s_health_check (self);
    if (self->quarantined)
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "not graded: %s", self->quarantine_reason);
    else {
        bool faulted = false, died = false;
        s_run_locked (self, *job_p, out, &faulted, &died);
        self->check_pending = faulted;
        //  A runner that dies without a word may be our fault or the driver's
        //  passing one: the job runs once more on the fresh runner. Dying
        //  again is the candidate's doing (runtime_error), never internal.
        if (died && !self->quarantined) {
            if (self->check_pending)
                s_health_check (self);
            if (!self->quarantined) {
                char first [sizeof out->message];
                snprintf (first, sizeof first, "%s", out->message);
                worker_outcome_t again;
                worker_outcome_init (&again);
                again.compile_s = out->compile_s;
                memcpy (again.cache_hit, out->cache_hit, sizeof again.cache_hit);
                memcpy (again.cache_key, out->cache_key, sizeof again.cache_key);
                again.compile_log = out->compile_log;
                out->compile_log = NULL;
                s_run_locked (self, *job_p, &again, &faulted, &died);
                self->check_pending = faulted;
                if (died)
                    worker_outcome_fail (&again, STATUS_RUNTIME_ERROR, "kgym-cuda-runner died during "
                                         "the job, twice (first: %.200s)", first);
                worker_outcome_clear (out);
                *out = again;
                out->retried = true;
            }
        }
    }
    pthread_mutex_unlock (&self->lock);
    out->run_s = cuda_now () - t0;
    cuda_backend_job_destroy (job_p);
}

bool
cuda_backend_quarantined (cuda_backend_t *self, char *reason, size_t len)
{
    pthread_mutex_lock (&self->lock);
    bool quarantined = self->quarantined;
    if (quarantined && reason && len)
        snprintf (reason, len, "%s", self->quarantine_reason);
    pthread_mutex_unlock (&self->lock);
    return quarantined;
}

json_t *
cuda_backend_selftest (cuda_backend_t *self)
{
    pthread_mutex_lock (&self->lock);
    json_t *report = NULL;
    char err [512];
    cuda_nvrtc_result_t res;
    int rc = cuda_nvrtc_compile (self->cache, "cuda", "kgym_selftest.cu", cuda_kernels_selftest_source,
                                   NULL, 0, self->arch, 60, &res, err, sizeof err);
    if (rc != NVRTC_OK)
        log_warn ("cuda", "self-test does not compile: %s %s", err, res.log? res.log: "");
    else if (s_runner_ready (self, err, sizeof err) == 0) {
        int fd = sandbox_channel (self->runner);
        cuda_msg_t msg;
        char why [256];
        const void *blobs [1] = { res.image };
        size_t sizes [1] = { res.size };
        if (cuda_msg_send_text (fd, CUDA_MSG_SELFTEST, "{}", 1, blobs, sizes) == 0
        &&  cuda_msg_recv (fd, &msg, 30.0, why, sizeof why) == 0) {
            json_error_t jerr;
            report = json_loads ((const char *) msg.part [0], 0, &jerr);
            cuda_msg_free (&msg);
        }
    }
    cuda_nvrtc_result_free (&res);
    s_runner_stop (self);
    s_runner_spawn (self, err, sizeof err);
    pthread_mutex_unlock (&self->lock);
    return report;
}

//  ---------------------------------------------------------------------
//  The backend table (worker_backend.h)

static uint32_t
s_default_slots (const worker_eval_config_t *cfg)
{
    (void) cfg;
    return 1;                   //  one job on the GPU at a time: timings stay clean
}

//  NVRTC compiles at once: this GPU's share of the host's cores but one
//  (left to the worker and the runner that feeds the GPU), so compiles
//  keep ahead of the GPU (docs/benchmarks.md).
static uint32_t
s_default_compilers (const worker_eval_config_t *cfg)
{
    (void) cfg;
    uint32_t cores = worker_host_cores_per_gpu ();
    return cores > 1? cores - 1: 1;
}

static void *
s_create (const worker_eval_config_t *cfg, worker_cache_t *cache, char *err, size_t errlen)
{
    return cuda_backend_new (cfg, cache, err, errlen);
}

static void
s_destroy_op (void **self_p)
{
    cuda_backend_t *self = *self_p;
    cuda_backend_destroy (&self);
    *self_p = NULL;
}

static void *
s_prepare_op (void *self, const common_job_t *job, uint64_t seed, worker_outcome_t *out)
{
    return cuda_backend_prepare (self, job, seed, out);
}

static void
s_execute_op (void *self, void **job_p, worker_outcome_t *out)
{
    cuda_backend_job_t *job = *job_p;
    *job_p = NULL;
    cuda_backend_execute (self, &job, out);
}

static void
s_job_destroy_op (void **job_p)
{
    cuda_backend_job_t *job = *job_p;
    cuda_backend_job_destroy (&job);
    *job_p = NULL;
}

static const char *
s_device_op (void *self)
{
    return cuda_backend_device (self);
}

static const char *
s_uuid_op (void *self)
{
    return cuda_backend_uuid (self);
}

static const char *
s_caps_op (void *self)
{
    return ((cuda_backend_t *) self)->caps;
}

static bool
s_quarantined_op (void *self, char *reason, size_t len)
{
    return cuda_backend_quarantined (self, reason, len);
}

static int
s_probe_op (int device, char *desc, size_t desclen, char *err, size_t errlen)
{
    char arch [16] = "";
    json_t *hello = NULL;
    int rc = cuda_backend_probe (device, arch, sizeof arch, &hello, err, errlen);
    if (rc == 0) {
        const char *name = json_string_value (json_object_get (json_object_get (hello, "device"), "name"));
        snprintf (desc, desclen, "%s (%s)", name? name: "CUDA device", arch);
    }
    json_decref (hello);
    return rc;
}

static int
s_compile_op (worker_cache_t *cache, const common_program_t *program, const char *target,
              double timeout_s, worker_compile_t *result)
{
    memset (result, 0, sizeof *result);
    char arch [16] = "sm_90", err [512] = "";
    if (target && cuda_nvrtc_check_arch (target)) {
        result->status = STATUS_INVALID;
        if (asprintf (&result->log, "target '%s' is not of the form sm_XX", target) < 0)
            result->log = NULL;
        return 0;
    }
    //  The GPU's own arch, asked of a runner so this process stays free of CUDA.
    if (target)
        snprintf (arch, sizeof arch, "%s", target);
    else
    if (cuda_backend_probe (0, arch, sizeof arch, NULL, err, sizeof err) != 0)
        snprintf (arch, sizeof arch, "sm_90");
    snprintf (result->target, sizeof result->target, "%s", arch);
    cuda_nvrtc_result_t res;
    int rc = cuda_nvrtc_compile (cache, program->lang, "candidate.cu", program->source,
                                 program->options, program->noptions, arch, timeout_s, &res,
                                 err, sizeof err);
    worker_grade_build_t build;
    s_build (rc, &res, err, &build);
    worker_compile_set (result, &build);
    cuda_nvrtc_result_free (&res);
    return 0;
}

const worker_backend_t cuda_backend = {
    .info = { .name = "cuda", .targets = { "cuda" }, .langs = { "cuda", "ptx" } },
    .summary = "CUDA C and PTX kernels compiled with NVRTC and run on one GPU",
    .device_ordinal = true,
    .default_slots = s_default_slots,
    .default_compilers = s_default_compilers,
    .create = s_create,
    .destroy = s_destroy_op,
    .prepare = s_prepare_op,
    .execute = s_execute_op,
    .job_destroy = s_job_destroy_op,
    .device = s_device_op,
    .device_uuid = s_uuid_op,
    .caps = s_caps_op,
    .quarantined = s_quarantined_op,
    .probe = s_probe_op,
    .compile = s_compile_op,
};
