/*  cpu_cc - C candidates into shared objects with the system compiler.

    A compile is: check the options against the allow-list, hash the key
    material (format, compiler identity, fixed flags, options in order, the
    host CPU when -march=native, the source; each behind a typed delimiter),
    look in the cache, and on a miss run the compiler through
    sandbox_exec (kind cc: its own uid, its own pid namespace, a root that
    holds only the toolchain, read-only, and its private directory, so no
    host file can reach the object or the log) in a private directory
    (0700, handed to the runner's uid, under a 0711 parent), read k.so back
    without following links, store it, and remove the directory. Only
    successful compiles are cached: a failure may have been a resource
    limit rather than the source.
*/
#include "common_util.h"
#include "cpu_cc.h"
#include "common_hash.h"
#include "common_log.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_FORMAT        "kgym-cc v1"
#define S_MAX_OPTIONS   64
#define S_MAX_OPTION    128         //  bytes of one option
#define S_MAX_SO        (256u << 20)
#define S_TMP_BASE      "/tmp/kgym-cc"

extern char **environ;

//  Flags every compile gets, ahead of the user's (a user -O or -std wins).
static const char *s_fixed_flags [] = {
    "-shared", "-fPIC", "-O2", "-std=gnu11", "-fvisibility=default", NULL
};

static const char *s_allowed [] = {
    "-O0", "-O1", "-O2", "-O3", "-Os", "-Ofast", "-ffast-math", "-funroll-loops",
    "-ftree-vectorize", "-fno-strict-aliasing", "-march=native", "-mavx", "-mavx2", "-mfma",
    "-mavx512f", "-msse4.2", "-std=c99", "-std=c11", "-std=c17", "-std=gnu99", "-std=gnu11",
    "-std=gnu17", NULL
};


void
cpu_cc_result_free (cpu_cc_result_t *result)
{
    if (!result)
        return;
    free (result->so);
    free (result->log);
    result->so = NULL;
    result->log = NULL;
    result->so_size = 0;
}

//  -DNAME or -DNAME=VALUE, NAME an identifier, VALUE [A-Za-z0-9_.+-]*.
static bool
s_define_ok (const char *opt)
{
    const char *p = opt + 2;
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_'))
        return false;
    for (p++; *p && *p != '='; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')
           || *p == '_'))
            return false;
    if (*p == '=')
        for (p++; *p; p++)
            if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')
               || *p == '_' || *p == '.' || *p == '+' || *p == '-'))
                return false;
    return true;
}

int
cpu_cc_check_options (char *const *options, size_t noptions, char *err, size_t errlen)
{
    if (noptions > S_MAX_OPTIONS) {
        snprintf (err, errlen, "too many options (%zu, at most %d)", noptions, S_MAX_OPTIONS);
        return -1;
    }
    for (size_t i = 0; i < noptions; i++) {
        const char *opt = options [i];
        if (!opt) {
            snprintf (err, errlen, "option %zu is missing", i);
            return -1;
        }
        bool ok = false;
        size_t len = strnlen (opt, S_MAX_OPTION + 1);
        if (len <= S_MAX_OPTION) {
            for (int j = 0; s_allowed [j] && !ok; j++)
                ok = strcmp (opt, s_allowed [j]) == 0;
            if (!ok && strncmp (opt, "-D", 2) == 0)
                ok = s_define_ok (opt);
        }
        if (!ok) {
            //  Quote it safely: printable, bounded.
            char shown [68];
            size_t n = 0;
            for (const char *p = opt; *p && n < 64; p++)
                shown [n++] = (*p >= 32 && *p < 127)? *p: '?';
            shown [n] = 0;
            snprintf (err, errlen, "option '%s%s' is not allowed", shown, len > 64? "...": "");
            return -1;
        }
    }
    return 0;
}

//  ---------------------------------------------------------------------
//  Compiler identity and the host CPU (process-wide, found once)

static char s_cc_path [PATH_MAX];        //  the compiler as found (the cache key names it)
static char s_cc_real [PATH_MAX];        //  the file it is (what runs inside the view)
static char s_cc_prefix [PATH_MAX];      //  its install prefix when outside /usr, else ""
static char s_identity [512];
static char s_cpu [256];
static pthread_once_t s_identity_once = PTHREAD_ONCE_INIT;
static pthread_once_t s_cpu_once = PTHREAD_ONCE_INIT;

//  First line of a trusted command's stdout (not sandboxed: fixed arguments).
static void
s_first_line (char *const argv[], char *out, size_t len)
{
    out [0] = 0;
    int fds [2];
    if (pipe2 (fds, O_CLOEXEC) != 0)
        return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init (&fa);
    posix_spawn_file_actions_adddup2 (&fa, fds [1], 1);
    posix_spawn_file_actions_addopen (&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawn (&pid, argv [0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy (&fa);
    close (fds [1]);
    if (rc == 0) {
        size_t got = 0;
        struct pollfd pfd = { .fd = fds [0], .events = POLLIN };
        while (got + 1 < len && poll (&pfd, 1, 10000) == 1) {
            ssize_t n = read (fds [0], out + got, len - 1 - got);
            if (n <= 0)
                break;
            got += (size_t) n;
        }
        out [got] = 0;
        kill (pid, SIGKILL);
        waitpid (pid, NULL, 0);
    }
    close (fds [0]);
    char *nl = strchr (out, '\n');
    if (nl)
        *nl = 0;
}

static void
s_find_cc (void)
{
    const char *env = getenv ("KGYM_CC");
    if (env && env [0] == '/' && access (env, X_OK) == 0) {
        snprintf (s_cc_path, sizeof s_cc_path, "%s", env);
        return;
    }
    const char *path = getenv ("PATH");
    char dirs [4096];
    snprintf (dirs, sizeof dirs, "%s", path && *path? path: "/usr/local/bin:/usr/bin:/bin");
    for (char *save = NULL, *dir = strtok_r (dirs, ":", &save); dir; dir = strtok_r (NULL, ":", &save)) {
        char cand [PATH_MAX];
        if (dir [0] != '/' || (size_t) snprintf (cand, sizeof cand, "%s/cc", dir) >= sizeof cand)
            continue;
        if (access (cand, X_OK) == 0) {
            snprintf (s_cc_path, sizeof s_cc_path, "%s", cand);
            return;
        }
    }
    snprintf (s_cc_path, sizeof s_cc_path, "/usr/bin/cc");
}

//  The compiler's own file and, outside /usr, its prefix: the view of the
//  compile holds /usr (sandbox_kind.c) and that prefix only.
static void
s_cc_place (void)
{
    if (!realpath (s_cc_path, s_cc_real))
        snprintf (s_cc_real, sizeof s_cc_real, "%s", s_cc_path);
    s_cc_prefix [0] = 0;
    if (strncmp (s_cc_real, "/usr/", 5) != 0) {
        snprintf (s_cc_prefix, sizeof s_cc_prefix, "%s", s_cc_real);
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr (s_cc_prefix, '/');
            if (slash && slash != s_cc_prefix)
                *slash = 0;
        }
    }
}

static void
s_identity_init (void)
{
    s_find_cc ();
    s_cc_place ();
    char version [256], machine [128];
    char *vargv [] = { s_cc_path, "--version", NULL };
    char *margv [] = { s_cc_path, "-dumpmachine", NULL };
    s_first_line (vargv, version, sizeof version);
    s_first_line (margv, machine, sizeof machine);
    snprintf (s_identity, sizeof s_identity, "%s / %s", version [0]? version: "unknown",
              machine [0]? machine: "unknown");
}

const char *
cpu_cc_identity (void)
{
    pthread_once (&s_identity_once, s_identity_init);
    return s_identity;
}

//  The CPU -march=native compiles for: model name and a hash of its flags.
static void
s_cpu_init (void)
{
    char model [128] = "unknown", flags_hex [2 * COMMON_HASH_BYTES + 1] = "none";
    FILE *file = fopen ("/proc/cpuinfo", "re");
    if (file) {
        char *line = NULL;
        size_t cap = 0;
        bool have_model = false, have_flags = false;
        while ((!have_model || !have_flags) && getline (&line, &cap, file) > 0) {
            char *colon = strchr (line, ':');
            if (!colon)
                continue;
            char *value = colon + 1;
            while (*value == ' ')
                value++;
            value [strcspn (value, "\n")] = 0;
            if (!have_model && strncmp (line, "model name", 10) == 0) {
                snprintf (model, sizeof model, "%s", value);
                have_model = true;
            }
            else
            if (!have_flags && strncmp (line, "flags", 5) == 0) {
                common_hash_t *hash = common_hash_new ();
                if (hash) {
                    uint8_t digest [COMMON_HASH_BYTES];
                    common_hash_add_str (hash, 'C', value);
                    common_hash_final (hash, digest);
                    common_hash_destroy (&hash);
                    common_hash_hex (digest, flags_hex);
                }
                have_flags = true;
            }
        }
        free (line);
        fclose (file);
    }
    snprintf (s_cpu, sizeof s_cpu, "%s / flags %.16s", model, flags_hex);
}

//  ---------------------------------------------------------------------
//  Key material

//  Growing text buffer for the key material.
typedef struct {
    char *data;
    size_t len, cap;
    bool failed;
} s_text_t;

static void
s_text_add (s_text_t *text, char tag, const char *value)
{
    size_t vlen = strlen (value);
    size_t need = text->len + vlen + 32;
    if (text->failed)
        return;
    if (need > text->cap) {
        size_t cap = text->cap? text->cap: 1024;
        while (cap < need)
            cap *= 2;
        char *grown = realloc (text->data, cap);
        if (!grown) {
            text->failed = true;
            return;
        }
        text->data = grown;
        text->cap = cap;
    }
    text->len += (size_t) sprintf (text->data + text->len, "%c%zu:", tag, vlen);
    memcpy (text->data + text->len, value, vlen);
    text->len += vlen;
    text->data [text->len++] = '\n';
    text->data [text->len] = 0;
}

//  Add one field to both the hash and the stored material.
static void
s_field (common_hash_t *hash, s_text_t *text, char tag, const char *value)
{
    common_hash_add_str (hash, tag, value);
    s_text_add (text, tag, value);
}

//  ---------------------------------------------------------------------
//  The private directory

static int
s_rm_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st; (void) flag; (void) ftw;
    remove (path);
    return 0;
}

static void
s_rm_tree (const char *dir)
{
    nftw (dir, s_rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

//  The 0711 parent: traversable by the runners' uids, listable by no one else.
static const char *
s_tmp_base (void)
{
    if (mkdir (S_TMP_BASE, 0711) != 0 && errno != EEXIST)
        return "/tmp";
    struct stat st;
    if (lstat (S_TMP_BASE, &st) != 0 || !S_ISDIR (st.st_mode) || st.st_uid != geteuid ()
    ||  (st.st_mode & 0022))
        return "/tmp";
    return S_TMP_BASE;
}

static int
s_write_all (int fd, const char *data, size_t len)
{
    while (len) {
        ssize_t n = write (fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t) n;
    }
    return 0;
}

//  Read the compiler's output file: a regular file, not a link, bounded.
static int
s_read_so (const char *dir, uint8_t **data, size_t *size)
{
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s/k.so", dir);
    int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode) || st.st_size <= 0
    ||  (uint64_t) st.st_size > S_MAX_SO) {
        close (fd);
        return -1;
    }
    size_t len = (size_t) st.st_size;
    uint8_t *buf = malloc (len);
    size_t got = 0;
    while (buf && got < len) {
        ssize_t n = read (fd, buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t) n;
    }
    close (fd);
    if (!buf || got != len) {
        free (buf);
        return -1;
    }
    *data = buf;
    *size = len;
    return 0;
}

//  ---------------------------------------------------------------------
//  Compile

int
cpu_cc_compile (worker_cache_t *cache, const sandbox_config_t *sandbox,
                   const char *source, char *const *options, size_t noptions,
                   double timeout_s, cpu_cc_result_t *result, char *err, size_t errlen)
{
    double start = common_now_s ();
    memset (result, 0, sizeof *result);
    if (!source) {
        snprintf (err, errlen, "no source");
        return -1;
    }
    if (cpu_cc_check_options (options, noptions, err, errlen))
        return -1;
    const char *identity = cpu_cc_identity ();
    bool native = false;
    for (size_t i = 0; i < noptions; i++)
        native |= strcmp (options [i], "-march=native") == 0;

    //  The key: everything that changes the output, each behind its tag.
    common_hash_t *hash = common_hash_new ();
    if (!hash) {
        snprintf (err, errlen, "cannot hash (libsodium)");
        return -1;
    }
    s_text_t material = { 0 };
    s_field (hash, &material, 'V', S_FORMAT);
    s_field (hash, &material, 'I', identity);
    s_field (hash, &material, 'P', s_cc_path);
    for (int i = 0; s_fixed_flags [i]; i++)
        s_field (hash, &material, 'F', s_fixed_flags [i]);
    for (size_t i = 0; i < noptions; i++)
        s_field (hash, &material, 'O', options [i]);
    if (native) {
        pthread_once (&s_cpu_once, s_cpu_init);
        s_field (hash, &material, 'M', s_cpu);
    }
    s_field (hash, &material, 'S', source);
    uint8_t key [COMMON_HASH_BYTES];
    common_hash_final (hash, key);
    common_hash_destroy (&hash);
    common_hash_hex (key, result->key);
    if (material.failed) {
        free (material.data);
        snprintf (err, errlen, "out of memory");
        return -1;
    }

    if (cache && worker_cache_get (cache, key, material.data, &result->so, &result->so_size,
                                   &result->log) == 0) {
        if (!result->log)
            result->log = strdup ("");
        result->cache_hit = true;
        result->seconds = common_now_s () - start;
        free (material.data);
        return 0;
    }

    //  A private directory the compiler (its runner's uid) may write in.
    int rc = -1;
    char dir [PATH_MAX];
    snprintf (dir, sizeof dir, "%s/XXXXXX", s_tmp_base ());
    if (!mkdtemp (dir)) {
        snprintf (err, errlen, "mkdtemp: %s", strerror (errno));
        free (material.data);
        return -1;
    }
    char path [PATH_MAX + 8];
    snprintf (path, sizeof path, "%s/k.c", dir);
    //  Readable by the compiler's uid; the 0700 directory keeps others out.
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || s_write_all (fd, source, strlen (source)) != 0 || fchmod (fd, 0644) != 0) {
        snprintf (err, errlen, "cannot prepare %s: %s", dir, strerror (errno));
        if (fd >= 0)
            close (fd);
        goto done;
    }
    close (fd);

    const char *argv [S_MAX_OPTIONS + 16];
    int n = 0;
    argv [n++] = s_cc_real;
    for (int i = 0; s_fixed_flags [i]; i++)
        argv [n++] = s_fixed_flags [i];
    for (size_t i = 0; i < noptions; i++)
        argv [n++] = options [i];
    argv [n++] = "-o";
    argv [n++] = "k.so";
    argv [n++] = "k.c";
    argv [n++] = "-lm";
    argv [n] = NULL;

    char *output = NULL;
    int status = -1;
    bool timed_out = false;
    sandbox_config_t cfg;
    if (sandbox)
        cfg = *sandbox;
    else
        sandbox_config_default (&cfg);
    cfg.kind = SANDBOX_CC;
    cfg.view [0] = s_cc_prefix [0]? s_cc_prefix: NULL;
    cfg.view [1] = NULL;
    if (sandbox_exec (&cfg, (char *const *) argv, dir, timeout_s, &output, &status,
                             &timed_out, err, errlen) != 0)
        goto done;
    result->log = output;
    if (timed_out) {
        size_t len = strlen (output);
        char *grown = realloc (output, len + 80);
        if (grown) {
            snprintf (grown + len, 80, "%s[compiler timed out after %.3g s]\n",
                      len && grown [len - 1] != '\n'? "\n": "", timeout_s);
            result->log = grown;
        }
        rc = 2;
        goto done;
    }
    if (status != 0 || s_read_so (dir, &result->so, &result->so_size) != 0) {
        if (status == 0) {
            size_t len = strlen (output);
            char *grown = realloc (output, len + 64);
            if (grown) {
                snprintf (grown + len, 64, "[the compiler made no usable k.so]\n");
                result->log = grown;
            }
        }
        rc = 1;
        goto done;
    }
    rc = 0;
    if (cache)
        worker_cache_put (cache, key, material.data, result->so, result->so_size, result->log);
done:
    s_rm_tree (dir);
    free (material.data);
    if (rc < 0)
        cpu_cc_result_free (result);
    result->seconds = common_now_s () - start;
    return rc;
}
