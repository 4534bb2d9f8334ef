/*  kgym-cuda-runner - the sandboxed process that owns a GPU context (or
    compiles one program with NVRTC). Spawned by worker_cuda / worker_nvrtc;
    see cuda_runner.h for the modes and docs/cuda.md for the protocol.

    kgym-cuda-runner [--serve | --compile] [--fd N] [--device N]
                     [--cgroup DIR]... [--cpu-limit S] [--no-confine]
*/
#include "cuda_runner.h"
#include <stdio.h>

int
main (int argc, char **argv)
{
    cuda_runner_opts_t opts;
    char err [256];
    if (cuda_runner_opts_parse (argc, argv, &opts, err, sizeof err)) {
        fprintf (stderr, "kgym-cuda-runner: %s\n", err);
        return 64;
    }
    return opts.compile? cuda_runner_compile (&opts): cuda_runner_serve (&opts);
}
