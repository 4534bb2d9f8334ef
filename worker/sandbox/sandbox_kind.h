/*  sandbox_kind - what each kind of runner may do: one policy per kind.

    Every runner is confined by the same code (sandbox_confine on the
    runner's side, sandbox on the supervisor's); a kind only says which of
    the common steps apply and which seccomp relaxations it needs, each with
    its reason in sandbox_kind.c. The stricter rule holds everywhere else.
    A new backend's runner is one more row of the table.
*/
#ifndef SANDBOX_KIND_H
#define SANDBOX_KIND_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    SANDBOX_KERNEL = 0,         //  kgym-runner --mode kernel|probe: a CPU candidate's object, in-process
    SANDBOX_CC,                 //  kgym-runner --mode exec: the C compiler on a candidate's source
    SANDBOX_NVRTC,              //  kgym-nvrtc: one NVRTC compile, in-process
    SANDBOX_CUDA,               //  kgym-cuda-runner: a GPU's contexts (untrusted device code only)
    SANDBOX_PYTHON,             //  kgym-runner --mode exec: a Python interpreter (PyTorch/Triton)
    SANDBOX_KINDS
} sandbox_kind_t;

//  The file system the runner sees.
typedef enum {
    SANDBOX_ROOT_EMPTY = 0,     //  a read-only tmpfs holding only the candidate's object
    SANDBOX_ROOT_VIEW,          //  a read-only tmpfs with read-only binds of listed paths, one writable dir
    SANDBOX_ROOT_HOST           //  the host's own (the CUDA driver needs /dev, /proc, /sys)
} sandbox_root_t;

//  seccomp relaxations (sandbox_seccomp), or-ed into sandbox_kind_info_t.relax.
#define SANDBOX_RELAX_UNIX_SOCKETS  0x01u   //  socket/socketpair of AF_UNIX
#define SANDBOX_RELAX_PROCESSES     0x02u   //  fork, clone, exec; signals to its own processes
#define SANDBOX_RELAX_FILE_WRITES   0x04u   //  open for writing, create, remove, rename files
#define SANDBOX_RELAX_OWN_AFFINITY  0x08u   //  sched_setaffinity of its own threads

//  One row of the table.
typedef struct {
    const char *name;           //  "kernel": command line and caps
    const char *program;        //  helper program the supervisor starts
    const char *program_env;    //  variable that may name it
    const char *backend;        //  its build-tree folder under worker/
    sandbox_root_t root;        //  file system view
    unsigned relax;             //  SANDBOX_RELAX_* (reasons in sandbox_kind.c)
    bool in_process;            //  untrusted input is handled in the confined process itself
    bool pdeathsig;             //  dies with the spawning thread (else it watches its channel)
    bool cgroup;                //  gets a memory + pids cgroup where the host allows one
    bool channel;               //  gets a SOCK_STREAM socketpair end as --fd N
    bool rlimit_as;             //  RLIMIT_AS from the memory cap (CUDA maps device memory: none)
    bool operator_env;          //  also gets the worker's LD_LIBRARY_PATH, KGYM_*, CUDA_* variables
    uint64_t fsize;             //  RLIMIT_FSIZE bytes
    uint32_t nofile;            //  RLIMIT_NOFILE
    const char *const *view;    //  SANDBOX_ROOT_VIEW: default read-only paths, NULL-terminated
} sandbox_kind_info_t;

//  The policy of kind (never NULL for a valid kind).
const sandbox_kind_info_t *sandbox_kind_info (sandbox_kind_t kind);

//  Kind by name ("kernel", "cc", ...); -1 when unknown.
int sandbox_kind_from_name (const char *name);

#endif
