/*  kgym - the command-line client.

    kgym eval    [--timeout S] [--seed N] TASK CANDIDATE...   grade locally, no servers
    kgym submit  --broker EP [--timeout S] TASK CANDIDATE...  grade through a broker
    kgym compile [--arch sm_XX] TASK CANDIDATE...            compile only
    kgym demo                                                the bundled examples, end to end
    kgym cache   stats|clear [--cache PATH]                  the compile cache
    kgym workers|stats|job|jobs|results|tasks --broker EP    what the broker knows
    kgym cache   stats --broker EP                           the broker's result cache
    kgym drain|fetch|keygen                                  operators' requests

    Results are JSON lines on stdout, one per candidate. Exit status 0 when
    every job was graded (whatever the verdicts), non-zero with a one-line
    reason on stderr when the tool itself could not do its work.
*/
#include "kgym_cli.h"
#include "worker_registry.h"
#include "client_submit.h"
#include "client_admin.h"
#include "client_query.h"
#include "client_kgym.h"
#include "client_format.h"
#include "worker_eval.h"
#include "worker_cache.h"
#include "common_task.h"
#include "common_log.h"
#include "kgym_config.h"
#include "kgym_compile.h"
#include <getopt.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KGYM_MAX_FILE (16u << 20)

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: kgym COMMAND [options]\n"
        "  eval    [--timeout S] [--seed N] [--trials N] [--check-only] [--no-profile] [--cache PATH]\n"
        "          [--profile [--json]] TASK CANDIDATE...\n"
        "          grade candidates locally, each in its sandbox; one JSON line per candidate\n"
        "          (--profile: a readable block with feedback and per-kernel table instead;\n"
        "          with --json too, JSON lines on stdout and the blocks on stderr)\n"
        "  submit  --broker EP [--timeout S] [--seed N] [--group G [--group-size N]]\n"
        "          [--trajectory X] [--cache use|refresh|bypass] TASK CANDIDATE...   (or --batch FILE)\n"
        "          grade through a broker; JSON lines in completion order (a result the\n"
        "          broker's cache answered has \"cached\": true)\n"
        "  compile [--arch sm_XX] [--cache PATH] TASK CANDIDATE...\n"
        "          compile without running; JSON lines with status, log and cache key\n"
        "  demo    [--workers N] [--examples DIR]\n"
        "          start a broker and local workers, grade the bundled examples, print a table\n"
        "  cache   stats|clear [--cache PATH]   the local compile cache\n"
        "  cache   stats --broker EP [--json]   the broker's result cache\n"
        "  workers --broker EP [--json]        one row per worker: host, device, state, jobs, faults\n"
        "  stats   --broker EP [--json] [--watch [S]]   queue, workers, rates, pass and cache hit rates\n"
        "  job     --broker EP ID              a job and its result (JSON line)\n"
        "  jobs    --broker EP (--tag T | --group G | --trajectory X) [--limit N] [--results]\n"
        "  results --broker EP --task NAME [--limit N]   a task's latest results (JSON lines)\n"
        "  tasks   --broker EP [--band LO,HI] [--min-attempts N]   per-task statistics (JSON lines)\n"
        "          (job, jobs, results, tasks: --table for columns instead of JSON lines)\n"
        "  drain   --broker EP WORKER...   let workers finish their jobs, take no new ones, and leave\n"
        "  fetch   --broker EP --client-id ID [--job N | --tag T]   results the broker kept\n"

        "  keygen  [--name NAME] PATH      a CURVE certificate pair (PATH and PATH_secret)\n"
        "  version\n");
}

json_t *
kgym_cli_job (json_t *task, json_t *candidate, json_t *eval)
{
    json_t *job = json_object ();
    json_object_set (job, "task", task);
    json_object_set (job, "candidate", candidate);
    if (eval && json_object_size (eval))
        json_object_set (job, "eval", eval);
    return job;
}

json_t *
kgym_cli_load (const char *path, const char *what)
{
    char err [512];
    json_t *json = common_json_load_file (path, KGYM_MAX_FILE, err, sizeof err);
    if (!json)
        fprintf (stderr, "kgym: cannot read %s %s: %s\n", what, path, err);
    return json;
}

static int
s_eval (int argc, char **argv)
{
    static struct option options[] = {
        { "timeout", required_argument, 0, 't' }, { "seed", required_argument, 0, 's' },
        { "trials", required_argument, 0, 'n' }, { "check-only", no_argument, 0, 'k' },
        { "cache", required_argument, 0, 'c' }, { "profile", no_argument, 0, 'p' },
        { "json", no_argument, 0, 'j' }, { "no-profile", no_argument, 0, 'P' },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
    };
    json_t *eval = json_object ();
    bool table = false, json_lines = false;
    const char *cache = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
            case 't': json_object_set_new (eval, "timeout", json_real (atof (optarg))); break;
            case 's': json_object_set_new (eval, "seed", json_integer (strtoll (optarg, NULL, 10))); break;
            case 'n': json_object_set_new (eval, "trials", json_integer (atoi (optarg))); break;
            case 'k': json_object_set_new (eval, "check_only", json_true ()); break;
            case 'c': cache = optarg; break;
            case 'p': table = true; break;
            case 'j': json_lines = true; break;
            case 'P': json_object_set_new (eval, "profile", json_false ()); break;
            case 'h': s_usage (stdout); json_decref (eval); return 0;
            default: json_decref (eval); return 2;
        }
    }
    if (argc - optind < 2) {
        fprintf (stderr, "kgym eval: need a TASK and at least one CANDIDATE\n");
        json_decref (eval);
        return 2;
    }
    json_t *task = kgym_cli_load (argv [optind], "task");
    if (!task) {
        json_decref (eval);
        return 1;
    }
    worker_eval_config_t cfg;
    worker_eval_config_default (&cfg);
    cfg.cache_path = cache;
    cfg.worker_name = "kgym-eval";
    char err [512] = "";
    worker_eval_t *evaluator = worker_eval_new (&cfg, err, sizeof err);
    if (!evaluator) {
        fprintf (stderr, "kgym eval: %s\n", err);
        json_decref (task);
        json_decref (eval);
        return 1;
    }
    int rc = 0;
    for (int i = optind + 1; i < argc && rc == 0; i++) {
        json_t *candidate = kgym_cli_load (argv [i], "candidate");
        if (!candidate) {
            rc = 1;
            break;
        }
        json_t *job = kgym_cli_job (task, candidate, eval);
        json_t *result = worker_eval_run (evaluator, job);
        json_t *line = result? client_result_line (result, argv [i]): NULL;
        char *text = line? json_dumps (line, JSON_COMPACT | JSON_PRESERVE_ORDER): NULL;
        if (text) {
            //  --profile alone: the readable block on stdout; with --json the
            //  JSON lines keep stdout and the blocks go to stderr.
            if (!table || json_lines)
                printf ("%s\n", text);
            if (table)
                client_format_profile (result, argv [i], json_lines? stderr: stdout);
            fflush (stdout);
        }
        else {
            fprintf (stderr, "kgym eval: no result for %s\n", argv [i]);
            rc = 1;
        }
        free (text);
        json_decref (line);
        json_decref (result);
        json_decref (job);
        json_decref (candidate);
    }
    worker_eval_destroy (&evaluator);
    json_decref (task);
    json_decref (eval);
    return rc;
}

static int
s_cache (int argc, char **argv)
{
    static struct option options[] = {
        { "cache", required_argument, 0, 'c' }, { 0, 0, 0, 0 }
    };
    const char *explicit_path = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "", options, NULL)) != -1) {
        if (opt == 'c')
            explicit_path = optarg;
        else
            return 2;
    }
    const char *action = optind < argc? argv [optind]: "stats";
    char *path = worker_cache_default_path (explicit_path);
    char err [256] = "";
    worker_cache_t *cache = path? worker_cache_new (path, WORKER_CACHE_DEFAULT_MAX, err, sizeof err): NULL;
    if (!cache) {
        fprintf (stderr, "kgym cache: cannot open %s: %s\n", path? path: "(no path)", err);
        free (path);
        return 1;
    }
    int rc = 0;
    if (streq (action, "stats")) {
        uint64_t entries = 0, bytes = 0, hits = 0, misses = 0;
        worker_cache_stats (cache, &entries, &bytes, &hits, &misses);
        printf ("{\"path\":\"%s\",\"entries\":%llu,\"bytes\":%llu}\n", path,
                (unsigned long long) entries, (unsigned long long) bytes);
    }
    else
    if (streq (action, "clear")) {
        rc = worker_cache_clear (cache) == 0? 0: 1;
        if (rc)
            fprintf (stderr, "kgym cache: could not clear %s\n", path);
    }
    else {
        fprintf (stderr, "kgym cache: unknown action '%s' (stats or clear)\n", action);
        rc = 2;
    }
    worker_cache_destroy (&cache);
    free (path);
    return rc;
}

//  True when the arguments name a broker: `kgym cache` is then the
//  broker's result cache rather than the local compile cache.
static bool
s_has_broker (int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (streq (argv [i], "--broker") || strncmp (argv [i], "--broker=", 9) == 0)
            return true;
    return false;
}

int
main (int argc, char **argv)
{
    if (argc < 2) {
        s_usage (stderr);
        return 2;
    }
    //  Quiet by default: the output is JSON lines, logs only when asked.
    if (!getenv ("KGYM_LOG"))
        common_log_set_level (LOG_LEVEL_WARN);
    const char *command = argv [1];
    //  eval and demo run sandboxes: reap what they orphan, even where PID 1 does not.
    prctl (PR_SET_CHILD_SUBREAPER, 1);
    //  Tasks are parsed against the backends this build has.
    worker_registry_all ();
    if (streq (command, "eval"))
        return s_eval (argc - 1, argv + 1);
    if (streq (command, "submit"))
        return client_submit_main (argc - 1, argv + 1);
    if (streq (command, "demo"))
        return kgym_demo_main (argc - 1, argv + 1);
    if (streq (command, "cache") && s_has_broker (argc, argv))
        return client_query_main (argc - 1, argv + 1);
    if (streq (command, "cache"))
        return s_cache (argc - 1, argv + 1);
    if (client_query_handles (command))
        return client_query_main (argc - 1, argv + 1);
    if (streq (command, "drain") || streq (command, "fetch") || streq (command, "keygen"))
        return client_admin_main (argc - 1, argv + 1);
    if (streq (command, "compile"))
        return kgym_compile_main (argc - 1, argv + 1);
    if (streq (command, "version") || streq (command, "--version")) {
        printf ("kgym %s\n", KGYM_VERSION);
        return 0;
    }
    if (streq (command, "help") || streq (command, "--help") || streq (command, "-h")) {
        s_usage (stdout);
        return 0;
    }
    fprintf (stderr, "kgym: unknown command '%s'\n", command);
    s_usage (stderr);
    return 2;
}
