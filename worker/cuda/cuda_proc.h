/*  cuda_proc - one kgym-cuda-runner process, seen from the process that spawned it.

    posix_spawn (safe in a threaded worker, and no fork of anything CUDA
    touched), a SOCK_STREAM socketpair on the child's fd 3, the child's
    stdout on /dev/null (device printf lands there), its own process group,
    and optionally a cgroup that the child joins itself. Killing takes the
    whole group and the cgroup. No CUDA here: this runs in the supervisor.
*/
#ifndef CUDA_PROC_H
#define CUDA_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "sandbox_confine.h"

typedef struct cuda_proc_t cuda_proc_t;

//  The two programs: the GPU runner and the NVRTC compiler (which links
//  no libcuda, so it runs on machines without a driver).
#define CUDA_PROC_RUNNER    "kgym-cuda-runner"      //  or $KGYM_CUDA_RUNNER
#define CUDA_PROC_NVRTC     "kgym-nvrtc"            //  or $KGYM_NVRTC

//  Where program is: its environment variable, else beside /proc/self/exe,
//  else ../worker/ from there (the build tree), else the configured build
//  and libexec dirs. NULL when none exists. Process-wide, cached.
const char *cuda_proc_path (const char *program);

//  Spawn program with argv[1..] = args (NULL-terminated). cg (may be
//  NULL) is passed as --cgroup DIR for the child to join. NULL with a reason.
cuda_proc_t *cuda_proc_new (const char *program, const char *const *args,
                            const sandbox_confine_cgroup_t *cg, char *err, size_t errlen);

//  Child side: close every inherited fd above keep (the worker's own fds
//  must not leak into a sandbox).
void cuda_proc_close_inherited (int keep);

//  The supervisor's end of the socketpair.
int cuda_proc_fd (cuda_proc_t *self);
pid_t cuda_proc_pid (cuda_proc_t *self);

//  True (and *wstatus) once the child has exited; reaps it. Never blocks.
bool cuda_proc_exited (cuda_proc_t *self, int *wstatus);

//  Wait up to timeout_s for the child to exit by itself; true when it did.
bool cuda_proc_wait (cuda_proc_t *self, double timeout_s, int *wstatus);

//  SIGKILL the process group (and the cgroup), then reap.
void cuda_proc_kill (cuda_proc_t *self);

//  "signal 9 (Killed)" / "exit 3" for a wait status, into buf.
const char *cuda_proc_describe (int wstatus, char *buf, size_t size);

//  Kill (when still running), reap, close, free.
void cuda_proc_destroy (cuda_proc_t **self_p);

#endif
