/*  cuda_runner - kgym-cuda-runner: the sandboxed owner of one GPU's contexts.

    Confine (sandbox_confine: cgroup, network namespace, nobody, rlimits,
    seccomp), cuInit, pin to the GPU's NUMA node, say HELLO (device facts
    and caps, or why there is no device), then serve INIT (contexts +
    internal module), JOB (a cuda_plan and three module images -> RESULT)
    and SELFTEST until EXIT, EOF or a fatal CUDA error. A watchdog thread
    exits when the parent process is gone, even while a kernel hangs the
    main thread. NVRTC compiles run elsewhere (cuda_compiler, kgym-nvrtc),
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
    const char *cgroups [SANDBOX_CONFINE_MAX_CGROUPS];  //  --cgroup DIR (repeatable)
    size_t ncgroups;            //  entries used
    bool confine;               //  false with --no-confine (debugging only)
} cuda_runner_opts_t;

//  Parse argv. 0, or -1 with a reason.
int cuda_runner_opts_parse (int argc, char **argv, cuda_runner_opts_t *opts, char *err, size_t errlen);

//  Serve until EXIT, EOF or a fatal error; returns the process exit code.
int cuda_runner_serve (const cuda_runner_opts_t *opts);

#endif
