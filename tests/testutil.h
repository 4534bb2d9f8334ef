/*  testutil - helpers shared by the libcheck tests.

    Paths into the source tree, loading example files, and starting a
    broker plus CPU workers in-process on loopback for end-to-end tests.
*/
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <check.h>
#include <jansson.h>
#include <sys/types.h>

//  Absolute path of a file in the source tree (static buffer per call site is
//  not safe: returns malloc'd, caller frees).
char *testutil_source_path (const char *relative);

//  Load a JSON file from the source tree; fails the test if it can't.
json_t *testutil_load_json (const char *relative);

//  Run a suite; returns the process exit code (0 when all passed).
int testutil_run_suite (Suite *suite);

//  A free loopback TCP port (the race with another process is acceptable in a test).
int testutil_free_port (void);

//  posix_spawn argv [0] with argv and this environment; fails the test when it cannot.
pid_t testutil_spawn (char *const argv []);

#endif
