/*  testutil - helpers shared by the libcheck tests.  */
#include "testutil.h"
#include "kgym_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <signal.h>
#include <stdarg.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

extern char **environ;

char *
testutil_source_path (const char *relative)
{
    const char *root = getenv ("KGYM_SOURCE_DIR");
    if (!root)
        root = KGYM_SOURCE_DIR;
    size_t len = strlen (root) + strlen (relative) + 2;
    char *path = malloc (len);
    ck_assert_ptr_nonnull (path);
    snprintf (path, len, "%s/%s", root, relative);
    return path;
}

json_t *
testutil_load_json (const char *relative)
{
    char *path = testutil_source_path (relative);
    json_error_t error;
    json_t *json = json_load_file (path, 0, &error);
    ck_assert_msg (json != NULL, "cannot load %s: %s (line %d)", path, error.text, error.line);
    free (path);
    return json;
}

json_t *
testutil_scale_task (void)
{
    return json_pack ("{s:s, s:s, s:[{s:s,s:s,s:s,s:[s],s:{s:s,s:i,s:i}}, {s:s,s:s,s:s,s:[s]},"
                      " {s:s,s:s,s:s,s:f}, {s:s,s:s,s:s,s:s}], s:[{s:i}], s:{s:f,s:f},"
                      " s:{s:s, s:[{s:s}]}}",
        "name", "scale_f32", "backend", "cpu",
        "args",
            "name", "x", "kind", "input", "dtype", "f32", "shape", "N", "init", "dist", "uniform",
            "low", -1, "high", 1,
            "name", "y", "kind", "output", "dtype", "f32", "shape", "N",
            "name", "a", "kind", "scalar", "dtype", "f32", "value", 2.5,
            "name", "N", "kind", "scalar", "dtype", "i32", "value", "N",
        "sizes", "N", 1000,
        "tolerance", "atol", 1e-6, "rtol", 1e-6,
        "reference", "source",
            "void scale_ref (const float *x, float *y, float a, int n)"
            " { for (int i = 0; i < n; i++) y [i] = a * x [i]; }\n",
            "launches", "kernel", "scale_ref");
}

int
testutil_run_suite (Suite *suite)
{
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed == 0 ? 0 : 1;
}

void
testutil_dir_make (char *dir, size_t size, const char *name)
{
    snprintf (dir, size, "/tmp/kgym-test-%s-XXXXXX", name);
    ck_assert_ptr_nonnull (mkdtemp (dir));
}

void
testutil_dir_remove (const char *dir)
{
    char command [600];
    snprintf (command, sizeof command, "rm -rf '%s'", dir);
    if (system (command) != 0)
        fprintf (stderr, "cannot remove %s\n", dir);
}

void
testutil_broker_start (testutil_broker_t *self, broker_config_t *cfg)
{
    //  The defaults (tcp://*:5555) are a deployment's, not a test's.
    if (!cfg->clients_endpoint || strstr (cfg->clients_endpoint, "*:"))
        cfg->clients_endpoint = "tcp://127.0.0.1:*";
    if (!cfg->workers_endpoint || strstr (cfg->workers_endpoint, "*:"))
        cfg->workers_endpoint = "tcp://127.0.0.1:*";
    self->actor = zactor_new (broker_server_actor, cfg);
    ck_assert_ptr_nonnull (self->actor);
    zstr_send (self->actor, "ENDPOINTS");
    ck_assert_int_eq (zstr_recvx (self->actor, &self->clients, &self->workers, NULL), 2);
    ck_assert_msg (self->clients [0], "broker did not start: %s", self->workers);
}

void
testutil_broker_stop (testutil_broker_t *self)
{
    zactor_destroy (&self->actor);
    zstr_free (&self->clients);
    zstr_free (&self->workers);
}

int
testutil_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    ck_assert_int_eq (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    socklen_t len = sizeof addr;
    getsockname (fd, (struct sockaddr *) &addr, &len);
    close (fd);
    return ntohs (addr.sin_port);
}

pid_t
testutil_spawn (char *const argv [])
{
    pid_t pid;
    int rc = posix_spawn (&pid, argv [0], NULL, NULL, argv, environ);
    ck_assert_msg (rc == 0, "cannot start %s: %s", argv [0], strerror (rc));
    return pid;
}

pid_t
testutil_spawn_io (char *const argv [], const char *in_path, const char *out_path,
                   const char *err_path, int out_fd)
{
    fflush (stdout);
    fflush (stderr);
    pid_t parent = getpid ();
    pid_t pid = fork ();
    ck_assert_int_ge (pid, 0);
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        if (getppid () != parent)
            _exit (127);
        if (in_path) {
            int fd = open (in_path, O_RDONLY);
            if (fd < 0)
                _exit (127);
            dup2 (fd, STDIN_FILENO);
        }
        if (out_fd >= 0)
            dup2 (out_fd, STDOUT_FILENO);
        if (out_path) {
            int fd = open (out_path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
            dup2 (fd, STDOUT_FILENO);
        }
        if (err_path) {
            int fd = open (err_path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
            dup2 (fd, STDERR_FILENO);
        }
        execv (argv [0], argv);
        _exit (127);
    }
    return pid;
}

char *
testutil_read_file (const char *path)
{
    FILE *file = fopen (path, "r");
    ck_assert_msg (file != NULL, "cannot read %s", path);
    char *text = calloc (1, 1 << 20);
    ck_assert_ptr_nonnull (text);
    size_t size = fread (text, 1, (1 << 20) - 1, file);
    text [size] = 0;
    fclose (file);
    return text;
}

char *
testutil_build_path (const char *relative)
{
    const char *root = getenv ("KGYM_BUILD_DIR");
    char *path = NULL;
    ck_assert (asprintf (&path, "%s/%s", root && *root? root: KGYM_BUILD_DIR, relative) > 0);
    return path;
}

static int
s_kgym (const char *dir, const char *in_path, char **out, char **err, va_list args)
{
    char kgym [512];
    char *built = testutil_build_path ("client/kgym");
    snprintf (kgym, sizeof kgym, "%s", built);
    free (built);
    char *argv [48] = { kgym };
    int argc = 1;
    char *arg;
    while ((arg = va_arg (args, char *)) && argc < 47)
        argv [argc++] = arg;
    argv [argc] = NULL;
    char out_path [512], err_path [512];
    snprintf (out_path, sizeof out_path, "%s/kgym.out", dir);
    snprintf (err_path, sizeof err_path, "%s/kgym.err", dir);
    pid_t pid = testutil_spawn_io (argv, in_path, out_path, err_path, -1);
    int status;
    ck_assert_int_eq (waitpid (pid, &status, 0), pid);
    *out = testutil_read_file (out_path);
    *err = testutil_read_file (err_path);
    return WIFEXITED (status)? WEXITSTATUS (status): -1;
}

int
testutil_kgym_in (const char *dir, const char *in_path, char **out, char **err, ...)
{
    va_list args;
    va_start (args, err);
    int rc = s_kgym (dir, in_path, out, err, args);
    va_end (args);
    return rc;
}

int
testutil_kgym (const char *dir, char **out, char **err, ...)
{
    va_list args;
    va_start (args, err);
    int rc = s_kgym (dir, NULL, out, err, args);
    va_end (args);
    return rc;
}

json_t *
testutil_json_line (const char *out, const char *key, const char *suffix)
{
    char *copy = strdup (out);
    ck_assert_ptr_nonnull (copy);
    json_t *found = NULL;
    char *save = NULL;
    for (char *line = strtok_r (copy, "\n", &save); line && !found; line = strtok_r (NULL, "\n", &save)) {
        json_t *json = json_loads (line, 0, NULL);
        ck_assert_msg (json != NULL, "not a JSON line: %s", line);
        const char *value = json_string_value (json_object_get (json, key));
        size_t n = value? strlen (value): 0, m = strlen (suffix);
        if (n >= m && strcmp (value + n - m, suffix) == 0)
            found = json;
        else
            json_decref (json);
    }
    free (copy);
    ck_assert_msg (found != NULL, "no line whose %s ends with %s in:\n%s", key, suffix, out);
    return found;
}

worker_eval_t *
testutil_eval_new (const char *backend, const char *cache_path, uint64_t max_job_bytes)
{
    worker_eval_config_t cfg;
    worker_eval_config_default (&cfg);
    cfg.backend = backend;
    cfg.cache_path = cache_path;
    cfg.worker_name = "test";
    cfg.max_job_bytes = max_job_bytes;
    char err [512] = "";
    worker_eval_t *eval = worker_eval_new (&cfg, err, sizeof err);
    ck_assert_msg (eval != NULL, "evaluator for %s: %s", backend? backend: "any backend", err);
    return eval;
}

void
testutil_expect_status (json_t *result, const char *status, const char *part)
{
    const char *got = json_string_value (json_object_get (result, "status"));
    const char *message = json_string_value (json_object_get (result, "message"));
    const char *log = json_string_value (json_object_get (result, "compile_log"));
    char *text = json_dumps (result, JSON_COMPACT);
    ck_assert_msg (got && strcmp (got, status) == 0, "expected status %s, got %.900s", status, text);
    if (part)
        ck_assert_msg ((message && strstr (message, part)) || (log && strstr (log, part)),
                       "expected '%s' in the message or compile log: %.900s", part, text);
    free (text);
}
