/*  kgym_compile - `kgym compile`: compile candidates without running them.

    A thin front: parse options, load the task, then per candidate parse,
    check against the task and compile through the task's backend
    (worker_backend.h: its compile), printing one JSON line each.
*/
#include "kgym_compile.h"
#include "kgym_config.h"
#include "client_options.h"
#include "common_task.h"
#include "worker_cache.h"
#include "worker_registry.h"
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
    const worker_backend_t *backend = worker_registry_find (task->backend, task->reference.lang);
    if (!backend) {
        fprintf (stderr, "kgym compile: %s: no backend of this build compiles '%s' programs for '%s'\n",
                 task_path, task->reference.lang? task->reference.lang: "?", task->backend);
        common_task_destroy (&task);
        free (candidates);
        return 2;
    }
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
            s_print (candidates [i], "invalid", err, "", false, 0, arch);
            common_program_destroy (&prog);
            all_ok = false;
            continue;
        }
        worker_compile_t res;
        memset (&res, 0, sizeof res);
        if (backend->compile)
            backend->compile (cache, prog, arch, timeout_s, &res);
        s_print (candidates [i], worker_status_name (res.status), res.log, res.key, res.cache_hit,
                 res.seconds, res.target [0]? res.target: NULL);
        all_ok &= res.status == STATUS_OK;
        worker_compile_clear (&res);
        common_program_destroy (&prog);
    }
    worker_cache_destroy (&cache);
    common_task_destroy (&task);
    free (candidates);
    return all_ok? 0: 1;
}
