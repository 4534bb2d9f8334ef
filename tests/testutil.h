/*  testutil - helpers shared by the libcheck tests.

    Paths into the source tree, loading example files, starting a broker
    plus CPU workers in-process on loopback for end-to-end tests, and an
    evaluator with the check of its verdicts.
*/
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <check.h>
#include <jansson.h>
#include <sys/types.h>
#include "broker_server.h"
#include "worker_eval.h"

//  Absolute path of a file in the source tree (static buffer per call site is
//  not safe: returns malloc'd, caller frees).
char *testutil_source_path (const char *relative);

//  Load a JSON file from the source tree; fails the test if it can't.
json_t *testutil_load_json (const char *relative);

//  A small CPU task the worker tests grade against: scale_f32, y = 2.5 x
//  over 1000 uniform floats (a new reference; the candidate's kernel is
//  "scale (const float *x, float *y, float a, int n)").
json_t *testutil_scale_task (void);

//  Run a suite; returns the process exit code (0 when all passed).
int testutil_run_suite (Suite *suite);

//  A scratch directory /tmp/kgym-test-NAME-XXXXXX, its path into dir
//  (size bytes); fails the test when it cannot be made.
void testutil_dir_make (char *dir, size_t size, const char *name);

//  Remove dir and everything in it.
void testutil_dir_remove (const char *dir);

//  An in-process broker (broker_server_actor) on loopback.
typedef struct {
    zactor_t *actor;            //  the broker
    char *clients;              //  its client endpoint
    char *workers;              //  its worker endpoint
} testutil_broker_t;

//  Start a broker with cfg, an endpoint that is NULL or binds every
//  interface (the defaults) made tcp://127.0.0.1:*; fails the test when it
//  does not start.
void testutil_broker_start (testutil_broker_t *self, broker_config_t *cfg);

//  Stop it (harmless twice).
void testutil_broker_stop (testutil_broker_t *self);

//  A free loopback TCP port (the race with another process is acceptable in a test).
int testutil_free_port (void);

//  posix_spawn argv [0] with argv and this environment; fails the test when it cannot.
pid_t testutil_spawn (char *const argv []);

//  Start argv [0] with this environment: stdin from in_path, stdout and
//  stderr into out_path and err_path (NULL: inherited), or stdout into
//  out_fd (>= 0). The child is killed when the test process ends, even
//  when the test fails.
pid_t testutil_spawn_io (char *const argv [], const char *in_path, const char *out_path,
                         const char *err_path, int out_fd);

//  A whole file as a string (to free); fails the test when it cannot be read.
char *testutil_read_file (const char *path);

//  Run the built kgym with the arguments (NULL-terminated), stdin from
//  in_path (NULL: inherited), its output through dir/kgym.out and
//  dir/kgym.err; both come back (to free). The exit status (-1: killed).
int testutil_kgym_in (const char *dir, const char *in_path, char **out, char **err, ...);

//  The same with stdin inherited.
int testutil_kgym (const char *dir, char **out, char **err, ...);

//  A path under the build folder (to free): $KGYM_BUILD_DIR when set (a
//  build copied elsewhere, as on the GPU machine), else this build's.
char *testutil_build_path (const char *relative);

//  The JSON line of out (JSON lines) whose string key ends with suffix
//  (to release); fails the test when there is none.
json_t *testutil_json_line (const char *out, const char *key, const char *suffix);

//  An evaluator serving backend (NULL: any), named "test", its compile
//  cache at cache_path (NULL: the default), max_job_bytes as
//  worker_eval_config_t's (0: the backend's). Fails the test when it cannot be made.
worker_eval_t *testutil_eval_new (const char *backend, const char *cache_path, uint64_t max_job_bytes);

//  Fail the test unless result's status is status and, when part is given,
//  its message or compile_log holds part. The whole result is said on failure.
void testutil_expect_status (json_t *result, const char *status, const char *part);

#endif
