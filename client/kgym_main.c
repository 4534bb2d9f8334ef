/*  kgym - the command-line client.

    kgym eval    [--timeout S] [--seed N] TASK CANDIDATE...   grade locally, no servers
    kgym submit  --broker EP [--timeout S] TASK CANDIDATE...  grade through a broker
    kgym compile [--arch sm_XX] TASK CANDIDATE...            compile only
    kgym import  kernelbench [--out DIR] [--check] PATH...   datasets become task files
    kgym prompt  [--lang L] [--format F] TASK                the policy's prompt for a task
    kgym demo                                                the bundled examples, end to end
    kgym cache   stats|clear [--cache PATH]                  the compile cache
    kgym workers|stats|job|jobs|results|tasks --broker EP    what the broker knows
    kgym cache   stats --broker EP                           the broker's result cache
    kgym drain|fetch|keygen                                  operators' requests

    Results are JSON lines on stdout, one per candidate. Exit status 0 when
    every job was graded (whatever the verdicts), non-zero with a one-line
    reason on stderr when the tool itself could not do its work.

    A thin main: it picks the subcommand and hands over to its module
    (kgym_eval, kgym_cache, kgym_compile, kgym_demo, client_submit,
    client_query, client_admin, client_import, client_prompt).
*/
#include "worker_registry.h"
#include "client_submit.h"
#include "client_import.h"
#include "client_prompt.h"
#include "client_admin.h"
#include "client_query.h"
#include "common_log.h"
#include "kgym_config.h"
#include "kgym_cache.h"
#include "kgym_compile.h"
#include "kgym_demo.h"
#include "kgym_eval.h"
#include <czmq.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        "          [--trajectory X] [--cache use|refresh|bypass] [--deadline S]\n"
        "          TASK CANDIDATE...   (or --batch FILE|-)\n"
        "          grade through a broker; JSON lines in completion order (a result the\n"
        "          broker's cache answered has \"cached\": true)\n"
        "  compile [--arch sm_XX] [--cache PATH] TASK CANDIDATE...\n"
        "          compile without running; JSON lines with status, log and cache key\n"
        "  import  kernelbench [--out DIR] [--check] [--backend T] [--dtype D] [--kernel K] PATH...\n"
        "          KernelBench-format problems (.py, JSON lines with \"code\", folders) become\n"
        "          task files; one JSON line per problem, a summary on stderr\n"
        "  prompt  [--lang triton|cuda|c|ptx] [--format text|json|chat] [--gpu NAME]\n"
        "          [--feedback RESULT.json] TASK\n"
        "          the policy's prompt for a task (the wording kgym.prompt uses too)\n"
        "  demo    [--workers N] [--examples DIR] [--backend TARGET] [--timeout S]\n"
        "          start a broker and local workers, grade the bundled examples, print a table\n"
        "          (exit 1 when a candidate misses its expected status)\n"
        "  cache   stats|clear [--cache PATH]   the local compile cache\n"
        "  cache   stats --broker EP [--json]   the broker's result cache\n"
        "  workers --broker EP [--json]        one row per worker: host, device, state, jobs, faults\n"
        "  stats   --broker EP [--json] [--watch [S]]   queue, workers, rates, pass and cache hit rates\n"
        "  job     --broker EP ID              a job and its result (JSON line; exit 1 if unknown)\n"
        "  jobs    --broker EP (--tag T | --group G | --trajectory X) [--limit N] [--results]\n"
        "  results --broker EP --task NAME [--limit N]   a task's latest results (JSON lines)\n"
        "  tasks   --broker EP [--band LO,HI] [--min-attempts N]   per-task statistics (JSON lines)\n"
        "          (job, jobs, results, tasks: --table for columns instead of JSON lines)\n"
        "  drain   --broker EP WORKER...   let workers finish their jobs, take no new ones, and leave\n"
        "  fetch   --broker EP --client-id ID [--job N | --tag T]   results the broker kept\n"
        "  keygen  [--name NAME] PATH      a CURVE certificate pair (PATH and PATH_secret)\n"
        "  version\n"
        "kgym COMMAND --help: the command's own usage. --broker EP defaults to $KGYM_BROKER.\n"
        "Exit status: 2 on a usage error; 1 with a one-line reason on stderr when the command\n"
        "could not do its work (compile: a candidate did not compile; demo: a status not as\n"
        "expected); else 0, whatever the kernels' verdicts.\n");
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
        return kgym_eval_main (argc - 1, argv + 1);
    if (streq (command, "submit"))
        return client_submit_main (argc - 1, argv + 1);
    if (streq (command, "demo"))
        return kgym_demo_main (argc - 1, argv + 1);
    if (streq (command, "cache") && s_has_broker (argc, argv))
        return client_query_main (argc - 1, argv + 1);
    if (streq (command, "cache"))
        return kgym_cache_main (argc - 1, argv + 1);
    if (client_query_handles (command))
        return client_query_main (argc - 1, argv + 1);
    if (streq (command, "drain") || streq (command, "fetch") || streq (command, "keygen"))
        return client_admin_main (argc - 1, argv + 1);
    if (streq (command, "prompt"))
        return client_prompt_main (argc - 1, argv + 1);
    if (streq (command, "import"))
        return client_import_main (argc - 1, argv + 1);
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
