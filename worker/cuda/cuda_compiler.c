/*  cuda_compiler - kgym-nvrtc: one NVRTC compile in a confined process.  */
#include "cuda_compiler.h"
#include "cuda_msg.h"
#include "cuda_nvrtc.h"
#include <dlfcn.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <nvrtc.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

//  Keep the first WORKER_NVRTC_MAX_LOG bytes of a log.
static void
s_trim_log (char *log)
{
    if (log && strlen (log) > WORKER_NVRTC_MAX_LOG)
        strcpy (log + WORKER_NVRTC_MAX_LOG - 16, "\n[truncated]\n");
}

//  One NVRTC compile. name is the virtual file name in messages.
//  0 ok, 1 compile error (*log), -1 internal (err).
static int
s_compile (const char *name, const char *source, char *const *norm, size_t nnorm, const char *arch,
           uint8_t **cubin, size_t *size, char **log, char *err, size_t errlen)
{
    *cubin = NULL;
    *size = 0;
    *log = NULL;
    const char *opts [80];
    char storage [2048];
    size_t nopts = cuda_nvrtc_flags (arch, norm, nnorm, opts, 80, storage, sizeof storage);
    if (nopts == 0) {
        snprintf (err, errlen, "compiler flags do not fit");
        return -1;
    }

    nvrtcProgram prog;
    nvrtcResult rc = nvrtcCreateProgram (&prog, source, name, 0, NULL, NULL);
    if (rc != NVRTC_SUCCESS) {
        snprintf (err, errlen, "nvrtcCreateProgram: %s", nvrtcGetErrorString (rc));
        return -1;
    }
    nvrtcResult compiled = nvrtcCompileProgram (prog, (int) nopts, opts);
    size_t log_size = 0;
    if (nvrtcGetProgramLogSize (prog, &log_size) != NVRTC_SUCCESS)
        log_size = 1;
    *log = calloc (1, log_size + 1);
    if (*log && log_size > 1)
        nvrtcGetProgramLog (prog, *log);
    s_trim_log (*log);
    if (compiled == NVRTC_ERROR_COMPILATION) {
        nvrtcDestroyProgram (&prog);
        return 1;
    }
    if (compiled != NVRTC_SUCCESS) {
        snprintf (err, errlen, "nvrtcCompileProgram: %s", nvrtcGetErrorString (compiled));
        nvrtcDestroyProgram (&prog);
        return -1;
    }
    size_t n = 0;
    if (nvrtcGetCUBINSize (prog, &n) != NVRTC_SUCCESS || n == 0) {
        snprintf (err, errlen, "NVRTC produced no cubin for %s", arch);
        nvrtcDestroyProgram (&prog);
        return -1;
    }
    *cubin = malloc (n);
    if (!*cubin || nvrtcGetCUBIN (prog, (char *) *cubin) != NVRTC_SUCCESS) {
        free (*cubin);
        *cubin = NULL;
        snprintf (err, errlen, "nvrtcGetCUBIN failed");
        nvrtcDestroyProgram (&prog);
        return -1;
    }
    *size = n;
    nvrtcDestroyProgram (&prog);
    return 0;
}



//  NVRTC loads its builtins library at the first compile, from its own
//  directory, which the confined root does not hold: load it now.
static void
s_preload_builtins (void)
{
    Dl_info info;
    char real [PATH_MAX], path [PATH_MAX + 64];
    int major = 0, minor = 0;
    if (!dladdr ((void *) nvrtcVersion, &info) || !info.dli_fname || !realpath (info.dli_fname, real)
    ||  nvrtcVersion (&major, &minor) != NVRTC_SUCCESS)
        return;
    snprintf (path, sizeof path, "%s/libnvrtc-builtins.so.%d.%d", dirname (real), major, minor);
    dlopen (path, RTLD_NOW | RTLD_GLOBAL);
}

int
cuda_compiler_run (int fd, const sandbox_confine_args_t *sandbox)
{
    signal (SIGPIPE, SIG_IGN);
    signal (SIGXFSZ, SIG_IGN);
    char err [512] = "";
    s_preload_builtins ();
    //  Refused: the supervisor hears why on the sandbox's own socket.
    if (sandbox && sandbox_confine (sandbox, err, sizeof err))
        return 2;
    cuda_msg_t msg;
    char why [256];
    if (cuda_msg_recv (fd, &msg, 30.0, why, sizeof why) != 0)
        return 2;
    json_error_t jerr;
    json_t *req = msg.type == CUDA_MSG_COMPILE && msg.nparts >= 2
                ? json_loads ((const char *) msg.part [0], 0, &jerr): NULL;
    const char *name = json_string_value (json_object_get (req, "name"));
    const char *arch = json_string_value (json_object_get (req, "arch"));
    json_t *options = json_object_get (req, "options");
    json_t *reply = NULL;
    uint8_t *cubin = NULL;
    size_t size = 0;
    if (!name || !arch || !json_is_array (options) || json_array_size (options) > 64
    ||  strlen ((const char *) msg.part [1]) != msg.size [1])
        reply = json_pack ("{s:s, s:s}", "status", "error", "error", "malformed compile request");
    else {
        size_t nopts = json_array_size (options);
        char *opts_v [64];
        bool ok = true;
        for (size_t i = 0; i < nopts; i++) {
            opts_v [i] = (char *) json_string_value (json_array_get (options, i));
            ok &= opts_v [i] != NULL;
        }
        char *log = NULL;
        int rc = ok? s_compile (name, (const char *) msg.part [1], opts_v, nopts,
                                                arch, &cubin, &size, &log, err, sizeof err): -1;
        if (rc == 0)
            reply = json_pack ("{s:s, s:s}", "status", "ok", "log", log? log: "");
        else if (rc == 1)
            reply = json_pack ("{s:s, s:s}", "status", "compile_error", "log", log? log: "");
        else
            reply = json_pack ("{s:s, s:s}", "status", "error", "error", *err? err: "bad options");
        free (log);
    }
    const void *blobs [1] = { cubin };
    size_t sizes [1] = { size };
    cuda_msg_send_json (fd, CUDA_MSG_COMPILED, reply, cubin? 1: 0, blobs, sizes);
    json_decref (reply);
    json_decref (req);
    free (cubin);
    cuda_msg_free (&msg);
    return 0;
}
