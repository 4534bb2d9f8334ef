/*  bench_cuda - figures of the CUDA backend for docs/benchmarks.md.

        bench_cuda [SECTION...]     sections: nvrtc runner overhead throughput repeat relu gen
                                    (default: all)

    Needs a GPU (kgym-cuda-runner), except `nvrtc`. Every figure is printed
    as "BENCH name value unit" plus a short human line; nothing here calls
    CUDA itself.
*/
#include "kgym_config.h"
#include "common_task.h"
#include "common_init.h"
#include "common_dtype.h"
#include "worker_outcome.h"
#include "cuda_backend.h"
#include "cuda_nvrtc.h"
#include "worker_cache.h"
#include "cuda_msg.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *s_tasks [] = {
    "bias_gelu_residual_f32", "gelu_f32", "gemm_f16", "layernorm_f32",
    "rmsnorm_f32", "softmax_f32", "sum_f32", "transpose_f32",
};
#define NTASKS (sizeof s_tasks / sizeof s_tasks [0])

static int
s_cmp (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static double
s_median (double *v, size_t n)
{
    qsort (v, n, sizeof *v, s_cmp);
    return n % 2? v [n / 2]: 0.5 * (v [n / 2 - 1] + v [n / 2]);
}

static worker_cache_t *
s_cache (const char *tag)
{
    char path [256], err [256];
    snprintf (path, sizeof path, "/tmp/kgym-bench-cuda-%s-%d/modules.sqlite", tag, (int) getpid ());
    worker_cache_t *cache = worker_cache_new (path, WORKER_CACHE_DEFAULT_MAX, err, sizeof err);
    if (!cache)
        fprintf (stderr, "cache: %s\n", err);
    return cache;
}

static cuda_backend_t *
s_backend (worker_cache_t *cache, bool fresh)
{
    worker_eval_config_t cfg;
    worker_eval_config_default (&cfg);
    cfg.backend = "cuda";
    cfg.fresh_runner = fresh;
    char err [512];
    cuda_backend_t *cuda = cuda_backend_new (&cfg, cache, err, sizeof err);
    if (!cuda) {
        fprintf (stderr, "cuda_backend_new: %s\n", err);
        exit (1);
    }
    return cuda;
}

//  Grade; returns the wall time of prepare + execute; *prep_s the prepare part.
static double
s_grade (cuda_backend_t *cuda, json_t *task, json_t *cand, json_t *eval, uint64_t seed,
         worker_outcome_t *out, double *prep_s)
{
    json_t *job = json_pack ("{s:O, s:O}", "task", task, "candidate", cand);
    if (eval)
        json_object_set (job, "eval", eval);
    char err [512];
    common_job_t *parsed = common_job_from_json (job, err, sizeof err);
    if (!parsed) {
        fprintf (stderr, "job: %s\n", err);
        exit (1);
    }
    worker_outcome_init (out);
    double t0 = cuda_now ();
    cuda_backend_job_t *prep = cuda_backend_prepare (cuda, parsed, seed, out);
    double t1 = cuda_now ();
    if (prep)
        cuda_backend_execute (cuda, &prep, out);
    double t2 = cuda_now ();
    if (prep_s)
        *prep_s = t1 - t0;
    common_job_destroy (&parsed);
    json_decref (job);
    return t2 - t0;
}

//  An example file (no libcheck here: its asserts only work inside tests).
static json_t *
s_load (const char *dir, const char *file)
{
    const char *root = getenv ("KGYM_SOURCE_DIR");
    char path [512];
    snprintf (path, sizeof path, "%s/examples/cuda/%s/%s", root? root: KGYM_SOURCE_DIR, dir, file);
    json_error_t jerr;
    json_t *json = json_load_file (path, 0, &jerr);
    if (!json) {
        fprintf (stderr, "cannot load %s: %s\n", path, jerr.text);
        exit (1);
    }
    return json;
}

static void
s_nvrtc (void)
{
    worker_cache_t *cache = s_cache ("nvrtc");
    double cold [5], hit [200];
    char err [512];
    for (int i = 0; i < 5; i++) {
        char src [256];
        snprintf (src, sizeof src, "extern \"C\" __global__ void k%d(float *y, const float *x, int n)"
                  "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * x[i] + %d; }\n",
                  i, (int) getpid ());
        cuda_nvrtc_result_t res;
        if (cuda_nvrtc_compile (cache, "cuda", "k.cu", src, NULL, 0, "sm_90", 60, &res, err, sizeof err)) {
            fprintf (stderr, "nvrtc: %s\n", err);
            exit (1);
        }
        cold [i] = res.seconds * 1e3;
        cuda_nvrtc_result_free (&res);
        if (i == 4)
            for (int h = 0; h < 200; h++) {
                cuda_nvrtc_compile (cache, "cuda", "k.cu", src, NULL, 0, "sm_90", 60, &res, err, sizeof err);
                hit [h] = res.seconds * 1e3;
                cuda_nvrtc_result_free (&res);
            }
    }
    printf ("BENCH nvrtc_cold_ms %.1f\nBENCH nvrtc_hit_ms %.3f\n", s_median (cold, 5), s_median (hit, 200));
    printf ("nvrtc: small kernel, cold compile (spawn + confine + NVRTC) median %.1f ms (min %.1f), "
            "cache hit median %.3f ms\n", s_median (cold, 5), cold [0], s_median (hit, 200));
    worker_cache_destroy (&cache);
}

static void
s_runner (void)
{
    worker_cache_t *cache = s_cache ("runner");
    double start [3], cuinit [3];
    for (int i = 0; i < 3; i++) {
        double t0 = cuda_now ();
        cuda_backend_t *cuda = s_backend (cache, false);
        double total = cuda_now () - t0;
        cuda_backend_stats_t st;
        cuda_backend_stats (cuda, &st);
        start [i] = st.last_start_s * 1e3;
        cuinit [i] = st.cuinit_s * 1e3;
        printf ("runner start %d: cuda_backend_new %.0f ms (runner spawn->ready %.0f ms, cuInit+query %.0f ms)\n",
                i, total * 1e3, start [i], cuinit [i]);
        cuda_backend_destroy (&cuda);
    }
    printf ("BENCH runner_start_ms %.0f\nBENCH runner_cuinit_ms %.0f\n", s_median (start, 3), s_median (cuinit, 3));
    worker_cache_destroy (&cache);
}

static void
s_overhead (void)
{
    worker_cache_t *cache = s_cache ("overhead");
    json_t *task = s_load ("gelu_f32", "task.json");
    json_object_set_new (task, "sizes", json_pack ("[{s:i}]", "N", 4096));
    json_object_set_new (task, "timing_size", json_integer (0));
    json_t *cand = s_load ("gelu_f32", "candidates/naive.json");
    const char *names [] = { "default eval (3 trials, 2 warm-up, 10 timed)", "check only (1 trial)",
                             "default eval, profile off" };
    const char *tags [] = { "default", "checkonly", "noprofile" };
    for (int reload = 1; reload >= 0; reload--) {
        //  cuda_backend reads KGYM_CUDA_RELOAD when it is created.
        setenv ("KGYM_CUDA_RELOAD", reload? "1": "0", 1);
        cuda_backend_t *cuda = s_backend (cache, false);
        for (int e = 0; e < 3; e++) {
            json_t *eval = e == 1? json_pack ("{s:i, s:b}", "trials", 1, "check_only", 1)
                         : e == 2? json_pack ("{s:b}", "profile", 0): NULL;
            enum { N = 60 };
            double wall [N], prep [N], gpu [N], over [N];
            //  Where the time goes: the supervisor's execute (run_s), the runner's
            //  own total and its phases (docs/benchmarks.md, overhead breakdown).
            static const char *ph [] = { "total_s", "load_s", "check_s", "time_s", "profile_s" };
            double run [N], phase [5][N];
            worker_outcome_t out;
            s_grade (cuda, task, cand, eval, 1, &out, NULL);        //  warm the cache and runner
            worker_outcome_clear (&out);
            for (int i = 0; i < N; i++) {
                double p;
                wall [i] = s_grade (cuda, task, cand, eval, (uint64_t) i + 2, &out, &p) * 1e3;
                prep [i] = p * 1e3;
                //  The kernels' own GPU time: every candidate and reference run.
                uint32_t runs = e != 1? 3 + 2 + 10 + 1: 1;
                double k = (out.candidate.median_us + out.baseline.median_us) * 1e-3;
                if (out.candidate.n == 0)
                    k = 0.006;       //  untimed: ~3 us per launch, two launches a set
                gpu [i] = k * runs;
                over [i] = wall [i] - gpu [i];
                run [i] = out.run_s * 1e3;
                json_t *phases = out.extra? json_object_get (out.extra, "gpu_phases"): NULL;
                for (int f = 0; f < 5; f++)
                    phase [f][i] = json_number_value (json_object_get (phases, ph [f])) * 1e3;
                if (out.status != STATUS_OK) {
                    fprintf (stderr, "overhead job: %s %s\n", worker_status_name (out.status), out.message);
                    exit (1);
                }
                worker_outcome_clear (&out);
            }
            printf ("per-job, %s, reload %s, warm runner + cached modules, N=4096 gelu: wall median "
                    "%.2f ms (prepare %.3f ms), kernels' GPU time ~%.3f ms, overhead %.2f ms\n", names [e],
                    reload? "on": "off", s_median (wall, N), s_median (prep, N), s_median (gpu, N),
                    s_median (over, N));
            printf ("BENCH overhead_%s_reload%d_ms %.2f\n", tags [e], reload,
                    s_median (over, N));
            printf ("  breakdown (medians, ms): execute %.3f, runner total %.3f (load %.3f, check %.3f, "
                    "time %.3f, profile %.3f)\n", s_median (run, N), s_median (phase [0], N),
                    s_median (phase [1], N), s_median (phase [2], N), s_median (phase [3], N),
                    s_median (phase [4], N));
            json_decref (eval);
        }
        cuda_backend_destroy (&cuda);
    }
    unsetenv ("KGYM_CUDA_RELOAD");
    json_decref (task);
    json_decref (cand);
    worker_cache_destroy (&cache);
}

static void
s_throughput (void)
{
    worker_cache_t *cache = s_cache ("throughput");
    cuda_backend_t *cuda = s_backend (cache, false);
    const char *cands [] = { "naive", "optimised" };
    for (int round = 0; round < 3; round++) {
        if (round == 2) {
            //  The same, with trusted modules not reloaded after each candidate run.
            cuda_backend_destroy (&cuda);
            setenv ("KGYM_CUDA_RELOAD", "0", 1);
            cuda = s_backend (cache, false);
            unsetenv ("KGYM_CUDA_RELOAD");
        }
        double t0 = cuda_now ();
        int jobs = 0;
        for (size_t t = 0; t < NTASKS; t++) {
            json_t *task = s_load (s_tasks [t], "task.json");
            for (int c = 0; c < 2; c++) {
                char file [128];
                snprintf (file, sizeof file, "candidates/%s.json", cands [c]);
                json_t *cand = s_load (s_tasks [t], file);
                worker_outcome_t out;
                double wall = s_grade (cuda, task, cand, NULL, (uint64_t) jobs + 1, &out, NULL);
                if (round == 1)
                    printf ("  %-24s %-10s %-8s %7.1f ms  speedup %5.2f  cand %8.1f us\n", s_tasks [t],
                            cands [c], worker_status_name (out.status), wall * 1e3, out.speedup,
                            out.candidate.median_us);
                worker_outcome_clear (&out);
                json_decref (cand);
                jobs++;
            }
            json_decref (task);
        }
        double took = cuda_now () - t0;
        printf ("throughput round %d (%s cache, reload %s): %d jobs in %.2f s = %.1f jobs/s\n", round,
                round? "warm": "cold", round == 2? "off": "on", jobs, took, jobs / took);
        if (round >= 1)
            printf ("BENCH jobs_per_s_reload%d %.1f\n", round == 1, jobs / took);
    }
    cuda_backend_destroy (&cuda);
    worker_cache_destroy (&cache);
}

static void
s_repeat (void)
{
    worker_cache_t *cache = s_cache ("repeat");
    cuda_backend_t *cuda = s_backend (cache, false);
    const char *cases [][2] = { { "gelu_f32", "optimised" }, { "softmax_f32", "optimised" },
                                { "gemm_f16", "optimised" }, { "transpose_f32", "optimised" },
                                { "rmsnorm_f32", "naive" }, { "layernorm_f32", "naive" } };
    json_t *eval = json_pack ("{s:i, s:i, s:i, s:f}", "trials", 1, "timed", 100, "warmup", 5, "timeout", 60.0);
    double worst = 0, worst_clipped = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases [0]; c++) {
        json_t *task = s_load (cases [c][0], "task.json");
        char file [128];
        snprintf (file, sizeof file, "candidates/%s.json", cases [c][1]);
        json_t *cand = s_load (cases [c][0], file);
        double sp [3], med [3], cv [3];
        unsigned runs [3];
        int clipped = 0;
        for (int r = 0; r < 3; r++) {
            worker_outcome_t out;
            s_grade (cuda, task, cand, eval, (uint64_t) r + 100, &out, NULL);
            sp [r] = out.speedup;
            med [r] = out.candidate.median_us;
            cv [r] = out.candidate.mean_us > 0? out.candidate.std_us / out.candidate.mean_us: 0;
            runs [r] = out.candidate.n;
            clipped += out.timing_stopped && strcmp (out.timing_stopped, "clipped") == 0;
            worker_outcome_clear (&out);
        }
        double lo = fmin (sp [0], fmin (sp [1], sp [2])), hi = fmax (sp [0], fmax (sp [1], sp [2]));
        double spread = (hi - lo) / lo * 100;
        //  Timing stops once the speedup is past the reward's clip: such a
        //  speedup is known only as far as the reward needs (the clip's).
        double *into = clipped == 3? &worst_clipped: &worst;
        if (med [0] >= 50 && spread > *into)
            *into = spread;
        printf ("repeat %-12s %-10s candidate median %.1f/%.1f/%.1f us (cv %.3f), speedup %.3f/%.3f/%.3f, "
                "spread %.1f%%, timed runs %u/%u/%u of 100 (adaptive)%s\n", cases [c][0], cases [c][1],
                med [0], med [1], med [2], cv [0], sp [0], sp [1], sp [2], spread, runs [0], runs [1], runs [2],
                clipped == 3? ", clipped every time": clipped? ", clipped some times": "");
        json_decref (task);
        json_decref (cand);
    }
    printf ("BENCH repeat_worst_spread_pct %.2f\n", worst);
    printf ("BENCH repeat_worst_spread_clipped_pct %.2f\n", worst_clipped);
    json_decref (eval);
    cuda_backend_destroy (&cuda);
    worker_cache_destroy (&cache);
}

//  KernelBench level 1 ReLU: 4096 x 393216 f32, 5 correctness trials, 100 timed runs.
static void
s_relu (void)
{
    const char *src =
        "extern \"C\" __global__ void relu(const float *x, float *y, long long n)\n"
        "{\n"
        "    for (long long i = blockIdx.x * (long long) blockDim.x + threadIdx.x; i < n;\n"
        "         i += (long long) gridDim.x * blockDim.x)\n"
        "        y[i] = x[i] > 0.0f? x[i]: 0.0f;\n"
        "}\n";
    json_t *task = json_pack ("{s:s, s:s, s:[{s:s, s:s, s:s, s:[s,s]}, {s:s, s:s, s:s, s:[s,s]}, "
                              "{s:s, s:s, s:s, s:s}], s:[{s:i, s:i}], s:{s:s, s:[{s:s, s:[s,i,i], s:[i,i,i]}]}}",
        "name", "relu_kernelbench_l1", "backend", "cuda",
        "args", "name", "x", "kind", "input", "dtype", "f32", "shape", "B", "D",
                "name", "y", "kind", "output", "dtype", "f32", "shape", "B", "D",
                "name", "n", "kind", "scalar", "dtype", "i64", "value", "B*D",
        "sizes", "B", 4096, "D", 393216,
        "reference", "source", src, "launches", "kernel", "relu", "grid", "min(cdiv(B*D,256),1056*8)", 1, 1,
                     "block", 256, 1, 1);
    json_t *cand = json_pack ("{s:s, s:[{s:s, s:[s,i,i], s:[i,i,i]}]}", "source",
        "extern \"C\" __global__ void relu(const float4 *x, float4 *y, long long n)\n"
        "{\n"
        "    long long n4 = n / 4;\n"
        "    for (long long i = blockIdx.x * (long long) blockDim.x + threadIdx.x; i < n4;\n"
        "         i += (long long) gridDim.x * blockDim.x) {\n"
        "        float4 v = x[i];\n"
        "        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);\n"
        "        y[i] = v;\n"
        "    }\n"
        "}\n",
        "launches", "kernel", "relu", "grid", "min(cdiv(B*D,1024),132*16)", 1, 1, "block", 256, 1, 1);
    json_t *eval = json_pack ("{s:i, s:i, s:i, s:f}", "trials", 5, "timed", 100, "warmup", 3, "timeout", 300.0);
    //  Cold: a new backend, empty cache (internal kernels and both programs compile).
    double t0 = cuda_now ();
    worker_cache_t *cache = s_cache ("relu");
    cuda_backend_t *cuda = s_backend (cache, false);
    double t_new = cuda_now () - t0;
    for (int run = 0; run < 2; run++) {
        worker_outcome_t out;
        double prep = 0;
        double wall = s_grade (cuda, task, cand, eval, (uint64_t) run + 1, &out, &prep);
        if (run == 0)
            wall += t_new;
        char *phases = out.extra? json_dumps (json_object_get (out.extra, "gpu_phases"), JSON_COMPACT): NULL;
        printf ("relu 4096x393216 f32 %s: %s in %.2f s (backend start %.2f s, compile %.2f s, run %.2f s); "
                "candidate median %.1f us, reference %.1f us, speedup %.3f [%.3f, %.3f], %u of %u timed runs "
                "(%s); runner phases %s; %s\n",
                run? "warm": "cold", worker_status_name (out.status), wall, run? 0: t_new, out.compile_s,
                out.run_s, out.candidate.median_us, out.baseline.median_us, out.speedup, out.speedup_lo,
                out.speedup_hi, out.candidate.n, 100u,
                out.timing_stopped? out.timing_stopped: "-", phases? phases: "{}", out.message);
        printf ("BENCH relu_%s_s %.2f\n", run? "warm": "cold", wall);
        free (phases);
        worker_outcome_clear (&out);
    }
    json_decref (task);
    json_decref (cand);
    json_decref (eval);
    cuda_backend_destroy (&cuda);
    worker_cache_destroy (&cache);
}

//  Input generation on the GPU (kgym_fill, kgym_check_gen) at memory
//  scale: a check-only job over one big input whose programs do almost
//  nothing, so the correctness phase is generation. Per trial: the
//  candidate's inputs generated (a write of N elements), checked against
//  their regeneration (a read, generating again), the reference's
//  generated again (a write): three passes of the generator.
static void
s_gen (void)
{
    struct { const char *dtype, *dist; } cases [] = {
        { "f32", "normal" }, { "f32", "uniform" }, { "f16", "normal" }, { "bf16", "uniform" },
        { "f64", "normal" }, { "i32", "randint" },
    };
    const long long n = 1ll << 28;          //  1 GiB of f32
    const int trials = 10;
    worker_cache_t *cache = s_cache ("gen");
    cuda_backend_t *cuda = s_backend (cache, false);
    const char *src = "extern \"C\" __global__ void one(const void *x, float *y) { y[0] = 1.0f; }\n";
    for (size_t c = 0; c < sizeof cases / sizeof cases [0]; c++) {
        json_t *task = json_pack ("{s:s, s:s, s:[{s:s, s:s, s:s, s:[s], s:{s:s}}, {s:s, s:s, s:s, s:[i]}], "
                                  "s:[{s:I}], s:{s:f, s:f}, s:{s:s, s:[{s:s, s:[i,i,i], s:[i,i,i]}]}}",
            "name", "gen", "backend", "cuda",
            "args", "name", "x", "kind", "input", "dtype", cases [c].dtype, "shape", "N", "init",
                    "dist", cases [c].dist,
                    "name", "y", "kind", "output", "dtype", "f32", "shape", 1,
            "sizes", "N", (json_int_t) n, "tolerance", "atol", 0.0, "rtol", 0.0,
            "reference", "source", src, "launches", "kernel", "one", "grid", 1, 1, 1, "block", 1, 1, 1);
        json_t *cand = json_pack ("{s:s, s:[{s:s, s:[i,i,i], s:[i,i,i]}]}", "source", src,
                                  "launches", "kernel", "one", "grid", 1, 1, 1, "block", 1, 1, 1);
        json_t *eval = json_pack ("{s:i, s:b, s:b, s:f}", "trials", trials, "check_only", 1, "profile", 0,
                                  "timeout", 120.0);
        worker_outcome_t out;
        s_grade (cuda, task, cand, eval, 1, &out, NULL);            //  warm: compile, allocate
        worker_outcome_clear (&out);
        s_grade (cuda, task, cand, eval, 2, &out, NULL);
        json_t *phases = out.extra? json_object_get (out.extra, "gpu_phases"): NULL;
        double check_s = json_number_value (json_object_get (phases, "check_s"));
        double per_pass = check_s / trials / 3;
        common_init_t init = { INIT_NORMAL, 0, 1 };
        common_init_dist_parse (cases [c].dist, &init.dist);
        common_dtype_t dtype = common_dtype_parse (cases [c].dtype);
        double gbs = per_pass > 0? (double) n * (double) common_dtype_size (dtype) / per_pass / 1e9: 0;
        printf ("gen %-4s %-7s %lld elements: %s; %.2f ms per set (3 passes), %.2f ms per pass = %.1f "
                "Gelem/s, %.0f GB/s of tensor (%s path)\n", cases [c].dtype, cases [c].dist, n,
                worker_status_name (out.status), check_s / trials * 1e3, per_pass * 1e3,
                per_pass > 0? (double) n / per_pass / 1e9: 0, gbs,
                common_init_float_path (&init, dtype)? "float": "double");
        printf ("BENCH gen_%s_%s_gbs %.0f\n", cases [c].dtype, cases [c].dist, gbs);
        worker_outcome_clear (&out);
        json_decref (task);
        json_decref (cand);
        json_decref (eval);
    }
    cuda_backend_destroy (&cuda);
    worker_cache_destroy (&cache);
}

int
main (int argc, char **argv)
{
    setvbuf (stdout, NULL, _IOLBF, 0);
    struct { const char *name; void (*fn) (void); } sections [] = {
        { "nvrtc", s_nvrtc }, { "runner", s_runner }, { "overhead", s_overhead },
        { "throughput", s_throughput }, { "repeat", s_repeat }, { "relu", s_relu }, { "gen", s_gen },
    };
    size_t n = sizeof sections / sizeof sections [0];
    for (size_t i = 0; i < n; i++) {
        bool wanted = argc < 2;
        for (int a = 1; a < argc; a++)
            wanted |= strcmp (argv [a], sections [i].name) == 0;
        if (!wanted)
            continue;
        printf ("== %s\n", sections [i].name);
        double t0 = cuda_now ();
        sections [i].fn ();
        printf ("   (%s took %.1f s)\n", sections [i].name, cuda_now () - t0);
    }
    return 0;
}
