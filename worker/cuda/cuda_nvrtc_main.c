/*  kgym-nvrtc - compiles one CUDA C program with NVRTC, confined.
    Spawned by cuda_nvrtc through the sandbox; see cuda_compiler.h.

    kgym-nvrtc --fd N SANDBOX-OPTIONS      (sandbox_confine.h)
    kgym-nvrtc --fd N --no-confine         (debugging)
*/
#include "cuda_compiler.h"
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
main (int argc, char **argv)
{
    bool confine = true;
    for (int i = 1; i < argc; i++)
        confine &= strcmp (argv [i], "--no-confine") != 0;
    sandbox_confine_args_t sandbox;
    char err [256];
    if (confine && (argc = sandbox_confine_parse (argc, argv, &sandbox, err, sizeof err)) < 0) {
        fprintf (stderr, "kgym-nvrtc: %s\n", err);
        return 64;
    }
    int fd = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv [i], "--fd") == 0 && i + 1 < argc)
            fd = atoi (argv [++i]);
        else if (strcmp (argv [i], "--no-confine") != 0) {
            fprintf (stderr, "kgym-nvrtc: unknown argument '%s'\n", argv [i]);
            return 64;
        }
    }
    return cuda_compiler_run (fd, confine? &sandbox: NULL);
}
