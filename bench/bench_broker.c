/*  bench_broker - throughput and latency of job routing through one broker.

    Starts the broker actor in-process, N fake workers (actors with DEALER
    sockets that answer each JOB at once with a fixed tiny result) and one
    client that submits M trivial jobs keeping a bounded window in flight,
    all over tcp loopback. Reports jobs/s and submit->result latency
    percentiles for each N. Bodies are never decoded on the way, as in a
    real run; the client speaks proto_msg directly so the figure is the
    broker's, not the JSON codec's.

    With --db PATH the broker keeps every job in that SQLite file (removed
    before each run), as `kgym-broker --db` does: each SUBMIT is a row
    committed before its ACCEPTED, each RESULT an update of it (--sync full
    fsyncs every commit). The client then names itself (a client id in
    every SUBMIT), as client_kgym does, so the broker's per-client index is
    on the path too.

    bench_broker [--jobs M] [--window W] [--capacity C] [--workers 1,2,4]
                 [--db PATH [--sync full]]
*/
#include "broker_server.h"
#include "proto_msg.h"
#include "proto_mpk.h"
#include "common_log.h"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t
s_now_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

//  What a fake worker needs.
static const char *s_cache_policy = "bypass";    //  SUBMIT's cache (--cache)

typedef struct {
    const char *endpoint;       //  broker's worker endpoint
    uint32_t capacity;          //  advertised in READY
    int index;                  //  for its name
} s_worker_args_t;

//  A fake worker: READY, then a fixed RESULT for every JOB, at once.
static void
s_fake_worker (zsock_t *pipe, void *args)
{
    s_worker_args_t *wa = (s_worker_args_t *) args;
    zsock_t *sock = zsock_new (ZMQ_DEALER);
    proto_sock_configure (sock, false);
    zsock_connect (sock, "%s", wa->endpoint);
    proto_msg_t *in = proto_msg_new (0);
    proto_msg_t *out = proto_msg_new (PROTO_READY);
    proto_msg_set_str (out->backend, "cpu");
    proto_msg_set_str (out->device, "bench");
    snprintf (out->name, sizeof (out->name), "bench-%d", wa->index);
    out->capacity = wa->capacity;
    proto_msg_send (out, sock);
    //  {"status": "ok", "reward": 1.0}
    json_t *result = json_pack ("{s:s, s:f}", "status", "ok", "reward", 1.0);
    char *data;
    size_t size;
    proto_mpk_encode (result, &data, &size);
    json_decref (result);
    zframe_t *body = zframe_new (data, size);
    free (data);
    proto_msg_reset (out, PROTO_RESULT);
    proto_msg_set_body (out, &body);
    zsock_signal (pipe, 0);

    zpoller_t *poller = zpoller_new (pipe, sock, NULL);
    bool running = true;
    while (running) {
        void *which = zpoller_wait (poller, 1000);
        if (which == pipe || zpoller_terminated (poller))
            break;
        //  Drain everything that is there before polling again.
        while (zsock_events (sock) & ZMQ_POLLIN) {
            if (proto_msg_recv (in, sock) != 0)
                continue;
            if (in->cmd == PROTO_JOB) {
                out->job = in->job;
                out->attempt = in->attempt;
                proto_msg_send (out, sock);         //  the body is kept and resent
            }
            else
            if (in->cmd == PROTO_HEARTBEAT) {
                proto_msg_t *beat = proto_msg_new (PROTO_HEARTBEAT);
                proto_msg_send (beat, sock);
                proto_msg_destroy (&beat);
            }
        }
    }
    zpoller_destroy (&poller);
    proto_msg_destroy (&in);
    proto_msg_destroy (&out);
    zsock_destroy (&sock);
}

static int
s_compare_i64 (const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return x < y? -1: x > y? 1: 0;
}

//  One run with nworkers workers; prints a table row. 0 or -1.
static int
s_run (int nworkers, uint32_t jobs, uint32_t window, uint32_t capacity, const char *db, bool full)
{
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.clients_endpoint = "tcp://127.0.0.1:*";
    cfg.workers_endpoint = "tcp://127.0.0.1:*";
    cfg.max_queue = jobs + window;
    if (db) {
        //  A fresh file per run.
        char path [1100];
        const char *suffixes [] = { "", "-wal", "-shm" };
        for (int i = 0; i < 3; i++) {
            snprintf (path, sizeof (path), "%s%s", db, suffixes [i]);
            unlink (path);
        }
        cfg.db_path = db;
        cfg.db_full_sync = full;
    }
    zactor_t *broker = zactor_new (broker_server_actor, &cfg);
    char *clients = NULL, *workers = NULL;
    zstr_send (broker, "ENDPOINTS");
    zstr_recvx (broker, &clients, &workers, NULL);
    if (!clients || !*clients) {
        fprintf (stderr, "bench_broker: broker did not start: %s\n", workers? workers: "?");
        return -1;
    }
    zactor_t *fake [64];
    s_worker_args_t args [64];
    for (int i = 0; i < nworkers; i++) {
        args [i] = (s_worker_args_t) { workers, capacity, i };
        fake [i] = zactor_new (s_fake_worker, &args [i]);
    }
    zsock_t *client = zsock_new (ZMQ_DEALER);
    proto_sock_configure (client, false);
    zsock_connect (client, "%s", clients);

    //  A trivial job body: {"task": {"backend": "cpu"}, "candidate": {}}
    json_t *job = json_pack ("{s:{s:s}, s:{}}", "task", "backend", "cpu", "candidate");
    char *data;
    size_t size;
    proto_mpk_encode (job, &data, &size);
    json_decref (job);
    zframe_t *body = zframe_new (data, size);
    free (data);
    proto_msg_t *out = proto_msg_new (PROTO_SUBMIT);
    proto_msg_set_str (out->backend, "cpu");
    proto_msg_set_str (out->cache, s_cache_policy);
    if (db)
        proto_msg_set_str (out->client, "bench-client");
    proto_msg_set_body (out, &body);
    proto_msg_t *in = proto_msg_new (0);

    int64_t *sent_us = (int64_t *) calloc (jobs + 1, sizeof (int64_t));
    int64_t *latency_us = (int64_t *) calloc (jobs + 1, sizeof (int64_t));
    uint32_t next = 1, done = 0, inflight = 0, errors = 0;
    zpoller_t *poller = zpoller_new (client, NULL);
    int64_t start = s_now_us ();
    int64_t deadline = start + 120 * 1000000ll;
    while (done < jobs && s_now_us () < deadline) {
        while (next <= jobs && inflight < window) {
            out->ref = next;
            sent_us [next] = s_now_us ();
            proto_msg_send (out, client);
            next++;
            inflight++;
        }
        if (!(zsock_events (client) & ZMQ_POLLIN) && !zpoller_wait (poller, 1000))
            continue;
        while (zsock_events (client) & ZMQ_POLLIN) {
            if (proto_msg_recv (in, client) != 0)
                continue;
            if (in->cmd == PROTO_RESULT && in->ref >= 1 && in->ref <= jobs) {
                latency_us [done++] = s_now_us () - sent_us [in->ref];
                inflight--;
            }
            else
            if (in->cmd == PROTO_ERROR) {
                errors++;
                inflight--;
                done++;
            }
        }
    }
    double elapsed = (s_now_us () - start) / 1e6;
    zstr_send (broker, "STATS");
    char *stats = zstr_recv (broker);

    qsort (latency_us, done, sizeof (int64_t), s_compare_i64);
    #define PCT(p) (done? latency_us [(size_t) ((done - 1) * (p))] / 1000.0: 0)
    printf ("| %d | %u | %u | %u | %.0f | %.2f | %.2f | %.2f | %.2f |\n",
            nworkers, capacity, window, done, done / elapsed, PCT (0.50), PCT (0.90), PCT (0.99),
            done? latency_us [done - 1] / 1000.0: 0);
    fflush (stdout);
    if (errors || done < jobs)
        fprintf (stderr, "bench_broker: %u errors, %u of %u done; broker %s\n", errors, done, jobs,
                 stats? stats: "");
    zstr_free (&stats);
    zpoller_destroy (&poller);
    free (sent_us);
    free (latency_us);
    proto_msg_destroy (&in);
    proto_msg_destroy (&out);
    zsock_destroy (&client);
    for (int i = 0; i < nworkers; i++)
        zactor_destroy (&fake [i]);
    zactor_destroy (&broker);
    zstr_free (&clients);
    zstr_free (&workers);
    return done == jobs && !errors? 0: -1;
}

int
main (int argc, char **argv)
{
    //  Every job here is the same trivial one: with the default policy (use)
    //  all but the first would be answered from the result cache, which is
    //  --cache use's figure; bypass routes each one (the body is still
    //  decoded and keyed by nothing).
    uint32_t jobs = 200000, window = 1024, capacity = 256;
    const char *list = "1,2,4";
    const char *db = NULL;
    bool full = false;
    static const struct option options [] = {
        { "jobs", required_argument, NULL, 'j' },
        { "window", required_argument, NULL, 'w' },
        { "capacity", required_argument, NULL, 'c' },
        { "workers", required_argument, NULL, 'n' },
        { "db", required_argument, NULL, 'd' },
        { "sync", required_argument, NULL, 's' },
        { "cache", required_argument, NULL, 'C' },
        { NULL, 0, NULL, 0 }
    };
    int opt;
    while ((opt = getopt_long (argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
            case 'j': jobs = (uint32_t) strtoul (optarg, NULL, 10); break;
            case 'w': window = (uint32_t) strtoul (optarg, NULL, 10); break;
            case 'c': capacity = (uint32_t) strtoul (optarg, NULL, 10); break;
            case 'n': list = optarg; break;
            case 'd': db = optarg; break;
            case 's': full = streq (optarg, "full"); break;
            case 'C': s_cache_policy = optarg; break;
            default:
                fprintf (stderr, "usage: bench_broker [--jobs M] [--window W] [--capacity C] [--workers 1,2,4]"
                                 " [--db PATH [--sync full]] [--cache use|refresh|bypass]\n");
                return 2;
        }
    }
    if (jobs == 0 || window == 0 || capacity == 0) {
        fprintf (stderr, "bench_broker: --jobs, --window and --capacity must be positive\n");
        return 2;
    }
    common_log_set_level (LOG_LEVEL_WARN);
    if (db)
        printf ("store: %s, synchronous=%s\n\n", db, full? "FULL": "NORMAL");
    printf ("result cache policy: %s\n\n", s_cache_policy);
    printf ("| workers | capacity | window | jobs | jobs/s | p50 ms | p90 ms | p99 ms | max ms |\n");
    printf ("|---|---|---|---|---|---|---|---|---|\n");
    int rc = 0;
    char *copy = strdup (list);
    for (char *item = strtok (copy, ","); item; item = strtok (NULL, ",")) {
        int n = atoi (item);
        if (n < 1 || n > 64) {
            fprintf (stderr, "bench_broker: workers must be 1..64, not '%s'\n", item);
            rc = 2;
            break;
        }
        if (s_run (n, jobs, window, capacity, db, full))
            rc = 1;
    }
    free (copy);
    return rc;
}
