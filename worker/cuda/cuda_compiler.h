/*  cuda_compiler - kgym-nvrtc: one NVRTC compile in a confined process.

    cuda_nvrtc spawns kgym-nvrtc per compile that misses the cache. It
    loads NVRTC's builtins library, then confines itself (sandbox_confine,
    kind nvrtc: its own uid and pid, network and IPC namespaces, no
    sockets, exec, fork or file writes, RLIMIT_AS and RLIMIT_CPU, and a
    root that holds only the toolkit's headers, so no #include of a host
    file can succeed) before it reads any untrusted text. Then it reads one
    COMPILE message (cuda_msg), runs NVRTC with cuda_nvrtc_flags, answers
    COMPILED {status, log | error} + cubin, and exits. It links NVRTC
    only, never libcuda, so it runs on machines without a GPU driver. The
    parent kills it (and its pid namespace) after the compile timeout.
*/
#ifndef CUDA_COMPILER_H
#define CUDA_COMPILER_H

#include "sandbox_confine.h"

//  Serve one compile on fd, confined as sandbox says (NULL: not confined,
//  for debugging). Returns the process exit code.
int cuda_compiler_run (int fd, const sandbox_confine_args_t *sandbox);

#endif
