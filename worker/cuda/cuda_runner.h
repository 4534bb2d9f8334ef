/*  cuda_runner - kgym-cuda-runner: the sandboxed owner of one GPU's contexts.

    Confine (sandbox_confine, kind cuda: cgroup, pid, network and IPC
    namespaces, its own uid, rlimits, seccomp; checked by the supervisor
    before it goes on), cuInit, pin to the GPU's NUMA node, say HELLO
    (device facts, or why there is no device), then serve INIT (contexts +
    internal module), JOB (a cuda_plan and three module images -> RESULT)
    and SELFTEST until EXIT, EOF or a fatal CUDA error. A watchdog thread
    exits when the supervisor's end of the socket closes, even while a
    kernel hangs the main thread. NVRTC compiles run elsewhere (cuda_compiler, kgym-nvrtc),
    so this binary is the only one that needs libcuda.

    Talks to cuda_backend over fd 3 (cuda_msg). Host code here is trusted;
    only device code is not.
*/
#ifndef CUDA_RUNNER_H
#define CUDA_RUNNER_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include "sandbox_confine.h"

typedef struct {
    int fd;                     //  socket to the supervisor (--fd, default 3)
    int device;                 //  CUDA ordinal (--device)
    bool confine;               //  false with --no-confine (debugging only)
    sandbox_confine_args_t sandbox;     //  the sandbox's options (sandbox_confine.h)
} cuda_runner_opts_t;

//  Parse argv (the sandbox's options are required unless --no-confine).
//  0, or -1 with a reason.
int cuda_runner_opts_parse (int argc, char **argv, cuda_runner_opts_t *opts, char *err, size_t errlen);

//  Serve until EXIT, EOF or a fatal error; returns the process exit code.
int cuda_runner_serve (const cuda_runner_opts_t *opts);

#endif
