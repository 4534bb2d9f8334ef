/*  echo_backend - a backend built only for the tests, proving the seam.

    Serves target "echo" for programs of language "echo": a program runs
    nothing, its source says what its run leaves in each output and how
    long each timed run took. Judged by the grading core (worker_grade)
    like any backend's runs. Linked only into the tests' registry
    (worker_registry.c built with KGYM_TEST_BACKENDS, tests/meson.build):
    worker_eval, worker_server, common_task and the CLI never name it.
    The source format is in echo_backend.c.
*/
#ifndef ECHO_BACKEND_H
#define ECHO_BACKEND_H

#include "worker_backend.h"

extern const worker_backend_t echo_backend;

#endif
