/*  kgym_compile - `kgym compile`: compile candidates without running them.

        kgym compile TASK CANDIDATE... [--arch sm_XX] [--cache PATH] [--timeout S]

    One JSON line per candidate on stdout:
        {"candidate": path, "status": "ok"|"compile_error"|"invalid"|"internal_error",
         "log": text, "cache_key": hex, "cached": bool, "compile_s": seconds,
         "arch": "sm_90" (cuda tasks)}
    cuda tasks go through cuda_nvrtc (cubin for --arch, else the GPU's own
    arch as kgym-cuda-runner reports it, else sm_90 when there is no GPU);
    cpu tasks through cpu_cc. Both share the compile cache with the
    workers. Needs no GPU. Exit status 0 when every candidate compiled, 1
    when one did not, 2 on a usage error or an unreadable task.
*/
#ifndef KGYM_COMPILE_H
#define KGYM_COMPILE_H

//  argv[0] is the subcommand's name ("compile").
int kgym_compile_main (int argc, char **argv);

#endif
