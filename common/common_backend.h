/*  common_backend - which task backends and program languages exist.

    A task's `backend` names where its jobs run (the broker routes on it:
    "cpu", "cuda"); each of its programs has a `lang` ("c", "cuda", "ptx").
    The worker's backend registry (worker/worker_registry.c) knows which
    exist in this build and installs that catalog here once; the task parser
    (common_task) asks it instead of naming any backend itself.

    A program that installed no catalog (a client that only sends jobs)
    accepts any well-formed backend and language: the worker that grades the
    job decides.
*/
#ifndef COMMON_BACKEND_H
#define COMMON_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#define COMMON_BACKEND_MAX_NAMES 8      //  targets or languages of one entry

//  One grading backend as the task format sees it.
typedef struct {
    const char *name;                   //  the backend's own name ("cpu", "cuda")
    const char *targets [COMMON_BACKEND_MAX_NAMES]; //  task `backend` values it serves, NULL-terminated
    const char *langs [COMMON_BACKEND_MAX_NAMES];   //  program languages it compiles, NULL-terminated; [0] its default
    bool modules;                       //  its programs are whole modules (a Python task): no args,
                                        //  launches or workspace; the task's "python" object applies
} common_backend_info_t;

//  Install the catalog: a NULL-terminated array of entries that outlives
//  the process (the registry's constants). Call before any parsing.
void common_backend_install (const common_backend_info_t *const *catalog);

//  True when a catalog is installed.
bool common_backend_known (void);

//  The entry serving target with language lang (lang NULL: the first entry
//  serving target). NULL when none (or when no catalog is installed).
const common_backend_info_t *common_backend_find (const char *target, const char *lang);

//  True when programs of lang on target are modules (common_backend_info_t);
//  without a catalog: when lang is given and names no known kind, unknown (false).
bool common_backend_modules (const char *target, const char *lang);

//  The default language of target's programs (the first entry's first
//  language), NULL when unknown.
const char *common_backend_default_lang (const char *target);

//  "cpu, cuda" (every target) or "c, cuda, ptx" (target's languages; target
//  NULL: every language), for messages. Returns buf.
const char *common_backend_list (const char *target, bool langs, char *buf, size_t len);

#endif
