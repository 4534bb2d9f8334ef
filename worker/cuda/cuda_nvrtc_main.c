/*  kgym-nvrtc - compiles one CUDA C program with NVRTC, confined.
    Spawned by cuda_nvrtc; see cuda_compiler.h.

    kgym-nvrtc [--fd N] [--cpu-limit S] [--no-confine]
*/
#include "cuda_compiler.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
main (int argc, char **argv)
{
    int fd = 3;
    uint32_t cpu_limit = 0;
    bool confine = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv [i], "--fd") == 0 && i + 1 < argc)
            fd = atoi (argv [++i]);
        else if (strcmp (argv [i], "--cpu-limit") == 0 && i + 1 < argc)
            cpu_limit = (uint32_t) strtoul (argv [++i], NULL, 10);
        else if (strcmp (argv [i], "--no-confine") == 0)
            confine = false;
        else {
            fprintf (stderr, "kgym-nvrtc: unknown argument '%s'\n", argv [i]);
            return 64;
        }
    }
    return cuda_compiler_run (fd, cpu_limit, confine);
}
