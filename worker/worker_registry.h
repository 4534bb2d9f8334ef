/*  worker_registry - the grading backends compiled into this program.

    The one list of backends (worker_registry.c: one line per backend).
    Everything that needs a backend looks it up here: the evaluator by the
    task's target and the reference's language, kgym-worker and the CLI by
    name. Installs the task format's catalog (common_backend) so task
    parsing knows the same targets and languages.
*/
#ifndef WORKER_REGISTRY_H
#define WORKER_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include "worker_backend.h"

//  Every backend, NULL-terminated. Installs the catalog on first use.
const worker_backend_t *const *worker_registry_all (void);

//  The backend named name, NULL when none.
const worker_backend_t *worker_registry_named (const char *name);

//  The backend serving target (a task's `backend`) for programs in lang
//  (NULL: the target's first backend). NULL when none.
const worker_backend_t *worker_registry_find (const char *target, const char *lang);

//  True when some backend serves target.
bool worker_registry_serves (const char *target);

//  "cpu, cuda": every target a worker can serve, for usage lines. Returns buf.
const char *worker_registry_targets (char *buf, size_t len);

#endif
