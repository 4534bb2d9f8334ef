/*  client_admin - the operator's subcommands of `kgym`: drain, fetch, keygen.

    Each is a short conversation through client_kgym: send one request,
    wait for its DONE (or an ERROR) within --timeout, say what came.
*/
#include "client_admin.h"
#include "client_kgym.h"
#include "client_options.h"
#include "proto_curve.h"
#include "common_log.h"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  Options of drain, fetch and keygen.
typedef struct {
    client_options_t conn;      //  --broker, CURVE, --timeout S (the wait for the reply)
    const char *client_id;      //  --client-id ID (fetch)
    const char *tag;            //  --tag T (fetch)
    uint64_t job;               //  --job N (fetch)
    const char *name;           //  --name NAME (keygen)
} s_options_t;

//  The usage of command ("drain", "fetch", "keygen"; anything else: all three).
static void
s_usage (FILE *out, const char *command)
{
    bool all = !streq (command, "drain") && !streq (command, "fetch") && !streq (command, "keygen");
    if (all || streq (command, "drain"))
        fprintf (out,
            "usage: kgym drain --broker EP [--curve-secret FILE --broker-key FILE] [--timeout S]\n"
            "                  WORKER...\n"
            "  each named worker finishes the jobs it holds, takes no new ones, and leaves\n");
    if (all || streq (command, "fetch"))
        fprintf (out,
            "usage: kgym fetch --broker EP --client-id ID [--job N | --tag T]\n"
            "                  [--curve-secret FILE --broker-key FILE] [--timeout S]\n"
            "  the kept results of a client's jobs, one JSON line each; its waiting jobs stay\n");
    if (all || streq (command, "keygen"))
        fprintf (out,
            "usage: kgym keygen [--name NAME] PATH\n"
            "  a CURVE certificate pair: PATH (public) and PATH_secret (mode 0600)\n");
    if (!streq (command, "keygen"))
        fprintf (out, "  --broker defaults to $KGYM_BROKER; --timeout S: the wait for the reply"
                      " (default 10)\n");
}

//  Parse; 0, 1 after --help, or 2 on a usage error (said on stderr).
//  optind is left at the operands.
static int
s_parse (int argc, char **argv, s_options_t *opts)
{
    memset (opts, 0, sizeof (*opts));
    client_options_init (&opts->conn, argv [0], 10);
    static const struct option options [] = {
        CLIENT_OPTIONS_LONG,
        { "client-id", required_argument, NULL, 'i' },
        { "tag", required_argument, NULL, 'g' },
        { "job", required_argument, NULL, 'j' },
        { "name", required_argument, NULL, 'n' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 }
    };
    optind = 0;
    int opt;
    while ((opt = getopt_long (argc, argv, "h", options, NULL)) != -1) {
        int taken = client_options_take (&opts->conn, opt, optarg);
        if (taken < 0)
            return 2;
        if (taken)
            continue;
        switch (opt) {
            case 'i': opts->client_id = optarg; break;
            case 'g': opts->tag = optarg; break;
            case 'n': opts->name = optarg; break;
            case 'j': {
                long long value;
                if (client_options_int (argv [0], "--job", optarg, 1, INT64_MAX, &value))
                    return 2;
                opts->job = (uint64_t) value;
                break;
            }
            case 'h':
                s_usage (stdout, argv [0]);
                return 1;
            default:
                s_usage (stderr, argv [0]);
                return 2;
        }
    }
    return client_options_check (&opts->conn, false);
}

static client_kgym_t *
s_connect (const s_options_t *opts)
{
    client_kgym_config_t cfg;
    client_kgym_config_default (&cfg);
    cfg.client_id = opts->client_id;
    //  fetch borrows a trainer's id: leaving must not drop its waiting jobs.
    cfg.keep_jobs = opts->client_id != NULL;
    return client_options_connect (&opts->conn, &cfg);
}

//  Wait for the reply to request ref: the DONE event (0), an ERROR (1, said),
//  or nothing in time (1, said). Results on the way are printed when print.
static int
s_wait_done (client_kgym_t *client, const s_options_t *opts, const char *command, uint64_t ref,
             const char *what, bool print, client_event_t *done)
{
    int64_t deadline = zclock_mono () + (int64_t) (opts->conn.timeout_s * 1000);
    while (true) {
        int64_t left = deadline - zclock_mono ();
        client_event_t event;
        if (left <= 0 || client_kgym_recv (client, (int) left, &event)) {
            fprintf (stderr, "kgym %s: no answer from the broker at %s within %g s\n", command,
                     opts->conn.broker, opts->conn.timeout_s);
            return 1;
        }
        if (event.type == CLIENT_EVENT_DONE && event.ref == ref) {
            *done = event;
            return 0;
        }
        if (event.type == CLIENT_EVENT_REFUSED) {
            fprintf (stderr, "kgym %s: the broker at %s: %s\n", command, opts->conn.broker,
                     event.reason);
            client_event_clear (&event);
            return 1;
        }
        if (event.type == CLIENT_EVENT_ERROR && event.local && event.ref != ref) {
            //  A kept result that does not decode: said, the fetch goes on.
            fprintf (stderr, "kgym %s: job %llu: %s\n", command, (unsigned long long) event.job,
                     event.reason);
            client_event_clear (&event);
            continue;
        }
        if (event.type == CLIENT_EVENT_ERROR && (event.ref == ref || event.ref == 0)) {
            fprintf (stderr, "kgym %s: %s: broker error %u: %s\n", command, what, event.code,
                     event.reason);
            client_event_clear (&event);
            return 1;
        }
        if (event.type == CLIENT_EVENT_RESULT && print) {
            char label [64];
            snprintf (label, sizeof (label), "job %llu", (unsigned long long) event.job);
            json_t *line = client_result_line (event.result, label);
            char *text = line? json_dumps (line, JSON_COMPACT): NULL;
            if (text)
                printf ("%s\n", text);
            free (text);
            json_decref (line);
        }
        client_event_clear (&event);
    }
}

static int
s_drain (int argc, char **argv)
{
    s_options_t opts;
    int usage = s_parse (argc, argv, &opts);
    if (usage)
        return usage == 1? 0: usage;
    if (!opts.conn.broker || optind >= argc) {
        fprintf (stderr, "kgym drain: needs --broker EP and at least one WORKER name\n");
        return 2;
    }
    client_kgym_t *client = s_connect (&opts);
    if (!client)
        return 1;
    int rc = 0;
    for (int i = optind; i < argc; i++) {
        char err [256];
        uint64_t ref = (uint64_t) (i - optind + 1);
        client_event_t done;
        if (client_kgym_drain (client, ref, argv [i], err, sizeof (err))) {
            fprintf (stderr, "kgym drain: %s: %s\n", argv [i], err);
            rc = 1;
        }
        else
        if (s_wait_done (client, &opts, "drain", ref, argv [i], false, &done))
            rc = 1;
        else
            fprintf (stderr, "kgym drain: %s: %u worker(s) draining\n", argv [i], done.count);
    }
    client_kgym_destroy (&client);
    return rc;
}

static int
s_fetch (int argc, char **argv)
{
    s_options_t opts;
    int usage = s_parse (argc, argv, &opts);
    if (usage)
        return usage == 1? 0: usage;
    if (!opts.conn.broker || !opts.client_id || optind < argc || (opts.job && opts.tag)) {
        fprintf (stderr, "kgym fetch: needs --broker EP and --client-id ID, and at most one of"
                         " --job and --tag\n");
        return 2;
    }
    client_kgym_t *client = s_connect (&opts);
    if (!client)
        return 1;
    char err [256];
    client_event_t done;
    int rc = 1;
    if (client_kgym_fetch (client, 1, opts.job, opts.tag, err, sizeof (err)))
        fprintf (stderr, "kgym fetch: %s\n", err);
    else
    if (s_wait_done (client, &opts, "fetch", 1, "fetch", true, &done) == 0) {
        fflush (stdout);
        fprintf (stderr, "kgym fetch: %u result(s); %u matching job(s) not finished yet\n",
                 done.count, done.pending);
        rc = 0;
    }
    client_kgym_destroy (&client);
    return rc;
}

static int
s_keygen (int argc, char **argv)
{
    s_options_t opts;
    int usage = s_parse (argc, argv, &opts);
    if (usage)
        return usage == 1? 0: usage;
    if (optind != argc - 1) {
        fprintf (stderr, "kgym keygen: needs one PATH\n");
        return 2;
    }
    const char *path = argv [optind];
    char err [512];
    if (proto_curve_keygen (path, opts.name, err, sizeof (err))) {
        fprintf (stderr, "kgym keygen: %s\n", err);
        return 1;
    }
    fprintf (stderr, "kgym keygen: wrote %s (public) and %s_secret (secret)\n", path, path);
    return 0;
}

int
client_admin_main (int argc, char **argv)
{
    if (argc < 1 || !argv [0]) {
        s_usage (stderr, "");
        return 2;
    }
    if (streq (argv [0], "drain"))
        return s_drain (argc, argv);
    if (streq (argv [0], "fetch"))
        return s_fetch (argc, argv);
    if (streq (argv [0], "keygen"))
        return s_keygen (argc, argv);
    s_usage (stderr, "");
    return 2;
}
