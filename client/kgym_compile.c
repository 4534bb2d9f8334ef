/*  kgym_compile - `kgym compile`: compile candidates without running them.

    A thin front: parse options, load the task, then per candidate parse,
    check against the task and compile through the backend's compiler
    class (cuda_nvrtc or cpu_cc), printing one JSON line each.
*/
#include "kgym_compile.h"
#include "kgym_config.h"
#include "client_options.h"
#include "common_task.h"
#include "worker_cache.h"
#include "cpu_cc.h"
#include "sandbox.h"
#if KGYM_HAVE_CUDA
#include "cuda_backend.h"
#include "cuda_nvrtc.h"
#endif
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JSON (16u << 20)

static void
s_usage (FILE *out)
{
    fprintf (out, "usage: kgym compile TASK CANDIDATE... [--arch sm_XX] [--cache PATH] [--timeout S]\n"
                  "  compile without running: one JSON line per candidate with status, log and cache\n"
                  "  key; --timeout S: seconds per compile, in (0, 600] (default 30)\n");
}

//  Print one result line; log may be NULL.
static void
s_print (const char *candidate, const char *status, const char *log, const char *key,
         bool cached, double seconds, const char *arch)
{
    json_t *line = json_pack ("{s:s, s:s, s:s, s:s, s:b, s:f}", "candidate", candidate,
                              "status", status, "log", log? log: "", "cache_key", key? key: "",
                              "cached", cached, "compile_s", seconds);
    if (line && arch)
        json_object_set_new (line, "arch", json_string (arch));
    char *text = line? json_dumps (line, JSON_COMPACT): NULL;
    if (text)
        printf ("%s\n", text);
    fflush (stdout);
    free (text);
    json_decref (line);
}

//  Compile one candidate of a cuda task. Returns true when it compiled.
static bool
s_compile_cuda (worker_cache_t *cache, const char *path, const common_program_t *prog,
                const char *arch, double timeout_s)
{
#if KGYM_HAVE_CUDA
    cuda_nvrtc_result_t res;
    char err [512] = "";
    int rc = cuda_nvrtc_compile (cache, prog->lang, "candidate.cu", prog->source, prog->options,
                                   prog->noptions, arch, timeout_s, &res, err, sizeof err);
    const char *status = rc == NVRTC_OK? "ok": rc == NVRTC_COMPILE_ERROR || rc == NVRTC_TIMEOUT
                       ? "compile_error": rc == NVRTC_INVALID? "invalid": "internal_error";
    const char *log = rc == NVRTC_OK || rc == NVRTC_COMPILE_ERROR? res.log: err;
    s_print (path, status, log, res.key, res.cache_hit, res.seconds, arch);
    cuda_nvrtc_result_free (&res);
    return rc == NVRTC_OK;
#else
    (void) cache; (void) prog; (void) timeout_s;
    s_print (path, "invalid", "this build has no CUDA backend", "", false, 0, arch);
    return false;
#endif
}

static bool
s_compile_cpu (worker_cache_t *cache, const char *path, const common_program_t *prog, double timeout_s)
{
    char err [512] = "";
    if (cpu_cc_check_options (prog->options, prog->noptions, err, sizeof err)) {
        s_print (path, "invalid", err, "", false, 0, NULL);
        return false;
    }
    sandbox_config_t sandbox;
    sandbox_config_default (&sandbox);
    cpu_cc_result_t res;
    memset (&res, 0, sizeof res);
    int rc = cpu_cc_compile (cache, &sandbox, prog->source, prog->options, prog->noptions,
                                timeout_s, &res, err, sizeof err);
    const char *status = rc == 0? "ok": rc == 1 || rc == 2? "compile_error": "internal_error";
    char timeout_log [64];
    const char *log = rc == 0 || rc == 1? res.log: err;
    if (rc == 2 && !*err) {
        snprintf (timeout_log, sizeof timeout_log, "compile timed out after %g s", timeout_s);
        log = timeout_log;
    }
    s_print (path, status, log, res.key, res.cache_hit, res.seconds, NULL);
    cpu_cc_result_free (&res);
    return rc == 0;
}

int
kgym_compile_main (int argc, char **argv)
{
    const char *arch = NULL, *cache_path = NULL, *task_path = NULL;
    const char **candidates = calloc ((size_t) argc + 1, sizeof (char *));
    size_t ncandidates = 0;
    double timeout_s = 30.0;
    if (!candidates)
        return 2;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv [i];
        if ((streq (arg, "--arch") || streq (arg, "--cache") || streq (arg, "--timeout"))
        &&  i + 1 == argc) {
            fprintf (stderr, "kgym compile: %s needs a value\n", arg);
            free (candidates);
            return 2;
        }
        if (strcmp (arg, "--arch") == 0 && i + 1 < argc)
            arch = argv [++i];
        else if (strcmp (arg, "--cache") == 0 && i + 1 < argc)
            cache_path = argv [++i];
        else if (strcmp (arg, "--timeout") == 0 && i + 1 < argc) {
            if (client_options_real ("compile", "--timeout", argv [++i], 0, true, 600, "seconds",
                                     &timeout_s)) {
                free (candidates);
                return 2;
            }
        }
        else if (strcmp (arg, "-h") == 0 || strcmp (arg, "--help") == 0) {
            s_usage (stdout);
            free (candidates);
            return 0;
        }
        else if (arg [0] == '-' && arg [1]) {
            fprintf (stderr, "kgym compile: unknown option '%s'\n", arg);
            s_usage (stderr);
            free (candidates);
            return 2;
        }
        else if (!task_path)
            task_path = arg;
        else
            candidates [ncandidates++] = arg;
    }
    if (!task_path || ncandidates == 0) {
        s_usage (stderr);
        free (candidates);
        return 2;
    }
    char err [512] = "";
    json_t *task_json = common_json_load_file (task_path, MAX_JSON, err, sizeof err);
    common_task_t *task = task_json? common_task_from_json (task_json, err, sizeof err): NULL;
    json_decref (task_json);
    if (!task) {
        fprintf (stderr, "kgym compile: %s: %s\n", task_path, err);
        free (candidates);
        return 2;
    }
    bool cuda = strcmp (task->backend, "cuda") == 0;
    char probed [16] = "sm_90";
#if KGYM_HAVE_CUDA
    if (cuda && arch && cuda_nvrtc_check_arch (arch)) {
        fprintf (stderr, "kgym compile: --arch '%s' is not of the form sm_XX\n", arch);
        common_task_destroy (&task);
        free (candidates);
        return 2;
    }
    //  The GPU's own arch, asked of a runner so this process stays free of CUDA.
    if (cuda && !arch) {
        char why [256];
        if (cuda_backend_probe (0, probed, sizeof probed, NULL, why, sizeof why) != 0)
            snprintf (probed, sizeof probed, "sm_90");
    }
#endif
    if (cuda && !arch)
        arch = probed;

    char *path = worker_cache_default_path (cache_path);
    worker_cache_t *cache = path? worker_cache_new (path, WORKER_CACHE_DEFAULT_MAX, err, sizeof err): NULL;
    if (!cache)
        fprintf (stderr, "kgym compile: no compile cache (%s); compiling anyway\n", err);
    free (path);

    bool all_ok = true;
    for (size_t i = 0; i < ncandidates; i++) {
        json_t *json = common_json_load_file (candidates [i], MAX_JSON, err, sizeof err);
        common_program_t *prog = json? common_program_from_json (json, task->backend, err, sizeof err): NULL;
        json_decref (json);
        if (!prog || common_program_check (task, prog, err, sizeof err)) {
            s_print (candidates [i], "invalid", err, "", false, 0, cuda? arch: NULL);
            common_program_destroy (&prog);
            all_ok = false;
            continue;
        }
        bool ok = cuda? s_compile_cuda (cache, candidates [i], prog, arch, timeout_s)
                      : s_compile_cpu (cache, candidates [i], prog, timeout_s);
        all_ok &= ok;
        common_program_destroy (&prog);
    }
    worker_cache_destroy (&cache);
    common_task_destroy (&task);
    free (candidates);
    return all_ok? 0: 1;
}
