/*  kgym-cuda-runner - the sandboxed process that owns a GPU's contexts.
    Spawned by cuda_backend; see cuda_runner.h and docs/cuda.md.

    kgym-cuda-runner [--serve] [--fd N] [--device N] [--cgroup DIR]... [--no-confine]
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
    return cuda_runner_serve (&opts);
}
