/*  kgym_eval - `kgym eval`: grade candidates here, with no servers.

    The same evaluator the workers run (worker_eval), each kernel in its
    sandbox; one JSON line per candidate in the order given, or with
    --profile the readable block of client_format.
*/
#include "kgym_eval.h"
#include "kgym_cli.h"
#include "client_kgym.h"
#include "client_format.h"
#include "client_options.h"
#include "common_task.h"
#include "worker_eval.h"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: kgym eval [--timeout S] [--compile-timeout S] [--seed N] [--trials N] [--check-only]\n"
        "                 [--no-profile] [--cache PATH] [--profile [--json]] [--backend TARGET]\n"
        "                 [--python PATH] TASK CANDIDATE...\n"
        "  TASK and CANDIDATE are JSON files, or KernelBench-format .py modules (a PyTorch task\n"
        "  runs on --backend, by default the GPU when there is one, else the CPU; --python\n"
        "  names the interpreter with torch, default $KGYM_PYTHON or /usr/bin/python3)\n"
        "  grade candidates locally, each in its sandbox; one JSON line per candidate\n"
        "  (--profile: a readable block with feedback and per-kernel table instead;\n"
        "  with --json too, JSON lines on stdout and the blocks on stderr)\n");
}

//  Parsed options.
typedef struct {
    json_t *eval;               //  eval overrides (owned)
    bool table;                 //  --profile: the readable blocks
    bool json_lines;            //  --json: with --profile, keep the JSON lines on stdout
    const char *cache;          //  --cache PATH, or NULL
    const char *backend;        //  --backend: the task's target instead of its own
    const char *python;         //  --python: the python backend's interpreter
} s_options_t;

//  Parse into opts (its eval to release); 0, 1 after --help, or 2 on a
//  usage error (said). optind is left at the operands.
static int
s_parse (int argc, char **argv, s_options_t *opts)
{
    static struct option options[] = {
        { "timeout", required_argument, 0, 't' }, { "compile-timeout", required_argument, 0, 'C' },
        { "seed", required_argument, 0, 's' },
        { "trials", required_argument, 0, 'n' }, { "check-only", no_argument, 0, 'k' },
        { "cache", required_argument, 0, 'c' }, { "profile", no_argument, 0, 'p' },
        { "json", no_argument, 0, 'j' }, { "no-profile", no_argument, 0, 'P' },
        { "backend", required_argument, 0, 'b' }, { "python", required_argument, 0, 'y' },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 }
    };
    memset (opts, 0, sizeof (*opts));
    opts->eval = json_object ();
    if (!opts->eval)
        return 2;
    double seconds;
    long long number;
    int opt;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
            case 't':
                if (client_options_real ("eval", "--timeout", optarg, 0, true,
                                         CLIENT_OPTIONS_MAX_TIMEOUT, "seconds", &seconds))
                    return 2;
                json_object_set_new (opts->eval, "timeout", json_real (seconds));
                break;
            case 'C':
                //  The task format's bound on a compile (docs/task-format.md).
                if (client_options_real ("eval", "--compile-timeout", optarg, 0, true, 600,
                                         "seconds", &seconds))
                    return 2;
                json_object_set_new (opts->eval, "compile_timeout", json_real (seconds));
                break;
            case 's':
                if (client_options_int ("eval", "--seed", optarg, 0, INT64_MAX, &number))
                    return 2;
                json_object_set_new (opts->eval, "seed", json_integer ((json_int_t) number));
                break;
            case 'n':
                if (client_options_int ("eval", "--trials", optarg, 1, TASK_MAX_TRIALS, &number))
                    return 2;
                json_object_set_new (opts->eval, "trials", json_integer ((json_int_t) number));
                break;
            case 'k': json_object_set_new (opts->eval, "check_only", json_true ()); break;
            case 'c': opts->cache = optarg; break;
            case 'b': opts->backend = optarg; break;
            case 'y': opts->python = optarg; break;
            case 'p': opts->table = true; break;
            case 'j': opts->json_lines = true; break;
            case 'P': json_object_set_new (opts->eval, "profile", json_false ()); break;
            case 'h': s_usage (stdout); return 1;
            default: s_usage (stderr); return 2;
        }
    }
    if (argc - optind < 2) {
        fprintf (stderr, "kgym eval: need a TASK and at least one CANDIDATE\n");
        return 2;
    }
    return 0;
}

int
kgym_eval_main (int argc, char **argv)
{
    s_options_t opts;
    int usage = s_parse (argc, argv, &opts);
    json_t *eval = opts.eval;
    if (usage) {
        json_decref (eval);
        return usage == 1? 0: usage;
    }
    bool table = opts.table, json_lines = opts.json_lines;
    json_t *task = kgym_cli_load (argv [optind], "task", opts.backend);
    if (!task) {
        json_decref (eval);
        return 1;
    }
    if (opts.backend && json_is_object (task))
        json_object_set_new (task, "backend", json_string (opts.backend));
    worker_eval_config_t cfg;
    worker_eval_config_default (&cfg);
    cfg.cache_path = opts.cache;
    cfg.worker_name = "kgym-eval";
    cfg.python = opts.python;
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
        json_t *candidate = kgym_cli_load (argv [i], "candidate", NULL);
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

