/*  sandbox_kind - the policy table: one row per kind of runner.

    Relaxations of the common seccomp filter, and why each kind needs them:

    cc      PROCESSES: the compiler driver runs cc1, as and ld.
            FILE_WRITES: it writes its object in its own directory, the
            only writable mount of its view.
    cuda    UNIX_SOCKETS: cuInit fails with CUDA_ERROR_OPERATING_SYSTEM
            without AF_UNIX sockets (../shared/device/README.md).
            FILE_WRITES: the driver opens /dev/nvidia* read-write.
            OWN_AFFINITY: it pins the driver's threads to the GPU's NUMA
            node; its pid namespace holds no other process to name.
    python  UNIX_SOCKETS: CUDA, as above. PROCESSES: Triton runs ptxas
            and ldconfig, load_inline runs ninja, the compilers and nvcc.
            FILE_WRITES: caches and compiled kernels in its private temp
            dir, the only writable mount of its view.

    kernel and nvrtc get none: no sockets, no new processes, no writes.

    Environment: every runner gets PATH, LC_ALL, LANG and TMPDIR only, but
    nvrtc and cuda also get the operator's LD_LIBRARY_PATH, KGYM_* and
    CUDA_* variables (where libcuda is, KGYM_CUDA_INCLUDE, KGYM_CUPTI...):
    their own code is trusted and their untrusted input (CUDA C, device
    code) has no way to read the environment.
*/
#include "sandbox_kind.h"
#include <assert.h>
#include <stddef.h>
#include <string.h>

//  What a C compiler needs: its programs, libraries and headers. Top-level
//  names that are symlinks on the host (merged /usr) are recreated as such.
static const char *const s_cc_view [] = {
    "/usr/bin", "/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/include",
    "/bin", "/lib", "/lib64", "/dev/null", NULL
};

//  An interpreter, its standard library and the system's packages and
//  libraries (Debian picks BLAS and friends through /etc/alternatives, the
//  loader finds the rest through its cache; pip's packages and the CUDA
//  toolkit live in /usr/local), the compiler and headers an extension build
//  (load_inline) needs, ldconfig (Triton finds libcuda with
//  /sbin/ldconfig -p), and a /proc of its own pid namespace (PyTorch reads
//  /proc/cpuinfo); the caller adds its own packages and, for a GPU, the
//  devices and /sys.
static const char *const s_python_view [] = {
    "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/include",
    "/usr/local", "/bin", "/sbin", "/lib", "/lib64", "/etc/alternatives", "/etc/ld.so.cache",
    "/dev/null", "/dev/urandom", "/proc", NULL
};

//  NVRTC's headers come from the caller (the toolkit's include dir); the
//  library and its builtins are loaded before the view is made.
static const char *const s_nvrtc_view [] = { "/dev/null", NULL };

static const sandbox_kind_info_t s_kinds [SANDBOX_KINDS] = {
    [SANDBOX_KERNEL] = {
        .name = "kernel", .program = "kgym-runner", .program_env = "KGYM_RUNNER",
        .backend = "cpu", .root = SANDBOX_ROOT_EMPTY, .relax = 0,
        .in_process = true, .pdeathsig = true, .cgroup = true, .channel = false,
        .rlimit_as = true, .fsize = 0, .nofile = 32, .view = NULL
    },
    [SANDBOX_CC] = {
        .name = "cc", .program = "kgym-runner", .program_env = "KGYM_RUNNER",
        .backend = "cpu", .root = SANDBOX_ROOT_VIEW,
        .relax = SANDBOX_RELAX_PROCESSES | SANDBOX_RELAX_FILE_WRITES,
        .in_process = false, .pdeathsig = true, .cgroup = true, .channel = false,
        .rlimit_as = true, .fsize = 256ull << 20, .nofile = 256, .view = s_cc_view
    },
    [SANDBOX_NVRTC] = {
        .name = "nvrtc", .program = "kgym-nvrtc", .program_env = "KGYM_NVRTC",
        .backend = "cuda", .root = SANDBOX_ROOT_VIEW, .relax = 0,
        .in_process = true, .pdeathsig = true, .cgroup = false, .channel = true,
        .rlimit_as = true, .operator_env = true, .fsize = 1u << 20, .nofile = 256,
        .view = s_nvrtc_view
    },
    [SANDBOX_CUDA] = {
        .name = "cuda", .program = "kgym-cuda-runner", .program_env = "KGYM_CUDA_RUNNER",
        .backend = "cuda", .root = SANDBOX_ROOT_HOST,
        .relax = SANDBOX_RELAX_UNIX_SOCKETS | SANDBOX_RELAX_FILE_WRITES | SANDBOX_RELAX_OWN_AFFINITY,
        //  Spawned by whichever thread runs a job, and kept across jobs:
        //  it watches its channel instead of dying with that thread.
        .in_process = true, .pdeathsig = false, .cgroup = true, .channel = true,
        .rlimit_as = false, .operator_env = true, .fsize = 64ull << 20, .nofile = 1024,
        .view = NULL
    },
    [SANDBOX_PYTHON] = {
        .name = "python", .program = "kgym-runner", .program_env = "KGYM_RUNNER",
        .backend = "cpu", .root = SANDBOX_ROOT_VIEW,
        .relax = SANDBOX_RELAX_UNIX_SOCKETS | SANDBOX_RELAX_PROCESSES | SANDBOX_RELAX_FILE_WRITES,
        .in_process = false, .pdeathsig = true, .cgroup = true, .channel = false,
        .rlimit_as = true, .fsize = 256ull << 20, .nofile = 1024, .view = s_python_view
    },
};

const sandbox_kind_info_t *
sandbox_kind_info (sandbox_kind_t kind)
{
    assert ((unsigned) kind < SANDBOX_KINDS);
    return &s_kinds [kind];
}

int
sandbox_kind_from_name (const char *name)
{
    for (int k = 0; name && k < SANDBOX_KINDS; k++)
        if (strcmp (s_kinds [k].name, name) == 0)
            return k;
    return -1;
}
