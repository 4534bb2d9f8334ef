/*  sandbox_find - where the helper programs of the sandbox are.  */
#include "sandbox_find.h"
#include "kgym_config.h"
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_PROGRAMS  8               //  distinct programs one process looks for

//  One program, found once.
typedef struct {
    const char *program;            //  file name; NULL = free entry
    char path [PATH_MAX];           //  resolved; "" when missing
} s_found_t;

static s_found_t s_found [S_PROGRAMS];
static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;

static bool
s_try (char *out, const char *path)
{
    struct stat st;
    if (strlen (path) >= PATH_MAX || stat (path, &st) != 0 || !S_ISREG (st.st_mode)
    ||  access (path, X_OK) != 0)
        return false;
    snprintf (out, PATH_MAX, "%s", path);
    return true;
}

static void
s_search (const char *program, const char *env, const char *backend, char *out)
{
    out [0] = 0;
    const char *value = env? getenv (env): NULL;
    if (value && *value && s_try (out, value))
        return;
    //  Beside us, in the build tree relative to us (tests), in our libexec,
    //  in the configured build tree and libexec.
    char self [PATH_MAX], cand [5][PATH_MAX * 2];
    int n = 0;
    ssize_t len = readlink ("/proc/self/exe", self, sizeof self - 1);
    char *slash = len > 0? (self [len] = 0, strrchr (self, '/')): NULL;
    if (slash) {
        *slash = 0;
        snprintf (cand [n++], sizeof cand [0], "%s/%s", self, program);
        snprintf (cand [n++], sizeof cand [0], "%s/../worker/%s/%s", self, backend, program);
        snprintf (cand [n++], sizeof cand [0], "%s/../libexec/%s", self, program);
    }
    snprintf (cand [n++], sizeof cand [0], "%s/worker/%s/%s", KGYM_BUILD_DIR, backend, program);
    snprintf (cand [n++], sizeof cand [0], "%s/%s", KGYM_LIBEXECDIR, program);
    for (int i = 0; i < n && !s_try (out, cand [i]); i++)
        ;
}

const char *
sandbox_find (const char *program, const char *env, const char *backend)
{
    const char *path = NULL;
    pthread_mutex_lock (&s_lock);
    for (int i = 0; i < S_PROGRAMS; i++) {
        s_found_t *entry = &s_found [i];
        if (entry->program && strcmp (entry->program, program) != 0)
            continue;
        if (!entry->program) {
            entry->program = program;
            s_search (program, env, backend, entry->path);
        }
        path = entry->path [0]? entry->path: NULL;
        break;
    }
    pthread_mutex_unlock (&s_lock);
    return path;
}
