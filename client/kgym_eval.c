/*  kgym_eval - `kgym eval`: grade candidates here, with no servers.

    The same evaluator the workers run (worker_eval), each kernel in its
    sandbox; one JSON line per candidate in the order given, or with
    --profile the readable block of client_format.
*/
#include "kgym_eval.h"
#include "kgym_cli.h"
#include "client_kgym.h"
#include "client_format.h"
#include "worker_eval.h"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static void
s_usage (FILE *out)
{
    fprintf (out,
        "usage: kgym eval [--timeout S] [--seed N] [--trials N] [--check-only] [--no-profile]\n"
        "                 [--cache PATH] [--profile [--json]] TASK CANDIDATE...\n"
        "  grade candidates locally, each in its sandbox; one JSON line per candidate\n"
        "  (--profile: a readable block with feedback and per-kernel table instead;\n"
        "  with --json too, JSON lines on stdout and the blocks on stderr)\n");
}

int
kgym_eval_main (int argc, char **argv)
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

