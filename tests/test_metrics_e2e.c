/*  test_metrics_e2e - the Prometheus figures of real processes.

    Starts kgym-broker and one CPU kgym-worker with --metrics on free
    loopback ports, grades a small batch of examples/cpu jobs through
    client_kgym and scrapes both /metrics pages with a plain socket during
    and after it: submitted and completed counts equal the batch, the
    completed and worker job counts by status match the verdicts the client
    got, the queue drains to 0, a repeated candidate hits the compile
    cache; /healthz and /readyz answer 200 once the worker is connected;
    `promtool check metrics` accepts both pages when promtool is installed.
*/
#include "testutil.h"
#include "client_kgym.h"
#include "kgym_config.h"
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

extern char **environ;

static pid_t s_pids [2];
static char s_client_ep [64], s_worker_ep [64];
static int s_broker_port, s_worker_port;
static char s_cache_dir [] = "/tmp/kgym-test-metrics-XXXXXX";


static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

//  GET path on 127.0.0.1:port. The status (0 when nothing answers: not
//  listening yet), the body in *body (malloc'd) when body is not NULL.
static int
s_get (int port, const char *path, char **body)
{
    if (body)
        *body = NULL;
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge (fd, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    if (connect (fd, (struct sockaddr *) &addr, sizeof addr) != 0) {
        close (fd);
        return 0;
    }
    char request [256];
    int n = snprintf (request, sizeof request, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      "Connection: close\r\n\r\n", path);
    ck_assert_int_eq (write (fd, request, (size_t) n), n);
    size_t cap = 1 << 16, len = 0;
    char *data = malloc (cap);
    while (true) {
        struct pollfd item = { fd, POLLIN, 0 };
        ck_assert_msg (poll (&item, 1, 5000) == 1, "no reply to GET %s in 5 s", path);
        if (len + 4096 > cap)
            data = realloc (data, cap *= 2);
        ssize_t got = read (fd, data + len, cap - len - 1);
        if (got <= 0)
            break;
        len += (size_t) got;
    }
    close (fd);
    data [len] = 0;
    int status = 0;
    sscanf (data, "HTTP/1.%*d %d", &status);
    char *end = strstr (data, "\r\n\r\n");
    if (body)
        *body = strdup (end? end + 4: "");
    free (data);
    return status;
}

//  The value of one sample line "series value", NAN when absent.
static double
s_sample (const char *text, const char *series)
{
    size_t len = strlen (series);
    for (const char *line = text; line && *line; ) {
        if (strncmp (line, series, len) == 0 && line [len] == ' ')
            return strtod (line + len + 1, NULL);
        line = strchr (line, '\n');
        if (line)
            line++;
    }
    return NAN;
}

//  The sum of every series of a family without histogram suffixes ("name{...} v").
static double
s_family_sum (const char *text, const char *name)
{
    size_t len = strlen (name);
    double sum = 0;
    for (const char *line = text; line && *line; ) {
        if (strncmp (line, name, len) == 0 && (line [len] == '{' || line [len] == ' ')) {
            const char *space = strchr (line, ' ');
            if (space)
                sum += strtod (space + 1, NULL);
        }
        line = strchr (line, '\n');
        if (line)
            line++;
    }
    return sum;
}

//  Scrape /metrics until series has value (or timeout_ms passes); the last page.
static char *
s_scrape_until (int port, const char *series, double value, int timeout_ms)
{
    int64_t deadline = s_now_ms () + timeout_ms;
    while (true) {
        char *text = NULL;
        ck_assert_int_eq (s_get (port, "/metrics", &text), 200);
        if (!series || s_sample (text, series) == value || s_now_ms () >= deadline)
            return text;
        free (text);
        poll (NULL, 0, 50);             //  the gauges move once per loop turn
    }
}

//  Wait until path on port answers want (a process still starting: bounded).
static void
s_wait_status (int port, const char *path, int want, int timeout_ms)
{
    int64_t deadline = s_now_ms () + timeout_ms;
    int status = 0;
    while ((status = s_get (port, path, NULL)) != want && s_now_ms () < deadline)
        poll (NULL, 0, 50);
    ck_assert_msg (status == want, "%s on port %d: expected %d within %d ms, got %d", path, port,
                   want, timeout_ms, status);
}

//  promtool check metrics on text; -1 when promtool is not installed.
static int
s_promtool (const char *text, char *output, size_t outlen)
{
    if (system ("command -v promtool >/dev/null 2>&1"))
        return -1;
    char path [] = "/tmp/kgym-metrics-e2e-XXXXXX";
    int fd = mkstemp (path);
    ck_assert_int_ge (fd, 0);
    ck_assert_int_eq (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
    char command [512];
    snprintf (command, sizeof command, "promtool check metrics < %s 2>&1", path);
    FILE *pipe = popen (command, "r");
    ck_assert_ptr_nonnull (pipe);
    size_t len = fread (output, 1, outlen - 1, pipe);
    output [len] = 0;
    int status = pclose (pipe);
    unlink (path);
    return WIFEXITED (status)? WEXITSTATUS (status): 255;
}

static void
s_check_promtool (const char *what, const char *text)
{
    char output [4096];
    int rc = s_promtool (text, output, sizeof output);
    ck_assert_msg (rc == -1 || rc == 0, "promtool check metrics on the %s page: %d\n%s", what, rc,
                   output);
}

static void
s_setup (void)
{
    ck_assert_ptr_nonnull (mkdtemp (s_cache_dir));
    snprintf (s_client_ep, sizeof s_client_ep, "tcp://127.0.0.1:%d", testutil_free_port ());
    snprintf (s_worker_ep, sizeof s_worker_ep, "tcp://127.0.0.1:%d", testutil_free_port ());
    s_broker_port = testutil_free_port ();
    s_worker_port = testutil_free_port ();
    char broker [512], worker [512], cache [256], bmetrics [64], wmetrics [64];
    snprintf (broker, sizeof broker, "%s/broker/kgym-broker", KGYM_BUILD_DIR);
    snprintf (worker, sizeof worker, "%s/worker/kgym-worker", KGYM_BUILD_DIR);
    snprintf (cache, sizeof cache, "%s/modules.sqlite", s_cache_dir);
    snprintf (bmetrics, sizeof bmetrics, "127.0.0.1:%d", s_broker_port);
    snprintf (wmetrics, sizeof wmetrics, "127.0.0.1:%d", s_worker_port);
    char *bargv[] = { broker, "--clients", s_client_ep, "--workers", s_worker_ep,
                      "--heartbeat", "300", "--metrics", bmetrics, "--log-format", "json", NULL };
    s_pids [0] = testutil_spawn (bargv);
    char *wargv[] = { worker, "--broker", s_worker_ep, "--backend", "cpu", "--cache", cache,
                      "--name", "metrics-worker", "--heartbeat", "300", "--metrics", wmetrics,
                      "--log-format", "json", "--compilers", "2", NULL };
    s_pids [1] = testutil_spawn (wargv);
}

static void
s_teardown (void)
{
    for (int i = 1; i >= 0; i--)
        if (s_pids [i] > 0) {
            kill (s_pids [i], SIGTERM);
            int status;
            waitpid (s_pids [i], &status, 0);
            s_pids [i] = 0;
        }
    char command [300];
    snprintf (command, sizeof command, "rm -rf %s", s_cache_dir);
    ck_assert_int_eq (system (command), 0);
    strcpy (s_cache_dir, "/tmp/kgym-test-metrics-XXXXXX");
}

static const char *s_candidates [] = { "naive", "optimised", "tail_bug" };
#define S_BATCH 3

static void
s_submit_timeout (client_kgym_t *client, uint64_t ref, const char *candidate, double timeout)
{
    json_t *task = testutil_load_json ("examples/cpu/gelu_f32/task.json");
    char path [256];
    snprintf (path, sizeof path, "examples/cpu/gelu_f32/candidates/%s.json", candidate);
    json_t *code = testutil_load_json (path);
    json_t *job = json_pack ("{s:o, s:o, s:{s:f}}", "task", task, "candidate", code,
                             "eval", "timeout", timeout);
    char err [256];
    ck_assert_msg (client_kgym_submit (client, ref, job, err, sizeof err) == 0, "submit: %s", err);
    json_decref (job);
}

static void
s_submit (client_kgym_t *client, uint64_t ref, const char *candidate)
{
    s_submit_timeout (client, ref, candidate, 6.0);
}

//  Collect n results; counts the verdicts into statuses (names) / counts.
static void
s_collect (client_kgym_t *client, size_t n, char statuses [][32], int *counts, size_t *kinds)
{
    size_t got = 0;
    while (got < n) {
        client_event_t event;
        ck_assert_msg (client_kgym_recv (client, 120000, &event) == 0,
                       "no reply for 120 s with %zu of %zu results in", got, n);
        if (event.type == CLIENT_EVENT_RESULT) {
            const char *status = json_string_value (json_object_get (event.result, "status"));
            ck_assert_ptr_nonnull (status);
            size_t k = 0;
            while (k < *kinds && strcmp (statuses [k], status))
                k++;
            if (k == *kinds) {
                snprintf (statuses [k], 32, "%s", status);
                counts [k] = 0;
                (*kinds)++;
            }
            counts [k]++;
            got++;
        }
        else
        if (event.type == CLIENT_EVENT_ERROR)
            ck_abort_msg ("unexpected ERROR %u: %s", event.code, event.reason);
        client_event_clear (&event);
    }
}

START_TEST (test_figures_follow_a_batch_through_broker_and_worker)
{
    //  Up: alive at once, ready once the worker has registered.
    s_wait_status (s_broker_port, "/healthz", 200, 10000);
    s_wait_status (s_broker_port, "/readyz", 200, 10000);
    s_wait_status (s_worker_port, "/healthz", 200, 10000);
    s_wait_status (s_worker_port, "/readyz", 200, 10000);
    char *page = s_scrape_until (s_broker_port, "kgym_workers{backend=\"cpu\",state=\"idle\"}", 1, 5000);
    ck_assert_msg (s_sample (page, "kgym_workers{backend=\"cpu\",state=\"idle\"}") == 1,
                   "expected one idle cpu worker:\n%s", page);
    ck_assert (s_sample (page, "kgym_build_info{version=\"" KGYM_VERSION "\",component=\"broker\"}") == 1);
    free (page);

    client_kgym_t *client = client_kgym_new (s_client_ep);
    ck_assert_ptr_nonnull (client);
    for (size_t i = 0; i < S_BATCH; i++)
        s_submit (client, i + 1, s_candidates [i]);

    //  During the batch: every page is well formed, and nothing is counted twice.
    page = s_scrape_until (s_broker_port, NULL, 0, 0);
    s_check_promtool ("broker (during)", page);
    double submitted = s_sample (page, "kgym_jobs_submitted_total{backend=\"cpu\"}");
    ck_assert_msg (isnan (submitted) || submitted <= S_BATCH, "submitted %f during", submitted);
    free (page);
    page = s_scrape_until (s_worker_port, NULL, 0, 0);
    s_check_promtool ("worker (during)", page);
    ck_assert (s_family_sum (page, "kgym_worker_jobs_total") <= S_BATCH);
    free (page);

    char statuses [8][32];
    int counts [8];
    size_t kinds = 0;
    s_collect (client, S_BATCH, statuses, counts, &kinds);

    //  After: the broker counted the batch once each way and its queue is empty.
    page = s_scrape_until (s_broker_port, "kgym_jobs_in_flight{backend=\"cpu\"}", 0, 5000);
    s_check_promtool ("broker (after)", page);
    ck_assert_msg (s_sample (page, "kgym_jobs_submitted_total{backend=\"cpu\"}") == S_BATCH,
                   "submitted: expected %d in\n%s", S_BATCH, page);
    ck_assert_msg (s_sample (page, "kgym_jobs_dispatched_total{backend=\"cpu\"}") == S_BATCH,
                   "dispatched: expected %d in\n%s", S_BATCH, page);
    ck_assert_msg (s_family_sum (page, "kgym_jobs_completed_total") == S_BATCH,
                   "completed: expected %d in\n%s", S_BATCH, page);
    ck_assert (s_sample (page, "kgym_queue_depth{backend=\"cpu\"}") == 0);
    ck_assert (s_sample (page, "kgym_jobs_in_flight{backend=\"cpu\"}") == 0);
    ck_assert (s_sample (page, "kgym_job_queue_wait_seconds_count{backend=\"cpu\"}") == S_BATCH);
    ck_assert (s_sample (page, "kgym_job_duration_seconds_count{phase=\"total\"}") == S_BATCH);
    ck_assert (s_sample (page, "kgym_job_duration_seconds_count{phase=\"lease\"}") == S_BATCH);
    ck_assert (s_sample (page, "process_open_fds") > 0);
    for (size_t k = 0; k < kinds; k++) {
        char series [128];
        snprintf (series, sizeof series, "kgym_jobs_completed_total{status=\"%s\"}", statuses [k]);
        ck_assert_msg (s_sample (page, series) == counts [k], "%s: expected %d in\n%s", series,
                       counts [k], page);
    }
    free (page);

    //  The worker graded the same jobs with the same verdicts.
    page = s_scrape_until (s_worker_port, "kgym_worker_busy{gpu=\"\",UUID=\"\"}", 0, 5000);
    s_check_promtool ("worker (after)", page);
    for (size_t k = 0; k < kinds; k++) {
        char series [128];
        snprintf (series, sizeof series, "kgym_worker_jobs_total{status=\"%s\"}", statuses [k]);
        ck_assert_msg (s_sample (page, series) == counts [k], "%s: expected %d in\n%s", series,
                       counts [k], page);
    }
    ck_assert (s_family_sum (page, "kgym_worker_jobs_total") == S_BATCH);
    ck_assert (s_sample (page, "kgym_worker_busy{gpu=\"\",UUID=\"\"}") == 0);
    ck_assert (s_sample (page, "kgym_worker_connected") == 1);
    ck_assert (s_sample (page, "kgym_worker_state{gpu=\"\",UUID=\"\",state=\"ready\"}") == 1);
    ck_assert (s_sample (page, "kgym_worker_job_duration_seconds_count{phase=\"total\"}") == S_BATCH);
    double misses = s_sample (page, "kgym_worker_compile_cache_misses_total");
    ck_assert_msg (misses >= 1, "compile cache misses: expected >= 1 in\n%s", page);
    //  The compile pool asked for, and the run slot's time the batch took.
    ck_assert (s_sample (page, "kgym_worker_compilers{gpu=\"\",UUID=\"\"}") == 2);
    ck_assert (s_sample (page, "kgym_worker_compiles{gpu=\"\",UUID=\"\"}") == 0);
    ck_assert_msg (s_sample (page, "kgym_worker_device_busy_seconds_total{gpu=\"\",UUID=\"\"}") > 0,
                   "no busy seconds after a batch in\n%s", page);
    double ratio = s_sample (page, "kgym_worker_device_busy_ratio{gpu=\"\",UUID=\"\"}");
    ck_assert_msg (ratio >= 0 && ratio <= 1, "busy ratio %g", ratio);
    free (page);

    //  The same job again is answered from the broker's result cache: no
    //  worker sees it.
    s_submit (client, S_BATCH + 1, s_candidates [0]);
    s_collect (client, 1, statuses, counts, &kinds);
    page = s_scrape_until (s_broker_port, "kgym_cache_hits_total", 1, 5000);
    ck_assert_msg (s_sample (page, "kgym_cache_hits_total") == 1, "result cache hits: expected 1");
    ck_assert (s_family_sum (page, "kgym_jobs_completed_total") == S_BATCH + 1);
    ck_assert (s_sample (page, "kgym_jobs_dispatched_total{backend=\"cpu\"}") == S_BATCH);
    free (page);

    //  A repeat of a candidate under other settings is graded again, its
    //  module compiled from the worker's compile cache.
    s_submit_timeout (client, S_BATCH + 2, s_candidates [0], 7.0);
    s_collect (client, 1, statuses, counts, &kinds);
    page = s_scrape_until (s_worker_port, NULL, 0, 0);
    ck_assert_msg (s_sample (page, "kgym_worker_compile_cache_hits_total") > 0,
                   "compile cache hits: expected > 0 on a repeat");
    ck_assert (s_family_sum (page, "kgym_worker_jobs_total") == S_BATCH + 1);
    free (page);
    page = s_scrape_until (s_broker_port, "kgym_queue_depth{backend=\"cpu\"}", 0, 5000);
    ck_assert (s_sample (page, "kgym_jobs_submitted_total{backend=\"cpu\"}") == S_BATCH + 2);
    ck_assert (s_family_sum (page, "kgym_jobs_completed_total") == S_BATCH + 2);
    free (page);
    client_kgym_destroy (&client);
    s_wait_status (s_worker_port, "/readyz", 200, 1000);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("metrics_e2e");
    TCase *tc = tcase_create ("processes");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 300);
    tcase_add_test (tc, test_figures_follow_a_batch_through_broker_and_worker);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
