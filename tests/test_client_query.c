/*  test_client_query - what the broker knows, through the client library and
    the `kgym` binary (docs/protocol.md section 14): the result cache and its
    policies, CANCEL, QUERY/ANSWER, GRPO group SUMMARY, task statistics.

    The "broker" tests run an in-process broker and real kgym-worker
    processes (CPU backend) grading examples/cpu/gelu_f32, and run the built
    `kgym` as a subprocess. The "fake broker" tests drive the library
    against an actor that plays the broker's side by hand (ask() keeping
    other events, errors, timeouts, the SUBMIT header options).
*/
#include "testutil.h"
#include "client_kgym.h"
#include "broker_server.h"
#include "proto_mpk.h"
#include "common_log.h"
#include "kgym_config.h"
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 60000               //  longest wait for one reply (a CPU job compiles and runs)
#define ASK_MS 10000                //  longest wait for an answer

static char s_dir [64];             //  scratch directory of the test
static testutil_broker_t s_broker;  //  the broker (in-process)
static char *s_clients;             //  its client endpoint (borrowed)
static char *s_workers;             //  its worker endpoint (borrowed)
static pid_t s_worker_pids [4];     //  kgym-worker processes started
static int s_nworkers;              //  entries used

//  --------------------------------------------------------------------------
//  Processes

static void
s_start_worker (const char *name)
{
    ck_assert_int_lt (s_nworkers, 4);
    char worker [512], cache [256];
    snprintf (worker, sizeof worker, "%s/worker/kgym-worker", KGYM_BUILD_DIR);
    snprintf (cache, sizeof cache, "%s/modules.sqlite", s_dir);
    char *argv [] = { worker, "--broker", s_workers, "--backend", "cpu", "--cache", cache,
                      "--name", (char *) name, "--heartbeat", "300", NULL };
    s_worker_pids [s_nworkers++] = testutil_spawn_io (argv, NULL, NULL, NULL, -1);
}

//  The JSON lines of text as an array (every line must be a JSON object).
static json_t *
s_json_lines (const char *text)
{
    json_t *lines = json_array ();
    char *copy = strdup (text);
    char *save = NULL;
    for (char *line = strtok_r (copy, "\n", &save); line; line = strtok_r (NULL, "\n", &save)) {
        json_error_t error;
        json_t *json = json_loads (line, 0, &error);
        ck_assert_msg (json_is_object (json), "not a JSON object line: '%s' (%s)", line, error.text);
        json_array_append_new (lines, json);
    }
    free (copy);
    return lines;
}

//  --------------------------------------------------------------------------
//  Broker fixture

//  A scratch directory of its own (the fake broker's tests).
static void
s_dir_setup (void)
{
    common_log_set_level (LOG_LEVEL_WARN);
    testutil_dir_make (s_dir, sizeof s_dir, "query");
}

static void
s_dir_teardown (void)
{
    testutil_dir_remove (s_dir);
}

static void
s_broker_setup (void)
{
    s_dir_setup ();
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.heartbeat_ms = 300;
    testutil_broker_start (&s_broker, &cfg);
    s_clients = s_broker.clients;
    s_workers = s_broker.workers;
    s_nworkers = 0;
}

static void
s_broker_teardown (void)
{
    //  SIGINT: a worker leaves at once (its jobs go back), no draining.
    for (int i = 0; i < s_nworkers; i++) {
        kill (s_worker_pids [i], SIGINT);
        waitpid (s_worker_pids [i], NULL, 0);
    }
    s_nworkers = 0;
    testutil_broker_stop (&s_broker);
    s_clients = s_workers = NULL;
    s_dir_teardown ();
}

//  The next event within WAIT_MS that is not a NOTICE (jobs queued with no
//  worker get one each, 503: docs/protocol.md 7.3); fails the test when none.
static void
s_next_not_notice (client_kgym_t *client, client_event_t *event)
{
    do
        ck_assert_int_eq (client_kgym_recv (client, WAIT_MS, event), 0);
    while (event->type == CLIENT_EVENT_NOTICE);
}

static client_kgym_t *
s_client (const char *id)
{
    client_kgym_config_t cfg;
    client_kgym_config_default (&cfg);
    cfg.endpoint = s_clients;
    cfg.client_id = id;
    char err [256];
    client_kgym_t *client = client_kgym_new_config (&cfg, err, sizeof err);
    ck_assert_msg (client != NULL, "cannot connect: %s", err);
    return client;
}

//  The job {gelu_f32 task, candidate NAME}, with tag when given.
static json_t *
s_job (const char *candidate, const char *tag)
{
    char path [256];
    snprintf (path, sizeof path, "examples/cpu/gelu_f32/candidates/%s.json", candidate);
    json_t *job = json_pack ("{s:o, s:o, s:{s:f}}",
                             "task", testutil_load_json ("examples/cpu/gelu_f32/task.json"),
                             "candidate", testutil_load_json (path), "eval", "timeout", 20.0);
    if (tag)
        json_object_set_new (job, "tag", json_string (tag));
    return job;
}

static void
s_submit (client_kgym_t *client, uint64_t ref, const char *candidate, const char *tag,
          const client_submit_opts_t *opts)
{
    json_t *job = s_job (candidate, tag);
    char err [256];
    ck_assert_msg (client_kgym_submit_opts (client, ref, job, opts, err, sizeof err) == 0,
                   "submit ref %llu: %s", (unsigned long long) ref, err);
    json_decref (job);
}

//  Wait for ref's result (ACCEPTED passes by; its job id into *job when
//  asked); any ERROR fails. A new reference.
static json_t *
s_result (client_kgym_t *client, uint64_t ref, uint64_t *job)
{
    while (true) {
        client_event_t event;
        ck_assert_msg (client_kgym_recv (client, WAIT_MS, &event) == 0,
                       "no result for ref %llu within %d ms", (unsigned long long) ref, WAIT_MS);
        ck_assert_msg (event.type != CLIENT_EVENT_ERROR, "ERROR %u (ref %llu): %s", event.code,
                       (unsigned long long) event.ref, event.reason);
        if (event.type == CLIENT_EVENT_RESULT) {
            ck_assert_msg (event.ref == ref, "expected the result of ref %llu, got ref %llu",
                           (unsigned long long) ref, (unsigned long long) event.ref);
            if (job)
                *job = event.job;
            json_t *result = json_incref (event.result);
            client_event_clear (&event);
            return result;
        }
        client_event_clear (&event);
    }
}

//  The answer to query (a JSON text); fails the test with the reason when none.
static json_t *
s_ask (client_kgym_t *client, const char *query_text)
{
    json_t *query = json_loads (query_text, 0, NULL);
    ck_assert_ptr_nonnull (query);
    char err [256] = "";
    json_t *answer = client_kgym_ask (client, query, ASK_MS, err, sizeof err);
    ck_assert_msg (json_is_object (answer), "query %s: %s", query_text, err);
    json_decref (query);
    return answer;
}

//  Ask for what must fail; the reason comes back in err.
static void
s_ask_fails (client_kgym_t *client, const char *query_text, char *err, size_t errlen)
{
    json_t *query = json_loads (query_text, 0, NULL);
    ck_assert_ptr_nonnull (query);
    json_t *answer = client_kgym_ask (client, query, ASK_MS, err, errlen);
    ck_assert_msg (answer == NULL, "query %s should fail", query_text);
    json_decref (query);
}

static bool
s_cached (json_t *result)
{
    return json_is_true (json_object_get (result, "cached"));
}

static json_int_t
s_int (json_t *object, const char *key)
{
    return json_integer_value (json_object_get (object, key));
}

//  The worker named name in a "workers" answer, or NULL.
static json_t *
s_worker_named (json_t *answer, const char *name)
{
    size_t i;
    json_t *worker;
    json_array_foreach (json_object_get (answer, "workers"), i, worker)
        if (json_string_value (json_object_get (worker, "name"))
        &&  streq (json_string_value (json_object_get (worker, "name")), name))
            return worker;
    return NULL;
}

//  Wait (asking, at most ~30 s) until the broker lists the worker named name.
static void
s_wait_worker (client_kgym_t *client, const char *name)
{
    for (int i = 0; i < 300; i++) {
        json_t *answer = s_ask (client, "{\"what\": \"workers\"}");
        bool there = s_worker_named (answer, name) != NULL;
        json_decref (answer);
        if (there)
            return;
        client_event_t event;
        if (client_kgym_recv (client, 100, &event) == 0)   //  a bounded wait, not a sleep
            client_event_clear (&event);
    }
    ck_abort_msg ("worker %s never registered with the broker", name);
}

//  The cache figures inserts + replaced (results kept) and hits.
static void
s_cache_figures (client_kgym_t *client, json_int_t *kept, json_int_t *hits, json_int_t *entries)
{
    json_t *cache = s_ask (client, "{\"what\": \"cache\"}");
    *kept = s_int (cache, "inserts") + s_int (cache, "replaced");
    *hits = s_int (cache, "hits");
    *entries = s_int (cache, "entries");
    json_decref (cache);
}

//  --------------------------------------------------------------------------
//  Through the broker

START_TEST (test_cache_policies_use_refresh_bypass)
{
    s_start_worker ("q-cache");
    client_kgym_t *client = s_client (NULL);
    client_submit_opts_t use = { NULL, 0, NULL, CLIENT_CACHE_USE };
    client_submit_opts_t refresh = { NULL, 0, NULL, CLIENT_CACHE_REFRESH };
    client_submit_opts_t bypass = { NULL, 0, NULL, CLIENT_CACHE_BYPASS };

    //  The same candidate twice with use: the second is answered from the cache.
    s_submit (client, 1, "naive", "c1", &use);
    json_t *first = s_result (client, 1, NULL);
    ck_assert_str_eq (json_string_value (json_object_get (first, "status")), "ok");
    ck_assert_msg (!s_cached (first), "a first grading is not cached");
    s_submit (client, 2, "naive", "c2", &use);
    json_t *second = s_result (client, 2, NULL);
    ck_assert_msg (s_cached (second), "the same job again with cache use should come back cached");
    ck_assert_str_eq (json_string_value (json_object_get (second, "status")), "ok");
    //  The cache query shows the hit.
    json_int_t kept, hits, entries;
    s_cache_figures (client, &kept, &hits, &entries);
    ck_assert_msg (hits >= 1, "cache query: %lld hits, expected at least 1", (long long) hits);
    ck_assert_int_ge (entries, 1);
    json_t *stats = s_ask (client, "{\"what\": \"stats\"}");
    ck_assert_int_ge (s_int (json_object_get (stats, "counts"), "cache_hits"), 1);
    json_decref (stats);

    //  refresh grades again (a worker's result, not the cache's) and keeps it.
    s_submit (client, 3, "naive", "c3", &refresh);
    json_t *third = s_result (client, 3, NULL);
    ck_assert_msg (!s_cached (third), "refresh must grade again, not answer from the cache");
    ck_assert_str_eq (json_string_value (json_object_get (third, "worker")), "q-cache");
    json_int_t kept_after, hits_after, entries_after;
    s_cache_figures (client, &kept_after, &hits_after, &entries_after);
    ck_assert_msg (kept_after == kept + 1, "refresh keeps its result: kept %lld, then %lld",
                   (long long) kept, (long long) kept_after);

    //  bypass grades and keeps nothing: the same job with use afterwards misses.
    s_submit (client, 4, "optimised", "c4", &bypass);
    json_t *fourth = s_result (client, 4, NULL);
    ck_assert_msg (!s_cached (fourth), "bypass must grade");
    s_cache_figures (client, &kept, &hits, &entries);
    ck_assert_msg (kept == kept_after && entries == entries_after,
                   "bypass kept a result: kept %lld -> %lld, entries %lld -> %lld",
                   (long long) kept_after, (long long) kept, (long long) entries_after,
                   (long long) entries);
    s_submit (client, 5, "optimised", "c5", &use);
    json_t *fifth = s_result (client, 5, NULL);
    ck_assert_msg (!s_cached (fifth), "after a bypass the cache has no entry for the job");
    s_submit (client, 6, "optimised", "c6", NULL);
    json_t *sixth = s_result (client, 6, NULL);
    ck_assert_msg (s_cached (sixth), "use (the default) after use: cached");

    json_decref (first);
    json_decref (second);
    json_decref (third);
    json_decref (fourth);
    json_decref (fifth);
    json_decref (sixth);
    client_kgym_destroy (&client);
}
END_TEST

START_TEST (test_queries_see_workers_jobs_results_and_tasks)
{
    s_start_worker ("q-worker");
    client_kgym_t *client = s_client (NULL);
    s_wait_worker (client, "q-worker");
    char host [256] = "";
    gethostname (host, sizeof host - 1);

    client_submit_opts_t bypass = { NULL, 0, "traj-1", CLIENT_CACHE_BYPASS };
    s_submit (client, 1, "naive", "qtag", &bypass);
    s_submit (client, 2, "tail_bug", "qtag", &bypass);
    uint64_t ids [3] = { 0 };
    for (int i = 0; i < 2; i++) {
        client_event_t event;
        do {
            ck_assert_int_eq (client_kgym_recv (client, WAIT_MS, &event), 0);
            ck_assert_msg (event.type != CLIENT_EVENT_ERROR, "ERROR %u: %s", event.code, event.reason);
            if (event.type != CLIENT_EVENT_RESULT)
                client_event_clear (&event);
        } while (event.type != CLIENT_EVENT_RESULT);
        ck_assert (event.ref == 1 || event.ref == 2);
        ids [event.ref] = event.job;
        client_event_clear (&event);
    }

    //  workers: the worker, its host and state, the results it returned.
    json_t *answer = s_ask (client, "{\"what\": \"workers\"}");
    json_t *worker = s_worker_named (answer, "q-worker");
    ck_assert_msg (worker != NULL, "the workers answer lists q-worker");
    ck_assert_str_eq (json_string_value (json_object_get (worker, "host")), host);
    ck_assert_str_eq (json_string_value (json_object_get (worker, "backend")), "cpu");
    const char *state = json_string_value (json_object_get (worker, "state"));
    ck_assert_msg (state && (streq (state, "idle") || streq (state, "busy")), "state %s", state);
    ck_assert_int_ge (s_int (worker, "done"), 2);
    ck_assert (json_is_array (json_object_get (worker, "jobs")));
    json_decref (answer);

    //  stats: counts by status, the pass rate, workers by state.
    answer = s_ask (client, "{\"what\": \"stats\"}");
    json_t *counts = json_object_get (answer, "counts");
    ck_assert_int_ge (s_int (counts, "submitted"), 2);
    ck_assert_int_ge (s_int (counts, "completed"), 2);
    json_t *statuses = json_object_get (answer, "statuses");
    ck_assert_int_ge (s_int (statuses, "ok"), 1);
    ck_assert_int_ge (s_int (statuses, "incorrect"), 1);
    ck_assert (json_is_number (json_object_get (answer, "pass_rate")));
    ck_assert (json_is_number (json_object_get (answer, "rate_10s")));
    ck_assert (json_is_number (json_object_get (answer, "rate_1m")));
    json_t *by_state = json_object_get (answer, "workers");
    ck_assert_int_ge (s_int (by_state, "idle") + s_int (by_state, "busy"), 1);
    json_decref (answer);

    //  job: a finished job has its result; an unknown id is ERROR 404.
    char query [256];
    snprintf (query, sizeof query, "{\"what\": \"job\", \"job\": %llu}", (unsigned long long) ids [1]);
    answer = s_ask (client, query);
    json_t *job = json_object_get (answer, "job");
    ck_assert_str_eq (json_string_value (json_object_get (job, "state")), "done");
    ck_assert_str_eq (json_string_value (json_object_get (job, "status")), "ok");
    ck_assert_str_eq (json_string_value (json_object_get (job, "trajectory")), "traj-1");
    json_t *result = json_object_get (job, "result");
    ck_assert_msg (json_is_object (result), "a finished job's answer carries its result");
    ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "ok");
    json_decref (answer);
    char err [256];
    s_ask_fails (client, "{\"what\": \"job\", \"job\": 1}", err, sizeof err);
    ck_assert_msg (strstr (err, "404"), "unknown job: %s", err);
    s_ask_fails (client, "{\"what\": \"no such thing\"}", err, sizeof err);
    ck_assert_msg (strstr (err, "400"), "unknown query: %s", err);

    //  jobs by tag (and by trajectory), newest first, cut at limit.
    answer = s_ask (client, "{\"what\": \"jobs\", \"tag\": \"qtag\", \"results\": true}");
    json_t *jobs = json_object_get (answer, "jobs");
    ck_assert_int_eq (json_array_size (jobs), 2);
    ck_assert_uint_eq ((uint64_t) s_int (json_array_get (jobs, 0), "job"),
                       ids [1] > ids [2]? ids [1]: ids [2]);
    ck_assert (json_is_object (json_object_get (json_array_get (jobs, 0), "result")));
    json_decref (answer);
    answer = s_ask (client, "{\"what\": \"jobs\", \"trajectory\": \"traj-1\", \"limit\": 1}");
    ck_assert_int_eq (json_array_size (json_object_get (answer, "jobs")), 1);
    ck_assert_msg (json_is_true (json_object_get (answer, "truncated")), "a list cut at limit says so");
    json_decref (answer);

    //  results by task; tasks with their attempts.
    answer = s_ask (client, "{\"what\": \"results\", \"task\": \"gelu_f32\"}");
    json_t *results = json_object_get (answer, "results");
    ck_assert_int_ge (json_array_size (results), 2);
    size_t i;
    json_t *item;
    int seen = 0;
    json_array_foreach (results, i, item) {
        uint64_t id = (uint64_t) s_int (item, "job");
        if (id == ids [1] || id == ids [2])
            seen++;
        ck_assert (json_is_string (json_object_get (item, "status")));
    }
    ck_assert_int_eq (seen, 2);
    json_decref (answer);
    answer = s_ask (client, "{\"what\": \"tasks\"}");
    json_t *task = NULL;
    json_array_foreach (json_object_get (answer, "tasks"), i, item)
        if (streq (json_string_value (json_object_get (item, "task"))?: "", "gelu_f32"))
            task = item;
    ck_assert_msg (task != NULL, "the tasks answer has gelu_f32");
    ck_assert_int_ge (s_int (task, "attempts"), 2);
    json_decref (answer);
    //  A band that holds a pass rate of 1/2 lists it; one that does not, not.
    answer = s_ask (client, "{\"what\": \"tasks\", \"lo\": 0.1, \"hi\": 0.9}");
    ck_assert_int_eq (json_array_size (json_object_get (answer, "tasks")), 1);
    json_decref (answer);
    answer = s_ask (client, "{\"what\": \"tasks\", \"lo\": 0.95, \"hi\": 1.0}");
    ck_assert_int_eq (json_array_size (json_object_get (answer, "tasks")), 0);
    json_decref (answer);
    client_kgym_destroy (&client);
}
END_TEST

START_TEST (test_group_of_three_gets_one_summary)
{
    s_start_worker ("q-group");
    client_kgym_t *client = s_client (NULL);
    client_submit_opts_t group = { "grp-1", 3, NULL, CLIENT_CACHE_BYPASS };
    s_submit (client, 1, "naive", NULL, &group);
    s_submit (client, 2, "optimised", NULL, &group);
    s_submit (client, 3, "tail_bug", NULL, &group);
    int results = 0, summaries = 0;
    json_t *summary = NULL;
    while (results < 3 || summaries < 1) {
        client_event_t event;
        ck_assert_msg (client_kgym_recv (client, WAIT_MS, &event) == 0,
                       "%d results and %d summaries within %d ms", results, summaries, WAIT_MS);
        ck_assert_msg (event.type != CLIENT_EVENT_ERROR, "ERROR %u: %s", event.code, event.reason);
        if (event.type == CLIENT_EVENT_RESULT)
            results++;
        if (event.type == CLIENT_EVENT_SUMMARY) {
            ck_assert_str_eq (event.group, "grp-1");
            ck_assert_msg (results == 3, "the summary came after %d of 3 results", results);
            summaries++;
            summary = json_incref (event.summary);
        }
        client_event_clear (&event);
    }
    ck_assert_int_eq (s_int (summary, "count"), 3);
    ck_assert_int_eq (s_int (summary, "cancelled"), 0);
    ck_assert_str_eq (json_string_value (json_object_get (summary, "group")), "grp-1");
    json_t *statuses = json_object_get (summary, "statuses");
    ck_assert_int_eq (s_int (statuses, "ok"), 2);
    ck_assert_int_eq (s_int (statuses, "incorrect"), 1);
    ck_assert (json_is_number (json_object_get (summary, "reward_mean")));
    ck_assert (json_is_false (json_object_get (summary, "zero_variance")));
    json_decref (summary);
    //  The group's jobs, by query; and no second SUMMARY comes.
    json_t *answer = s_ask (client, "{\"what\": \"jobs\", \"group\": \"grp-1\"}");
    ck_assert_int_eq (json_array_size (json_object_get (answer, "jobs")), 3);
    json_decref (answer);
    client_event_t event;
    while (client_kgym_recv (client, 300, &event) == 0) {
        ck_assert_msg (event.type != CLIENT_EVENT_SUMMARY, "a second SUMMARY for %s", event.group);
        client_event_clear (&event);
    }
    client_kgym_destroy (&client);
}
END_TEST

START_TEST (test_cancel_of_a_queued_job)
{
    //  No worker yet: both jobs wait in the queue.
    client_kgym_t *client = s_client ("q-cancel-client");
    s_submit (client, 1, "naive", "cancel", NULL);
    s_submit (client, 2, "optimised", "cancel", NULL);
    uint64_t ids [3] = { 0 };
    for (int i = 0; i < 2; i++) {
        client_event_t event;
        s_next_not_notice (client, &event);
        ck_assert_int_eq (event.type, CLIENT_EVENT_ACCEPTED);
        ids [event.ref] = event.job;
    }
    char err [256];
    ck_assert_int_eq (client_kgym_cancel (client, 10, ids [1], err, sizeof err), 0);
    client_event_t event;
    s_next_not_notice (client, &event);
    ck_assert_msg (event.type == CLIENT_EVENT_DONE, "CANCEL answered with event %d (%u %s)",
                   event.type, event.code, event.reason);
    ck_assert_uint_eq (event.ref, 10);
    ck_assert_uint_eq (event.count, 1);
    ck_assert_uint_eq (client_kgym_pending (client), 1);
    //  Again: nothing left to cancel.
    ck_assert_int_eq (client_kgym_cancel (client, 11, ids [1], err, sizeof err), 0);
    ck_assert_int_eq (client_kgym_recv (client, WAIT_MS, &event), 0);
    ck_assert_int_eq (event.type, CLIENT_EVENT_DONE);
    ck_assert_uint_eq (event.ref, 11);
    ck_assert_uint_eq (event.count, 0);
    //  Bad arguments are refused before sending.
    ck_assert_int_eq (client_kgym_cancel (client, 0, ids [1], err, sizeof err), -1);
    ck_assert_int_eq (client_kgym_cancel (client, 12, 0, err, sizeof err), -1);

    //  A worker comes: the other job is graded, the cancelled one never.
    s_start_worker ("q-late");
    json_t *result = s_result (client, 2, NULL);
    ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "ok");
    json_decref (result);
    char query [256];
    snprintf (query, sizeof query, "{\"what\": \"job\", \"job\": %llu}", (unsigned long long) ids [1]);
    json_t *answer = s_ask (client, query);
    json_t *job = json_object_get (answer, "job");
    ck_assert_str_eq (json_string_value (json_object_get (job, "state")), "cancelled");
    ck_assert (json_is_null (json_object_get (job, "result")));
    json_decref (answer);
    while (client_kgym_recv (client, 500, &event) == 0) {
        ck_assert_msg (event.type != CLIENT_EVENT_RESULT, "a RESULT for job %llu (ref %llu)",
                       (unsigned long long) event.job, (unsigned long long) event.ref);
        client_event_clear (&event);
    }
    ck_assert_uint_eq (client_kgym_pending (client), 0);
    client_kgym_destroy (&client);
}
END_TEST

START_TEST (test_fetch_with_a_trainers_id_keeps_its_queued_jobs)
{
    //  A trainer with two queued jobs (no worker yet); an operator fetches
    //  with the trainer's id. Leaving, kgym fetch must not drop those jobs.
    client_kgym_t *trainer = s_client ("q-trainer");
    s_submit (trainer, 1, "naive", "fetched", NULL);
    s_submit (trainer, 2, "tail_bug", "fetched", NULL);
    for (int i = 0; i < 2; i++) {
        client_event_t event;
        s_next_not_notice (trainer, &event);
        ck_assert_int_eq (event.type, CLIENT_EVENT_ACCEPTED);
    }
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "fetch", "--broker", s_clients, "--client-id", "q-trainer", NULL);
    ck_assert_msg (rc == 0, "kgym fetch exited %d: %s", rc, err);
    ck_assert_msg (strstr (err, "2 matching job(s) not finished yet"), "kgym fetch: %s", err);
    free (out);
    free (err);
    json_t *answer = s_ask (trainer, "{\"what\": \"jobs\", \"tag\": \"fetched\"}");
    json_t *jobs = json_object_get (answer, "jobs");
    ck_assert_int_eq (json_array_size (jobs), 2);
    size_t i;
    json_t *job;
    json_array_foreach (jobs, i, job)
        ck_assert_str_eq (json_string_value (json_object_get (job, "state")), "queued");
    json_decref (answer);
    //  The fetch bound the trainer's id to its own connection; a FETCH of the
    //  trainer binds it back (a HEARTBEAT would too, in its time), and the
    //  jobs, still queued, are graded and come to it.
    char why [256];
    ck_assert_int_eq (client_kgym_fetch (trainer, 3, 0, "fetched", why, sizeof why), 0);
    client_event_t done;
    s_next_not_notice (trainer, &done);
    ck_assert_int_eq (done.type, CLIENT_EVENT_DONE);
    ck_assert_uint_eq (done.pending, 2);
    s_start_worker ("q-after-fetch");
    int results = 0;
    while (results < 2) {
        client_event_t event;
        ck_assert_msg (client_kgym_recv (trainer, WAIT_MS, &event) == 0,
                       "%d of 2 results after the fetch", results);
        ck_assert_msg (event.type != CLIENT_EVENT_ERROR, "ERROR %u: %s", event.code, event.reason);
        results += event.type == CLIENT_EVENT_RESULT;
        client_event_clear (&event);
    }
    client_kgym_destroy (&trainer);
}
END_TEST

//  The JSON line of lines whose key is value, or NULL.
static json_t *
s_line_with (json_t *lines, const char *key, const char *value)
{
    size_t i;
    json_t *line;
    json_array_foreach (lines, i, line)
        if (json_string_value (json_object_get (line, key))
        &&  streq (json_string_value (json_object_get (line, key)), value))
            return line;
    return NULL;
}

START_TEST (test_kgym_binary_commands)
{
    s_start_worker ("q-cli");
    char *task = testutil_source_path ("examples/cpu/gelu_f32/task.json");
    char *naive = testutil_source_path ("examples/cpu/gelu_f32/candidates/naive.json");
    char *out, *err;

    //  submit with a group and the cache: the second of two identical jobs is
    //  answered by the first (coalesced) or the cache, and says so.
    int rc = testutil_kgym (s_dir, &out, &err, "submit", "--broker", s_clients, "--group", "cli-group",
                     "--group-size", "2", "--cache", "use", "--tag", "clitag", task, naive, naive,
                     NULL);
    ck_assert_msg (rc == 0, "kgym submit exited %d: %s", rc, err);
    json_t *lines = s_json_lines (out);
    ck_assert_int_eq (json_array_size (lines), 2);
    int cached = 0;
    size_t i;
    json_t *line;
    json_array_foreach (lines, i, line) {
        ck_assert_str_eq (json_string_value (json_object_get (line, "status")), "ok");
        cached += s_cached (line);
    }
    ck_assert_msg (cached == 1, "one of the two identical jobs should be cached, %d are", cached);
    ck_assert_msg (strstr (err, "group cli-group: 2 job(s)"), "the group's summary on stderr: %s", err);
    json_decref (lines);
    free (out);
    free (err);

    //  workers, as JSON lines and as a table; its busy ratio once a heartbeat
    //  has said it (every 300 ms while idle).
    bool said = false;
    for (int64_t deadline = zclock_mono () + 30000; !said && zclock_mono () < deadline; ) {
        rc = testutil_kgym (s_dir, &out, &err, "workers", "--broker", s_clients, "--json", NULL);
        ck_assert_msg (rc == 0, "kgym workers exited %d: %s", rc, err);
        lines = s_json_lines (out);
        json_t *worker = s_line_with (lines, "name", "q-cli");
        ck_assert_msg (worker != NULL, "kgym workers --json: %s", out);
        ck_assert (json_is_string (json_object_get (worker, "host")));
        ck_assert (json_is_string (json_object_get (worker, "state")));
        json_t *busy = json_object_get (worker, "busy");
        ck_assert_msg (json_is_null (busy) || json_is_number (busy), "busy: %s", out);
        said = json_is_number (busy);
        if (said)
            ck_assert_msg (json_number_value (busy) >= 0 && json_number_value (busy) <= 1, "busy: %s", out);
        json_decref (lines);
        free (out);
        free (err);
    }
    ck_assert_msg (said, "no busy ratio in kgym workers within 30 s");
    rc = testutil_kgym (s_dir, &out, &err, "workers", "--broker", s_clients, NULL);
    ck_assert_int_eq (rc, 0);
    ck_assert_msg (strncmp (out, "NAME ", 5) == 0 && strstr (out, "q-cli") && strstr (out, "BUSY")
                   && strstr (out, "%"), "table: %s", out);
    free (out);
    free (err);

    //  stats: one JSON line with the counts; the table names its parts.
    rc = testutil_kgym (s_dir, &out, &err, "stats", "--broker", s_clients, "--json", NULL);
    ck_assert_int_eq (rc, 0);
    lines = s_json_lines (out);
    ck_assert_int_eq (json_array_size (lines), 1);
    json_t *stats = json_array_get (lines, 0);
    ck_assert_int_ge (s_int (json_object_get (stats, "counts"), "submitted"), 2);
    json_decref (lines);
    free (out);
    free (err);
    rc = testutil_kgym (s_dir, &out, &err, "stats", "--broker", s_clients, NULL);
    ck_assert_int_eq (rc, 0);
    ck_assert_msg (strstr (out, "pass rate") && strstr (out, "cache hit rate")
                   && strstr (out, "in flight"), "stats table: %s", out);
    free (out);
    free (err);

    //  jobs by tag and group, results, tasks, the broker's cache: JSON lines.
    rc = testutil_kgym (s_dir, &out, &err, "jobs", "--broker", s_clients, "--tag", "clitag", NULL);
    ck_assert_int_eq (rc, 0);
    lines = s_json_lines (out);
    ck_assert_int_eq (json_array_size (lines), 2);
    json_int_t job_id = s_int (json_array_get (lines, 0), "job");
    json_decref (lines);
    free (out);
    free (err);
    rc = testutil_kgym (s_dir, &out, &err, "jobs", "--broker", s_clients, "--group", "cli-group", "--results",
                 NULL);
    ck_assert_int_eq (rc, 0);
    lines = s_json_lines (out);
    ck_assert_int_eq (json_array_size (lines), 2);
    ck_assert (json_is_object (json_object_get (json_array_get (lines, 0), "result")));
    json_decref (lines);
    free (out);
    free (err);
    char id [32];
    snprintf (id, sizeof id, "%lld", (long long) job_id);
    rc = testutil_kgym (s_dir, &out, &err, "job", "--broker", s_clients, id, NULL);
    ck_assert_int_eq (rc, 0);
    lines = s_json_lines (out);
    ck_assert_int_eq (json_array_size (lines), 1);
    ck_assert_int_eq (s_int (json_array_get (lines, 0), "job"), job_id);
    json_decref (lines);
    free (out);
    free (err);
    rc = testutil_kgym (s_dir, &out, &err, "results", "--broker", s_clients, "--task", "gelu_f32", "--limit", "5",
                 NULL);
    ck_assert_int_eq (rc, 0);
    lines = s_json_lines (out);
    ck_assert_int_eq (json_array_size (lines), 2);
    json_decref (lines);
    free (out);
    free (err);
    rc = testutil_kgym (s_dir, &out, &err, "tasks", "--broker", s_clients, "--min-attempts", "1", NULL);
    ck_assert_int_eq (rc, 0);
    lines = s_json_lines (out);
    ck_assert_msg (s_line_with (lines, "task", "gelu_f32"), "kgym tasks: %s", out);
    json_decref (lines);
    free (out);
    free (err);
    rc = testutil_kgym (s_dir, &out, &err, "cache", "stats", "--broker", s_clients, "--json", NULL);
    ck_assert_msg (rc == 0, "kgym cache stats --broker exited %d: %s", rc, err);
    lines = s_json_lines (out);
    ck_assert_int_eq (json_array_size (lines), 1);
    ck_assert (json_is_integer (json_object_get (json_array_get (lines, 0), "entries")));
    json_decref (lines);
    free (out);
    free (err);

    //  Errors: an unknown job (404) and a usage error.
    rc = testutil_kgym (s_dir, &out, &err, "job", "--broker", s_clients, "1", NULL);
    ck_assert_int_eq (rc, 1);
    ck_assert_msg (strstr (err, "404"), "kgym job of an unknown id: %s", err);
    ck_assert_str_eq (out, "");
    free (out);
    free (err);
    rc = testutil_kgym (s_dir, &out, &err, "jobs", "--broker", s_clients, NULL);
    ck_assert_int_eq (rc, 2);
    free (out);
    free (err);
    free (task);
    free (naive);
}
END_TEST

START_TEST (test_kgym_submit_batch_lines_carry_group_and_cache)
{
    s_start_worker ("q-batch");
    char *task = testutil_source_path ("examples/cpu/gelu_f32/task.json");
    char *naive = testutil_source_path ("examples/cpu/gelu_f32/candidates/naive.json");
    char *bug = testutil_source_path ("examples/cpu/gelu_f32/candidates/tail_bug.json");
    char path [128];
    snprintf (path, sizeof path, "%s/batch.jsonl", s_dir);
    FILE *file = fopen (path, "w");
    ck_assert_ptr_nonnull (file);
    fprintf (file, "{\"task\": \"%s\", \"candidate\": \"%s\", \"group\": \"bg\", \"group_size\": 2}\n"
                   "{\"task\": \"%s\", \"candidate\": \"%s\", \"group\": \"bg\", \"group_size\": 2,"
                   " \"trajectory\": \"bt\", \"cache\": \"bypass\"}\n", task, naive, task, bug);
    fclose (file);
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "submit", "--broker", s_clients, "--batch", path, NULL);
    ck_assert_msg (rc == 0, "kgym submit --batch exited %d: %s", rc, err);
    json_t *lines = s_json_lines (out);
    ck_assert_int_eq (json_array_size (lines), 2);
    json_decref (lines);
    ck_assert_msg (strstr (err, "group bg: 2 job(s), 0 cancelled, pass rate 50.0%"),
                   "the batch group's summary on stderr: %s", err);
    free (out);
    free (err);
    //  The line's trajectory went with its job.
    rc = testutil_kgym (s_dir, &out, &err, "jobs", "--broker", s_clients, "--trajectory", "bt", NULL);
    ck_assert_int_eq (rc, 0);
    lines = s_json_lines (out);
    ck_assert_int_eq (json_array_size (lines), 1);
    ck_assert_str_eq (json_string_value (json_object_get (json_array_get (lines, 0), "group")), "bg");
    json_decref (lines);
    free (out);
    free (err);
    //  A line with an unknown cache policy: nothing runs, the line is named.
    file = fopen (path, "w");
    fprintf (file, "{\"task\": \"%s\", \"candidate\": \"%s\", \"cache\": \"often\"}\n", task, naive);
    fclose (file);
    rc = testutil_kgym (s_dir, &out, &err, "submit", "--broker", s_clients, "--batch", path, NULL);
    ck_assert_int_eq (rc, 2);
    ck_assert_msg (strstr (err, "batch.jsonl:1: \"cache\""), "reason: %s", err);
    free (out);
    free (err);
    //  --group-size without --group: a usage error.
    rc = testutil_kgym (s_dir, &out, &err, "submit", "--broker", s_clients, "--group-size", "2", task, naive, NULL);
    ck_assert_int_eq (rc, 2);
    free (out);
    free (err);
    free (task);
    free (naive);
    free (bug);
}
END_TEST

START_TEST (test_kgym_stats_watch_until_interrupted)
{
    char kgym [512];
    snprintf (kgym, sizeof kgym, "%s/client/kgym", KGYM_BUILD_DIR);
    char *argv [] = { kgym, "stats", "--broker", s_clients, "--watch", "0.2", NULL };
    int fds [2];
    ck_assert_int_eq (pipe (fds), 0);
    pid_t pid = testutil_spawn_io (argv, NULL, NULL, NULL, fds [1]);
    close (fds [1]);
    //  Not a terminal: blocks separated by a blank line. Read until two are in.
    char text [65536] = "";
    size_t size = 0;
    while (!strstr (text, "\n\nbroker ")) {
        struct pollfd pfd = { fds [0], POLLIN, 0 };
        ck_assert_msg (poll (&pfd, 1, 20000) == 1, "no second block within 20 s: '%s'", text);
        ssize_t n = read (fds [0], text + size, sizeof text - size - 1);
        ck_assert_msg (n > 0, "kgym stats --watch ended early: '%s'", text);
        size += (size_t) n;
        text [size] = 0;
    }
    ck_assert_msg (strncmp (text, "broker ", 7) == 0, "no clear-screen when not a terminal: '%s'", text);
    kill (pid, SIGINT);
    int status;
    ck_assert_int_eq (waitpid (pid, &status, 0), pid);
    ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0,
                   "kgym stats --watch after SIGINT: status %d", status);
    close (fds [0]);
}
END_TEST

//  --------------------------------------------------------------------------
//  Against a fake broker

//  Plays the broker: ACCEPTED and a RESULT per SUBMIT (the result carries
//  the header's group, group_size, trajectory and cache; a job tagged
//  "notice" gets ERROR 503 first and the broker-made internal_error result
//  a broker sends when no worker joined; one tagged "malformed" a body that
//  is not msgpack, "notmap" one that is not a map), and per QUERY by
//  its "what": "hello" -> a SUMMARY, then the ANSWER twice; "missing" ->
//  ERROR 404 with the ref; "old" -> ERROR 401 without a ref, as an older
//  broker; "silent" -> nothing. CANCEL -> DONE {count 1}.
static void
s_fake_broker (zsock_t *pipe, void *args)
{
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    proto_sock_configure (router, true);
    int port = zsock_bind (router, "tcp://127.0.0.1:*");
    zsock_signal (pipe, 0);
    zstr_sendf (pipe, "tcp://127.0.0.1:%d", port);
    proto_msg_t *in = proto_msg_new (PROTO_HEARTBEAT);
    proto_msg_t *out = proto_msg_new (PROTO_HEARTBEAT);
    zpoller_t *poller = zpoller_new (pipe, router, NULL);
    uint64_t next_job = 100;
    while (true) {
        void *which = zpoller_wait (poller, 1000);
        if (which == pipe || zpoller_terminated (poller))
            break;
        if (which != router || proto_msg_recv (in, router) != 0)
            continue;
        zframe_t *to = zframe_dup (in->routing_id);
        if (in->cmd == PROTO_SUBMIT) {
            uint64_t job = next_job++;
            proto_msg_reset (out, PROTO_ACCEPTED);
            zframe_t *id = zframe_dup (to);
            proto_msg_set_routing_id (out, &id);
            out->ref = in->ref;
            out->job = job;
            proto_msg_send (out, router);
            json_t *result = json_pack ("{s:s, s:s, s:i, s:s, s:s}", "status", "ok",
                                        "group", in->group, "group_size", (int) in->group_size,
                                        "trajectory", in->trajectory, "cache", in->cache);
            if (streq (in->tag, "notice")) {
                //  What a broker without a worker for the backend says, then
                //  its own result when none joined in the grace period.
                proto_msg_reset (out, PROTO_ERROR);
                id = zframe_dup (to);
                proto_msg_set_routing_id (out, &id);
                out->ref = in->ref;
                out->job = job;
                out->code = 503;
                proto_msg_set_str (out->reason, "no connected worker serves backend 'cpu'; the job"
                                                " waits up to 60 s for one");
                proto_msg_send (out, router);
                json_decref (result);
                result = json_pack ("{s:s, s:n, s:n, s:s}", "status", "internal_error", "reward",
                                    "speedup", "message", "no worker serves backend 'cpu' (none"
                                    " joined within 60 s)");
            }
            char *data;
            size_t size;
            proto_mpk_encode (result, &data, &size);
            json_decref (result);
            zframe_t *body = zframe_new (data, size);
            free (data);
            //  Bodies a client must survive: not msgpack at all, not a map.
            if (streq (in->tag, "malformed") || streq (in->tag, "notmap")) {
                zframe_destroy (&body);
                body = zframe_new (streq (in->tag, "malformed")? "\xc1\x93": "\x07",
                                   streq (in->tag, "malformed")? 2: 1);
            }
            proto_msg_reset (out, PROTO_RESULT);
            id = zframe_dup (to);
            proto_msg_set_routing_id (out, &id);
            out->ref = in->ref;
            out->job = job;
            proto_msg_set_body (out, &body);
            proto_msg_send (out, router);
        }
        else
        if (in->cmd == PROTO_CANCEL) {
            proto_msg_reset (out, PROTO_DONE);
            zframe_t *id = zframe_dup (to);
            proto_msg_set_routing_id (out, &id);
            out->ref = in->ref;
            out->count = 1;
            proto_msg_send (out, router);
        }
        else
        if (in->cmd == PROTO_QUERY) {
            json_t *query = proto_mpk_decode (zframe_data (in->body), zframe_size (in->body), NULL,
                                              NULL, 0);
            const char *what = json_string_value (json_object_get (query, "what"));
            zframe_t *id = zframe_dup (to);
            if (what && streq (what, "hello")) {
                const unsigned char summary [] = { 0x81, 0xa5, 'c', 'o', 'u', 'n', 't', 0x03 };
                zframe_t *body = zframe_new (summary, sizeof summary);
                proto_msg_reset (out, PROTO_SUMMARY);
                proto_msg_set_routing_id (out, &id);
                proto_msg_set_str (out->group, "g-fake");
                proto_msg_set_body (out, &body);
                proto_msg_send (out, router);
                for (int i = 0; i < 2; i++) {
                    const unsigned char answer [] = { 0x81, 0xa2, 'h', 'i', 0xc3 };
                    body = zframe_new (answer, sizeof answer);
                    proto_msg_reset (out, PROTO_ANSWER);
                    id = zframe_dup (to);
                    proto_msg_set_routing_id (out, &id);
                    out->ref = in->ref;
                    proto_msg_set_body (out, &body);
                    proto_msg_send (out, router);
                }
            }
            else
            if (what && (streq (what, "missing") || streq (what, "old"))) {
                bool old = streq (what, "old");
                proto_msg_reset (out, PROTO_ERROR);
                proto_msg_set_routing_id (out, &id);
                out->code = old? PROTO_ERR_UNKNOWN_COMMAND: PROTO_ERR_NOT_FOUND;
                out->ref = old? 0: in->ref;
                proto_msg_set_str (out->reason, old? "QUERY is not a client command": "no job 7");
                proto_msg_send (out, router);
            }
            zframe_destroy (&id);
            json_decref (query);
        }
        else
        if (in->cmd == PROTO_HEARTBEAT) {
            proto_msg_reset (out, PROTO_HEARTBEAT);
            zframe_t *id = zframe_dup (to);
            proto_msg_set_routing_id (out, &id);
            proto_msg_send (out, router);
        }
        zframe_destroy (&to);
    }
    zpoller_destroy (&poller);
    proto_msg_destroy (&in);
    proto_msg_destroy (&out);
    zsock_destroy (&router);
}

static json_t *
s_query_of (const char *what)
{
    return json_pack ("{s:s}", "what", what);
}

START_TEST (test_ask_keeps_other_events_for_recv)
{
    common_log_set_level (LOG_LEVEL_WARN);
    zactor_t *fake = zactor_new (s_fake_broker, NULL);
    char *endpoint = zstr_recv (fake);
    client_kgym_t *client = client_kgym_new (endpoint);
    ck_assert_ptr_nonnull (client);
    char err [256];
    //  A job with every SUBMIT option: the fake echoes the header in the result.
    json_t *job = json_pack ("{s:{s:s}, s:{}}", "task", "backend", "cpu", "candidate");
    client_submit_opts_t opts = { "g-7", 8, "t-3", CLIENT_CACHE_REFRESH };
    ck_assert_int_eq (client_kgym_submit_opts (client, 1, job, &opts, err, sizeof err), 0);
    //  Too long a group is refused, not cut.
    char longname [300];
    memset (longname, 'x', sizeof longname - 1);
    longname [sizeof longname - 1] = 0;
    client_submit_opts_t bad = { longname, 0, NULL, CLIENT_CACHE_USE };
    ck_assert_int_eq (client_kgym_submit_opts (client, 2, job, &bad, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "group"), "reason: %s", err);
    json_decref (job);

    //  ask() returns the answer; the ACCEPTED, RESULT and SUMMARY that came
    //  first wait for recv(), in order; the answer's duplicate is dropped.
    json_t *query = s_query_of ("hello");
    json_t *answer = client_kgym_ask (client, query, ASK_MS, err, sizeof err);
    json_decref (query);
    ck_assert_msg (answer != NULL, "ask: %s", err);
    ck_assert (json_is_true (json_object_get (answer, "hi")));
    json_decref (answer);
    client_event_t event;
    ck_assert_int_eq (client_kgym_recv (client, 0, &event), 0);
    ck_assert_int_eq (event.type, CLIENT_EVENT_ACCEPTED);
    ck_assert_int_eq (client_kgym_recv (client, 0, &event), 0);
    ck_assert_int_eq (event.type, CLIENT_EVENT_RESULT);
    json_t *result = event.result;
    ck_assert_str_eq (json_string_value (json_object_get (result, "group")), "g-7");
    ck_assert_int_eq (s_int (result, "group_size"), 8);
    ck_assert_str_eq (json_string_value (json_object_get (result, "trajectory")), "t-3");
    ck_assert_str_eq (json_string_value (json_object_get (result, "cache")), "refresh");
    client_event_clear (&event);
    ck_assert_int_eq (client_kgym_recv (client, 0, &event), 0);
    ck_assert_int_eq (event.type, CLIENT_EVENT_SUMMARY);
    ck_assert_str_eq (event.group, "g-fake");
    ck_assert_int_eq (s_int (event.summary, "count"), 3);
    client_event_clear (&event);
    ck_assert_ptr_null (event.summary);
    ck_assert_int_eq (client_kgym_recv (client, 300, &event), -1);
    ck_assert_uint_eq (client_kgym_duplicates (client), 1);

    //  The same through query(): an ANSWER event with the ref.
    query = s_query_of ("hello");
    ck_assert_int_eq (client_kgym_query (client, 5, query, err, sizeof err), 0);
    ck_assert_int_eq (client_kgym_query (client, 0, query, err, sizeof err), -1);
    json_decref (query);
    bool answered = false;
    while (!answered) {
        ck_assert_int_eq (client_kgym_recv (client, ASK_MS, &event), 0);
        if (event.type == CLIENT_EVENT_ANSWER) {
            ck_assert_uint_eq (event.ref, 5);
            ck_assert (json_is_true (json_object_get (event.answer, "hi")));
            answered = true;
        }
        else
            ck_assert_int_eq (event.type, CLIENT_EVENT_SUMMARY);
        client_event_clear (&event);
    }

    //  ERROR with the ref, ERROR 401 from an older broker, no answer at all.
    query = s_query_of ("missing");
    ck_assert_ptr_null (client_kgym_ask (client, query, ASK_MS, err, sizeof err));
    ck_assert_msg (strstr (err, "404") && strstr (err, "no job 7"), "reason: %s", err);
    json_decref (query);
    query = s_query_of ("old");
    ck_assert_ptr_null (client_kgym_ask (client, query, ASK_MS, err, sizeof err));
    ck_assert_msg (strstr (err, "401"), "reason: %s", err);
    json_decref (query);
    query = s_query_of ("silent");
    ck_assert_ptr_null (client_kgym_ask (client, query, 300, err, sizeof err));
    ck_assert_msg (strstr (err, "no answer"), "reason: %s", err);
    json_decref (query);
    json_t *not_a_map = json_integer (3);
    ck_assert_ptr_null (client_kgym_ask (client, not_a_map, 300, err, sizeof err));
    json_decref (not_a_map);

    //  CANCEL: a DONE with the ref.
    ck_assert_int_eq (client_kgym_cancel (client, 9, 100, err, sizeof err), 0);
    ck_assert_int_eq (client_kgym_recv (client, ASK_MS, &event), 0);
    ck_assert_int_eq (event.type, CLIENT_EVENT_DONE);
    ck_assert_uint_eq (event.ref, 9);
    ck_assert_uint_eq (event.count, 1);

    //  Policies by name.
    client_cache_policy_t policy;
    ck_assert_int_eq (client_cache_policy_parse ("bypass", &policy), 0);
    ck_assert_int_eq (policy, CLIENT_CACHE_BYPASS);
    ck_assert_int_eq (client_cache_policy_parse ("sometimes", &policy), -1);
    ck_assert_str_eq (client_cache_policy_name (CLIENT_CACHE_REFRESH), "refresh");

    client_kgym_destroy (&client);
    zstr_free (&endpoint);
    zactor_destroy (&fake);
}
END_TEST

//  Times needle occurs in text.
static int
s_count (const char *text, const char *needle)
{
    int count = 0;
    for (const char *at = strstr (text, needle); at; at = strstr (at + 1, needle))
        count++;
    return count;
}

//  A client of the fake broker with one job (ref 1) tagged tag sent and
//  ACCEPTED; its id into *job.
static client_kgym_t *
s_fake_client (const char *endpoint, const char *tag, uint64_t *job)
{
    client_kgym_t *client = client_kgym_new (endpoint);
    ck_assert_ptr_nonnull (client);
    char err [256];
    unsigned char body [] = { 0x80 };
    ck_assert_int_eq (client_kgym_submit_encoded (client, 1, "cpu", tag, body, 1, err, sizeof err), 0);
    client_event_t event;
    ck_assert_int_eq (client_kgym_recv (client, ASK_MS, &event), 0);
    ck_assert_int_eq (event.type, CLIENT_EVENT_ACCEPTED);
    *job = event.job;
    return client;
}

START_TEST (test_no_worker_notice_is_not_an_error)
{
    zactor_t *fake = zactor_new (s_fake_broker, NULL);
    char *endpoint = zstr_recv (fake);
    //  The library: a NOTICE with the job's backend, the job still pending;
    //  its (broker-made) result after.
    uint64_t job;
    client_kgym_t *client = s_fake_client (endpoint, "notice", &job);
    client_event_t event;
    ck_assert_int_eq (client_kgym_recv (client, ASK_MS, &event), 0);
    ck_assert_msg (event.type == CLIENT_EVENT_NOTICE, "503 came as event %d, not a NOTICE", event.type);
    ck_assert_uint_eq (event.code, CLIENT_NOTICE_NO_WORKER);
    ck_assert_uint_eq (event.ref, 1);
    ck_assert_uint_eq (event.job, job);
    ck_assert_str_eq (event.backend, "cpu");
    ck_assert_msg (strstr (event.reason, "no connected worker"), "reason: %s", event.reason);
    ck_assert_uint_eq (client_kgym_pending (client), 1);
    ck_assert_int_eq (client_kgym_recv (client, ASK_MS, &event), 0);
    ck_assert_int_eq (event.type, CLIENT_EVENT_RESULT);
    ck_assert_str_eq (json_string_value (json_object_get (event.result, "status")), "internal_error");
    client_event_clear (&event);
    ck_assert_uint_eq (client_kgym_pending (client), 0);
    client_kgym_destroy (&client);

    //  kgym submit: the reason once for the backend, both results, exit 0.
    char *task = testutil_source_path ("examples/cpu/gelu_f32/task.json");
    char *naive = testutil_source_path ("examples/cpu/gelu_f32/candidates/naive.json");
    char *out, *text;
    int rc = testutil_kgym (s_dir, &out, &text, "submit", "--broker", endpoint, "--tag", "notice",
                            task, naive, naive, NULL);
    ck_assert_msg (rc == 0, "kgym submit after a 503: exit %d (%s)", rc, text);
    json_t *lines = s_json_lines (out);
    ck_assert_int_eq (json_array_size (lines), 2);
    json_decref (lines);
    ck_assert_int_eq (s_count (out, "\"status\":\"internal_error\""), 2);
    ck_assert_msg (s_count (text, "no connected worker serves backend 'cpu'") == 1,
                   "the notice once per backend: '%s'", text);
    free (out);
    free (text);
    free (task);
    free (naive);
    zstr_free (&endpoint);
    zactor_destroy (&fake);
}
END_TEST

START_TEST (test_a_malformed_result_fails_its_job_only)
{
    zactor_t *fake = zactor_new (s_fake_broker, NULL);
    char *endpoint = zstr_recv (fake);
    //  The library: an ERROR 400 made here (local), with the job's ref and id.
    uint64_t job;
    client_kgym_t *client = s_fake_client (endpoint, "notmap", &job);
    client_event_t event;
    ck_assert_int_eq (client_kgym_recv (client, ASK_MS, &event), 0);
    ck_assert_int_eq (event.type, CLIENT_EVENT_ERROR);
    ck_assert (event.local);
    ck_assert_uint_eq (event.code, PROTO_ERR_MALFORMED);
    ck_assert_uint_eq (event.ref, 1);
    ck_assert_uint_eq (event.job, job);
    ck_assert_msg (strstr (event.reason, "not a map"), "reason: %s", event.reason);
    ck_assert_uint_eq (client_kgym_pending (client), 0);
    client_kgym_destroy (&client);

    //  kgym submit: three jobs, the second's result unreadable. All three
    //  lines come, the bad one internal_error saying why; exit 1.
    char *task = testutil_source_path ("examples/cpu/gelu_f32/task.json");
    char path [128];
    snprintf (path, sizeof path, "%s/batch.jsonl", s_dir);
    FILE *file = fopen (path, "w");
    ck_assert_ptr_nonnull (file);
    const char *tags [] = { "one", "malformed", "three" };
    for (int i = 0; i < 3; i++)
        fprintf (file, "{\"task\": \"%s\", \"candidate\": {\"source\": \"%d\"}, \"tag\": \"%s\"}\n",
                 task, i, tags [i]);
    fclose (file);
    char *out, *text;
    int rc = testutil_kgym (s_dir, &out, &text, "submit", "--broker", endpoint, "--batch", path,
                            "--window", "1", NULL);
    ck_assert_msg (rc == 1, "kgym submit with a malformed result: exit %d (%s)", rc, text);
    json_t *lines = s_json_lines (out);
    ck_assert_msg (json_array_size (lines) == 3, "three lines, the batch went on: '%s'", out);
    json_t *bad = s_line_with (lines, "candidate", "line 2");
    ck_assert_msg (bad != NULL, "a line for the job with the bad result: '%s'", out);
    ck_assert_str_eq (json_string_value (json_object_get (bad, "status")), "internal_error");
    ck_assert (json_is_null (json_object_get (bad, "reward")));
    ck_assert (json_is_integer (json_object_get (bad, "job")));
    ck_assert_msg (strstr (json_string_value (json_object_get (bad, "message")) ?: "",
                           "could not be read"), "its message: '%s'", out);
    ck_assert_str_eq (json_string_value (json_object_get (s_line_with (lines, "candidate", "line 3"),
                                                          "status")), "ok");
    json_decref (lines);
    ck_assert_msg (strstr (text, "line 2: the broker sent a result that could not be read")
                   && strstr (text, "1 of 3 job(s) got no result of their own"),
                   "stderr says which and how many: '%s'", text);
    free (out);
    free (text);
    free (task);
    zstr_free (&endpoint);
    zactor_destroy (&fake);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("client_query");
    TCase *fake = tcase_create ("fake broker");
    tcase_set_timeout (fake, 60);
    tcase_add_checked_fixture (fake, s_dir_setup, s_dir_teardown);
    tcase_add_test (fake, test_ask_keeps_other_events_for_recv);
    tcase_add_test (fake, test_no_worker_notice_is_not_an_error);
    tcase_add_test (fake, test_a_malformed_result_fails_its_job_only);
    suite_add_tcase (suite, fake);
    TCase *broker = tcase_create ("broker");
    tcase_set_timeout (broker, 240);
    tcase_add_checked_fixture (broker, s_broker_setup, s_broker_teardown);
    tcase_add_test (broker, test_cache_policies_use_refresh_bypass);
    tcase_add_test (broker, test_queries_see_workers_jobs_results_and_tasks);
    tcase_add_test (broker, test_group_of_three_gets_one_summary);
    tcase_add_test (broker, test_cancel_of_a_queued_job);
    tcase_add_test (broker, test_fetch_with_a_trainers_id_keeps_its_queued_jobs);
    tcase_add_test (broker, test_kgym_binary_commands);
    tcase_add_test (broker, test_kgym_submit_batch_lines_carry_group_and_cache);
    tcase_add_test (broker, test_kgym_stats_watch_until_interrupted);
    suite_add_tcase (suite, broker);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
