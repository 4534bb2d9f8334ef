/*  cuda_nvrtc - CUDA C candidates into cubins with NVRTC, cached.

    The caller's side: normalise, key, cache, spawn, wait, kill. The fixed
    flags live here too (cuda_nvrtc_flags, used by kgym-nvrtc), so flags
    and key never drift apart. This file calls no NVRTC function directly:
    the worker does not link NVRTC.
*/
#include "common_util.h"
#include "cuda_nvrtc.h"
#include "common_hash.h"
#include "cuda_msg.h"
#include "sandbox.h"
#include "kgym_config.h"
#include <ctype.h>
#include <dlfcn.h>
#include <cuda.h>
#include <jansson.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  One byte standing in for a cached compile error (a cubin starts with 0x7f 'E' 'L' 'F').
#define ERROR_MARK 'E'

//  worker_cache may be shared with the CPU backend's threads.
static pthread_mutex_t s_cache_lock = PTHREAD_MUTEX_INITIALIZER;


void
cuda_nvrtc_result_free (cuda_nvrtc_result_t *result)
{
    if (!result)
        return;
    free (result->image);
    free (result->log);
    result->image = NULL;
    result->log = NULL;
    result->size = 0;
}

//  --- options ---

static bool
s_is_bool (const char *text)
{
    return strcmp (text, "true") == 0 || strcmp (text, "false") == 0;
}

//  -DNAME or -DNAME=VALUE with a C identifier and a value of safe characters.
static bool
s_valid_define (const char *text)
{
    if (!(isalpha ((unsigned char) *text) || *text == '_'))
        return false;
    const char *p = text;
    while (isalnum ((unsigned char) *p) || *p == '_')
        p++;
    if (*p == 0)
        return true;
    if (*p != '=')
        return false;
    for (p++; *p; p++)
        if (!(isalnum ((unsigned char) *p) || strchr ("_.+-*/()<>%&|^~!:,[]'\"", *p)))
            return false;
    return true;
}

//  One option into its canonical spelling (into out), or false.
static bool
s_normalise_one (const char *opt, char *out, size_t size)
{
    //  Accept one or two leading dashes for every long option.
    const char *o = opt;
    if (o [0] == '-' && o [1] == '-')
        o += 2;
    else if (o [0] == '-')
        o += 1;
    else
        return false;
    if (strcmp (o, "use_fast_math") == 0 || strcmp (o, "use-fast-math") == 0) {
        snprintf (out, size, "--use_fast_math");
        return true;
    }
    if (strcmp (o, "lineinfo") == 0 || strcmp (o, "generate-line-info") == 0) {
        snprintf (out, size, "--generate-line-info");
        return true;
    }
    if (strcmp (o, "extra-device-vectorization") == 0) {
        snprintf (out, size, "--extra-device-vectorization");
        return true;
    }
    if (strncmp (o, "maxrregcount=", 13) == 0) {
        char *end;
        long n = strtol (o + 13, &end, 10);
        if (*end || end == o + 13 || n < 16 || n > 255)
            return false;
        snprintf (out, size, "--maxrregcount=%ld", n);
        return true;
    }
    if (strncmp (o, "std=", 4) == 0) {
        const char *v = o + 4;
        if (strcmp (v, "c++11") && strcmp (v, "c++14") && strcmp (v, "c++17") && strcmp (v, "c++20"))
            return false;
        snprintf (out, size, "--std=%s", v);
        return true;
    }
    static const char *flags [] = { "ftz=", "prec-div=", "prec-sqrt=", "fmad=" };
    for (size_t i = 0; i < sizeof flags / sizeof flags [0]; i++) {
        size_t len = strlen (flags [i]);
        if (strncmp (o, flags [i], len) == 0 && s_is_bool (o + len)) {
            snprintf (out, size, "--%s", o);
            return true;
        }
    }
    //  -D only with one dash, as nvcc spells it (also -D NAME is not accepted).
    if (opt [0] == '-' && opt [1] == 'D' && s_valid_define (opt + 2)) {
        snprintf (out, size, "%s", opt);
        return true;
    }
    if (strncmp (o, "define-macro=", 13) == 0 && s_valid_define (o + 13)) {
        snprintf (out, size, "-D%s", o + 13);
        return true;
    }
    return false;
}

void
cuda_nvrtc_options_free (char **options, size_t noptions)
{
    if (!options)
        return;
    for (size_t i = 0; i < noptions; i++)
        free (options [i]);
    free (options);
}

int
cuda_nvrtc_options (char *const *options, size_t noptions, char ***out, size_t *nout,
                      char *err, size_t errlen)
{
    *out = NULL;
    *nout = 0;
    char **norm = calloc (noptions + 1, sizeof *norm);
    if (!norm) {
        common_seterr (err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < noptions; i++) {
        char buf [300];
        if (!options [i] || strlen (options [i]) > 256
        ||  !s_normalise_one (options [i], buf, sizeof buf)) {
            common_seterr (err, errlen, "compiler option '%.100s' is not allowed (allowed: -use_fast_math, "
                   "-maxrregcount=N, -lineinfo, --std=c++17|c++20, -DNAME[=V], "
                   "--extra-device-vectorization, -ftz=, -prec-div=, -prec-sqrt=, -fmad=)",
                   options [i]? options [i]: "(null)");
            cuda_nvrtc_options_free (norm, i);
            return -1;
        }
        norm [i] = strdup (buf);
        if (!norm [i]) {
            cuda_nvrtc_options_free (norm, i);
            common_seterr (err, errlen, "out of memory");
            return -1;
        }
    }
    *out = norm;
    *nout = noptions;
    return 0;
}

int
cuda_nvrtc_check_arch (const char *arch)
{
    if (!arch || strncmp (arch, "sm_", 3) != 0)
        return -1;
    const char *p = arch + 3;
    size_t digits = 0;
    while (isdigit ((unsigned char) p [digits]))
        digits++;
    if (digits < 2 || digits > 3)
        return -1;
    p += digits;
    if (*p == 'a' || *p == 'f')
        p++;
    return *p? -1: 0;
}

static char s_version [32];
static pthread_once_t s_version_once = PTHREAD_ONCE_INIT;

//  nvrtcVersion through dlopen: the worker itself never links NVRTC (it
//  runs on machines without the toolkit); only kgym-nvrtc does.
static void
s_read_version (void)
{
    snprintf (s_version, sizeof s_version, "unavailable");
    char name [64], path [700];
    snprintf (name, sizeof name, "libnvrtc.so.%d", CUDA_VERSION / 1000);
    void *lib = dlopen (name, RTLD_LAZY | RTLD_LOCAL);
    if (!lib) {
        //  Not in the loader's path: the toolkit's lib64 beside its include dir.
        snprintf (path, sizeof path, "%s/../lib64/%s", cuda_nvrtc_include_dir (), name);
        lib = dlopen (path, RTLD_LAZY | RTLD_LOCAL);
    }
    if (!lib)
        return;
    nvrtcResult (*version) (int *, int *) = (nvrtcResult (*) (int *, int *)) dlsym (lib, "nvrtcVersion");
    int major = 0, minor = 0;
    if (version && version (&major, &minor) == NVRTC_SUCCESS)
        snprintf (s_version, sizeof s_version, "%d.%d", major, minor);
}

const char *
cuda_nvrtc_version (void)
{
    pthread_once (&s_version_once, s_read_version);
    return s_version;
}

const char *
cuda_nvrtc_include_dir (void)
{
    const char *env = getenv ("KGYM_CUDA_INCLUDE");
    return env && *env? env: KGYM_CUDA_INCLUDE;
}

static bool
s_has_std (char *const *norm, size_t nnorm)
{
    for (size_t i = 0; i < nnorm; i++)
        if (strncmp (norm [i], "--std=", 6) == 0)
            return true;
    return false;
}

int
cuda_nvrtc_key (const char *lang, const char *source, char *const *norm, size_t nnorm,
                  const char *arch, uint8_t key [32], char hex [65], char **material)
{
    *material = NULL;
    common_hash_t *hash = common_hash_new ();
    if (!hash)
        return -1;
    char version [32];
    snprintf (version, sizeof version, "kgym-nvrtc/%d", WORKER_NVRTC_FORMAT);
    char include [600];
    snprintf (include, sizeof include, "%s (CUDA_VERSION %d)", cuda_nvrtc_include_dir (), CUDA_VERSION);
    common_hash_add_str (hash, 'V', version);
    common_hash_add_str (hash, 'L', lang);
    common_hash_add_str (hash, 'A', arch);
    common_hash_add_str (hash, 'N', cuda_nvrtc_version ());
    common_hash_add_str (hash, 'I', include);
    for (size_t i = 0; i < nnorm; i++)
        common_hash_add_str (hash, 'O', norm [i]);
    common_hash_add_u64 (hash, 'n', nnorm);
    common_hash_add (hash, 'S', source, strlen (source));
    common_hash_final (hash, key);
    common_hash_destroy (&hash);
    common_hash_hex (key, hex);

    //  The material names everything but the source, which the key covers.
    size_t len = 256 + strlen (include) + strlen (arch) + strlen (lang);
    for (size_t i = 0; i < nnorm; i++)
        len += strlen (norm [i]) + 2;
    char *text = malloc (len);
    if (!text)
        return -1;
    int used = snprintf (text, len, "%s lang=%s arch=%s nvrtc=%s include=%s source=%zu opts:",
                         version, lang, arch, cuda_nvrtc_version (), include, strlen (source));
    for (size_t i = 0; i < nnorm && used > 0 && (size_t) used < len; i++)
        used += snprintf (text + used, len - (size_t) used, " %s", norm [i]);
    *material = text;
    return 0;
}

size_t
cuda_nvrtc_flags (const char *arch, char *const *norm, size_t nnorm,
                    const char **opts, size_t max, char *storage, size_t storage_len)
{
    const char *include = cuda_nvrtc_include_dir ();
    size_t n = 0;
    int a = snprintf (storage, storage_len, "--gpu-architecture=%s", arch);
    int b = snprintf (storage + a + 1, storage_len - (size_t) a - 1, "-I%s", include);
    int c = snprintf (storage + a + b + 2, storage_len - (size_t) (a + b) - 2, "-I%s/cccl", include);
    if (a < 0 || b < 0 || c < 0 || (size_t) (a + b + c + 3) > storage_len || max < 4)
        return 0;
    opts [n++] = storage;
    opts [n++] = storage + a + 1;
    opts [n++] = storage + a + b + 2;
    if (!s_has_std (norm, nnorm))
        opts [n++] = "--std=c++17";
    for (size_t i = 0; i < nnorm && n < max; i++)
        opts [n++] = norm [i];
    return n;
}

//  Ask a fresh kgym-nvrtc for the cubin.
static int
s_compile_in_child (const char *name, const char *source, char *const *norm, size_t nnorm,
                    const char *arch, double timeout_s, cuda_nvrtc_result_t *result,
                    char *err, size_t errlen)
{
    //  Its root holds the toolkit's headers only; no cgroup (a compile is
    //  short): an 8 GiB address space, its own uid counting its threads.
    sandbox_config_t cfg;
    sandbox_config_default (&cfg);
    cfg.kind = SANDBOX_NVRTC;
    cfg.mem_bytes = (8ull << 30) - (256ull << 20);
    cfg.max_pids = 64;
    cfg.cpu_s = (uint32_t) (timeout_s + 2.5);
    cfg.view [0] = cuda_nvrtc_include_dir ();
    sandbox_spawn_t what = { .object_fd = -1, .out_fd = -1 };
    sandbox_t *proc = sandbox_new (&cfg, err, errlen);
    if (!proc || sandbox_spawn (proc, &what, err, errlen) || sandbox_confirm (proc, 10.0, err, errlen)) {
        sandbox_destroy (&proc);
        return NVRTC_INTERNAL;
    }

    json_t *req = json_pack ("{s:s, s:s, s:[]}", "name", name, "arch", arch, "options");
    for (size_t i = 0; req && i < nnorm; i++)
        json_array_append_new (json_object_get (req, "options"), json_string (norm [i]));
    char *text = req? json_dumps (req, JSON_COMPACT): NULL;
    json_decref (req);
    const void *blobs [1] = { source };
    size_t sizes [1] = { strlen (source) };
    int status = NVRTC_INTERNAL;
    double start = cuda_now ();
    if (!text || cuda_msg_send_text (sandbox_channel (proc), CUDA_MSG_COMPILE, text, 1, blobs, sizes)) {
        common_seterr (err, errlen, "cannot send the compile request");
        free (text);
        sandbox_destroy (&proc);
        return NVRTC_INTERNAL;
    }
    free (text);
    cuda_msg_t msg;
    char why [256] = "";
    int rc = cuda_msg_recv (sandbox_channel (proc), &msg, timeout_s, why, sizeof why);
    if (rc == 1) {
        sandbox_kill (proc);
        common_seterr (err, errlen, "compile timed out after %g s", timeout_s);
        status = NVRTC_TIMEOUT;
    }
    else if (rc != 0 || msg.type != CUDA_MSG_COMPILED || msg.nparts < 1) {
        char what [160] = "still running";
        //  The child's status tells a CPU-limit kill from a crash.
        if (sandbox_wait (proc, 0.5) == 0)
            sandbox_describe (proc, what, sizeof what);
        if (rc != 0 && cuda_now () - start >= timeout_s * 0.95) {
            common_seterr (err, errlen, "compile timed out after %g s", timeout_s);
            status = NVRTC_TIMEOUT;
        }
        else
            common_seterr (err, errlen, "compile subprocess failed (%s; %s)", why[0]? why: "bad reply", what);
        if (rc == 0)
            cuda_msg_free (&msg);
    }
    else {
        json_error_t jerr;
        json_t *reply = json_loads ((const char *) msg.part [0], 0, &jerr);
        const char *st = json_string_value (json_object_get (reply, "status"));
        const char *log = json_string_value (json_object_get (reply, "log"));
        result->log = strdup (log? log: "");
        if (st && strcmp (st, "ok") == 0 && msg.nparts >= 2 && msg.size [1] > 4) {
            result->image = msg.part [1];
            result->size = msg.size [1];
            msg.part [1] = NULL;
            status = NVRTC_OK;
        }
        else if (st && strcmp (st, "compile_error") == 0)
            status = NVRTC_COMPILE_ERROR;
        else {
            const char *e = json_string_value (json_object_get (reply, "error"));
            common_seterr (err, errlen, "compile subprocess: %s", e? e: "malformed reply");
            status = NVRTC_INTERNAL;
        }
        json_decref (reply);
        cuda_msg_free (&msg);
    }
    sandbox_destroy (&proc);
    return status;
}

int
cuda_nvrtc_compile (worker_cache_t *cache, const char *lang, const char *name,
                      const char *source, char *const *options, size_t noptions,
                      const char *arch, double timeout_s, cuda_nvrtc_result_t *result,
                      char *err, size_t errlen)
{
    memset (result, 0, sizeof *result);
    double start = cuda_now ();
    if (!lang)
        lang = "cuda";
    if (!source) {
        common_seterr (err, errlen, "program has no source");
        return NVRTC_INVALID;
    }
    if (cuda_nvrtc_check_arch (arch)) {
        common_seterr (err, errlen, "architecture '%.40s' is not of the form sm_XX", arch? arch: "");
        return NVRTC_INVALID;
    }
    bool ptx = strcmp (lang, "ptx") == 0;
    if (!ptx && strcmp (lang, "cuda") != 0) {
        common_seterr (err, errlen, "lang '%.40s' is not supported by the cuda backend (cuda, ptx)", lang);
        return NVRTC_INVALID;
    }
    char **norm = NULL;
    size_t nnorm = 0;
    if (ptx && noptions) {
        common_seterr (err, errlen, "PTX programs take no compiler options");
        return NVRTC_INVALID;
    }
    if (cuda_nvrtc_options (options, noptions, &norm, &nnorm, err, errlen))
        return NVRTC_INVALID;
    uint8_t key [32];
    char *material = NULL;
    if (cuda_nvrtc_key (lang, source, norm, nnorm, arch, key, result->key, &material)) {
        cuda_nvrtc_options_free (norm, nnorm);
        common_seterr (err, errlen, "cannot compute the cache key");
        return NVRTC_INTERNAL;
    }
    int status = NVRTC_INTERNAL;
    if (ptx) {
        //  The driver compiles PTX at load time, in the runner.
        size_t len = strlen (source);
        result->image = malloc (len + 1);
        result->log = strdup ("");
        if (result->image && result->log) {
            memcpy (result->image, source, len + 1);
            result->size = len + 1;
            result->is_ptx = true;
            status = NVRTC_OK;
        }
        else
            common_seterr (err, errlen, "out of memory");
        goto done;
    }
    if (cache) {
        uint8_t *blob = NULL;
        size_t size = 0;
        char *log = NULL;
        pthread_mutex_lock (&s_cache_lock);
        int hit = worker_cache_get (cache, key, material, &blob, &size, &log);
        pthread_mutex_unlock (&s_cache_lock);
        if (hit == 0 && blob && size >= 1) {
            result->cache_hit = true;
            result->log = log? log: strdup ("");
            if (size == 1 && blob [0] == ERROR_MARK) {
                free (blob);
                status = NVRTC_COMPILE_ERROR;
            }
            else {
                result->image = blob;
                result->size = size;
                status = NVRTC_OK;
            }
            goto done;
        }
        free (blob);
        free (log);
    }
    status = s_compile_in_child (name? name: "candidate.cu", source, norm, nnorm, arch,
                                 timeout_s, result, err, errlen);
    if (cache && (status == NVRTC_OK || status == NVRTC_COMPILE_ERROR)) {
        uint8_t mark = ERROR_MARK;
        pthread_mutex_lock (&s_cache_lock);
        if (status == NVRTC_OK)
            worker_cache_put (cache, key, material, result->image, result->size, result->log);
        else
            worker_cache_put (cache, key, material, &mark, 1, result->log);
        pthread_mutex_unlock (&s_cache_lock);
    }
done:
    free (material);
    cuda_nvrtc_options_free (norm, nnorm);
    result->seconds = cuda_now () - start;
    return status;
}
