/*  worker_registry - the grading backends compiled into this program.

    Adding a backend: a folder worker/NAME with its meson.build (adding its
    sources to the worker library and defining its runners), a constant
    `const worker_backend_t NAME_backend` in it, and one line below
    (docs/architecture.md, "How to add a backend"). The tests build this
    file a second time with KGYM_TEST_BACKENDS, adding tests/echo's.
*/
#include "worker_registry.h"
#include "kgym_config.h"
#include <pthread.h>
#include <string.h>

extern const worker_backend_t cpu_backend;
#if KGYM_HAVE_CUDA
extern const worker_backend_t cuda_backend;
#endif
extern const worker_backend_t python_backend;
#ifdef KGYM_TEST_BACKENDS
extern const worker_backend_t echo_backend;
#endif

static const worker_backend_t *const s_backends [] = {
    &cpu_backend,
#if KGYM_HAVE_CUDA
    &cuda_backend,
#endif
    &python_backend,
#ifdef KGYM_TEST_BACKENDS
    &echo_backend,                  //  tests only: tests/echo
#endif
    NULL
};

//  The same list as the task format sees it.
static const common_backend_info_t *s_catalog [sizeof s_backends / sizeof s_backends [0]];
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

static void
s_install (void)
{
    for (size_t i = 0; s_backends [i]; i++)
        s_catalog [i] = &s_backends [i]->info;
    common_backend_install (s_catalog);
}

const worker_backend_t *const *
worker_registry_all (void)
{
    pthread_once (&s_once, s_install);
    return s_backends;
}

const worker_backend_t *
worker_registry_named (const char *name)
{
    const worker_backend_t *const *all = worker_registry_all ();
    for (size_t i = 0; name && all [i]; i++)
        if (strcmp (all [i]->info.name, name) == 0)
            return all [i];
    return NULL;
}

const worker_backend_t *
worker_registry_find (const char *target, const char *lang)
{
    worker_registry_all ();
    const common_backend_info_t *info = common_backend_find (target, lang);
    for (size_t i = 0; info && s_backends [i]; i++)
        if (&s_backends [i]->info == info)
            return s_backends [i];
    return NULL;
}

bool
worker_registry_serves (const char *target)
{
    return worker_registry_find (target, NULL) != NULL;
}

const char *
worker_registry_targets (char *buf, size_t len)
{
    worker_registry_all ();
    return common_backend_list (NULL, false, buf, len);
}
