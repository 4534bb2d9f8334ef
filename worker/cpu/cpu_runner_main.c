/*  kgym-runner - the sandboxed child that loads and calls C kernels, and
    the confined wrapper of programs run on untrusted input (the compiler).

    Started by sandbox (worker/sandbox/sandbox.c) as pid 1 of its own pid
    namespace with the sandbox's options (sandbox_confine.h) and its own:

        kgym-runner --mode kernel --sock FD --shm FD [sandbox options]
        kgym-runner --mode exec [sandbox options] -- PROGRAM ARGS...
        kgym-runner --mode probe --sock FD [sandbox options]

    It confines itself (sandbox_confine: cgroup, namespaces, its own root,
    its own uid, rlimits, no_new_privs, seccomp) and waits for the
    supervisor to check that from outside before anything untrusted runs.
    Then by mode:

        kernel  dlopen /candidate.so (the only file its root holds; its
                constructors run confined), send READY, serve requests
                (cpu_runner_proto.h) until EXIT or EOF.
        exec    execv the program (the compiler), inside its view.
        probe   wait until the supervisor hangs up (it keeps our empty
                network and IPC namespaces for later runners).

    Once the candidate is loaded everything in this process is the
    candidate's to corrupt: the supervisor trusts nothing it says.
*/
#include "common_util.h"
#include "cpu_runner_proto.h"
#include "common_dtype.h"
#include "sandbox_confine.h"
#include "sandbox_root.h"
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <ffi.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef enum { S_MODE_KERNEL, S_MODE_EXEC, S_MODE_PROBE } s_mode_t;

//  Command line (besides the sandbox's options).
typedef struct {
    s_mode_t mode;                  //  what to do once confined
    int sock, shm;                  //  passed descriptors, -1 when absent
    char **argv;                    //  exec mode: the command
} s_args_t;

//  Kernel mode state.
typedef struct {
    s_args_t *args;
    void *handle;                   //  the candidate's object
    struct link_map *map;           //  its link map, to tell its symbols from libc's
    uint8_t *base;                  //  shared memory mapping
    uint64_t mapped;                //  its size
    uint8_t *scratch;               //  the workspace: private anonymous memory, counted here
    uint64_t scratch_size;          //  its mapped size
} s_runner_t;

//  ---------------------------------------------------------------------
//  Small helpers

static int
s_parse_fd (const char *text, int *fd)
{
    if (!text || *text < '0' || *text > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long v = strtoul (text, &end, 10);
    if (errno || *end || v < 3 || v > 65535)
        return -1;
    *fd = (int) v;
    return 0;
}

//  The runner's own options; argv no longer holds the sandbox's.
static int
s_args_parse (int argc, char **argv, s_args_t *args)
{
    memset (args, 0, sizeof *args);
    args->sock = args->shm = -1;
    bool have_mode = false;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv [i];
        if (strcmp (opt, "--") == 0) {
            args->argv = argv + i + 1;
            break;
        }
        if (i + 1 >= argc)
            return -1;
        const char *val = argv [++i];
        if (strcmp (opt, "--mode") == 0) {
            have_mode = true;
            if (strcmp (val, "kernel") == 0)
                args->mode = S_MODE_KERNEL;
            else
            if (strcmp (val, "exec") == 0)
                args->mode = S_MODE_EXEC;
            else
            if (strcmp (val, "probe") == 0)
                args->mode = S_MODE_PROBE;
            else
                return -1;
        }
        else
        if (strcmp (opt, "--sock") == 0) {
            if (s_parse_fd (val, &args->sock))
                return -1;
        }
        else
        if (strcmp (opt, "--shm") == 0) {
            if (s_parse_fd (val, &args->shm))
                return -1;
        }
        else
            return -1;
    }
    if (!have_mode)
        return -1;
    if (args->mode == S_MODE_EXEC && (!args->argv || !args->argv [0] || args->argv [0][0] != '/'))
        return -1;
    if (args->mode == S_MODE_KERNEL && (args->sock < 0 || args->shm < 0))
        return -1;
    if (args->mode == S_MODE_PROBE && args->sock < 0)
        return -1;
    return 0;
}

//  The number of the request being answered (0: READY, before any).
static uint32_t s_seq;

static void
s_send_reply (int sock, uint32_t status, uint64_t elapsed_ns, const char *message)
{
    runner_reply_t reply;
    memset (&reply, 0, sizeof reply);
    reply.seq = s_seq;
    reply.status = status;
    reply.elapsed_ns = elapsed_ns;
    if (message)
        snprintf (reply.message, sizeof reply.message, "%s", message);
    while (send (sock, &reply, sizeof reply, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

//  ---------------------------------------------------------------------
//  Kernel mode

//  Map shm_size bytes of the shared memory (remapped when the size changes).
static int
s_map (s_runner_t *self, uint64_t size)
{
    if (size == self->mapped)
        return 0;
    if (self->base)
        munmap (self->base, self->mapped);
    self->base = NULL;
    self->mapped = 0;
    if (size == 0)
        return 0;
    struct stat st;
    if (fstat (self->args->shm, &st) != 0 || (uint64_t) st.st_size < size || size > SIZE_MAX)
        return -1;
    void *base = mmap (NULL, (size_t) size, PROT_READ | PROT_WRITE, MAP_SHARED, self->args->shm, 0);
    if (base == MAP_FAILED)
        return -1;
    self->base = base;
    self->mapped = size;
    return 0;
}

static ffi_type *
s_ffi_type (uint32_t dtype)
{
    switch (dtype) {
        case DTYPE_F32:  return &ffi_type_float;
        case DTYPE_F64:  return &ffi_type_double;
        case DTYPE_I8:   return &ffi_type_sint8;
        case DTYPE_U8:   return &ffi_type_uint8;
        case DTYPE_I32:  return &ffi_type_sint32;
        case DTYPE_I64:  return &ffi_type_sint64;
        case DTYPE_F16:
        case DTYPE_BF16: return &ffi_type_uint16;
        default:         return NULL;
    }
}

//  One argument's value as libffi wants it.
typedef union {
    void *ptr;
    float f32;
    double f64;
    int8_t i8;
    uint8_t u8;
    int32_t i32;
    int64_t i64;
    uint16_t u16;
} s_value_t;

//  The candidate's own function named name, or NULL (also for libc's).
static void *
s_resolve (s_runner_t *self, const char *name)
{
    dlerror ();
    void *sym = dlsym (self->handle, name);
    if (!sym)
        return NULL;
    Dl_info info;
    struct link_map *map = NULL;
    const ElfW(Sym) *entry = NULL;
    if (!dladdr1 (sym, &info, (void **) &map, RTLD_DL_LINKMAP) || map != self->map)
        return NULL;
    if (dladdr1 (sym, &info, (void **) &entry, RTLD_DL_SYMENT) && entry) {
        int type = ELF64_ST_TYPE (entry->st_info);
        if (type != STT_FUNC && type != STT_GNU_IFUNC)
            return NULL;
    }
    return sym;
}


//  CPU time of the whole process (every thread the kernel started).
static uint64_t
s_cpu_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

//  Serve one RUN request.
static void
s_run (s_runner_t *self, runner_request_t *req)
{
    char msg [256];
    int sock = self->args->sock;
    if (req->nargs > RUNNER_MAX_ARGS || req->nlaunches > RUNNER_MAX_LAUNCHES) {
        s_send_reply (sock, RUNNER_BAD_REQUEST, 0, "too many args or launches");
        return;
    }
    if (s_map (self, req->shm_size) != 0) {
        snprintf (msg, sizeof msg, "cannot map %llu bytes of shared memory",
                  (unsigned long long) req->shm_size);
        s_send_reply (sock, RUNNER_SHM_FAILED, 0, msg);
        return;
    }
    //  The workspace starts zeroed every call, so it carries nothing from
    //  an earlier run (dropped pages read back as zeros).
    if (req->workspace_bytes > self->scratch_size) {
        if (self->scratch)
            munmap (self->scratch, self->scratch_size);
        self->scratch_size = 0;
        void *scratch = req->workspace_bytes <= SIZE_MAX
                      ? mmap (NULL, (size_t) req->workspace_bytes, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                      : MAP_FAILED;
        if (scratch == MAP_FAILED) {
            self->scratch = NULL;
            snprintf (msg, sizeof msg, "cannot map a %llu-byte workspace",
                      (unsigned long long) req->workspace_bytes);
            s_send_reply (sock, RUNNER_SHM_FAILED, 0, msg);
            return;
        }
        self->scratch = scratch;
        self->scratch_size = req->workspace_bytes;
    }
    else
    if (self->scratch)
        madvise (self->scratch, self->scratch_size, MADV_DONTNEED);
    static s_value_t values [RUNNER_MAX_ARGS];
    ffi_type *types [RUNNER_MAX_ARGS];
    for (uint32_t i = 0; i < req->nargs; i++) {
        const runner_arg_t *arg = &req->args [i];
        if (arg->kind == RUNNER_ARG_PTR) {
            if (arg->offset >= req->shm_size || !self->base) {
                snprintf (msg, sizeof msg, "arg %u: offset %llu outside the %llu bytes of shared memory",
                          i, (unsigned long long) arg->offset, (unsigned long long) req->shm_size);
                s_send_reply (sock, RUNNER_BAD_REQUEST, 0, msg);
                return;
            }
            values [i].ptr = self->base + arg->offset;
            types [i] = &ffi_type_pointer;
            continue;
        }
        if (arg->kind == RUNNER_ARG_WORKSPACE) {
            values [i].ptr = self->scratch;
            types [i] = &ffi_type_pointer;
            continue;
        }
        types [i] = arg->kind == RUNNER_ARG_SCALAR? s_ffi_type (arg->dtype): NULL;
        if (!types [i]) {
            snprintf (msg, sizeof msg, "arg %u: bad kind %u or dtype %u", i, arg->kind, arg->dtype);
            s_send_reply (sock, RUNNER_BAD_REQUEST, 0, msg);
            return;
        }
        uint64_t bits = arg->bits;
        switch (arg->dtype) {
            case DTYPE_F32:  { uint32_t b = (uint32_t) bits; memcpy (&values [i].f32, &b, 4); break; }
            case DTYPE_F64:  memcpy (&values [i].f64, &bits, 8); break;
            case DTYPE_I8:   values [i].i8 = (int8_t) (uint8_t) bits; break;
            case DTYPE_U8:   values [i].u8 = (uint8_t) bits; break;
            case DTYPE_I32:  values [i].i32 = (int32_t) (uint32_t) bits; break;
            case DTYPE_I64:  values [i].i64 = (int64_t) bits; break;
            default:         values [i].u16 = (uint16_t) bits; break;
        }
    }
    //  Resolve and prepare every launch before running any.
    static ffi_cif cifs [RUNNER_MAX_LAUNCHES];
    static ffi_type *ltypes [RUNNER_MAX_LAUNCHES][RUNNER_MAX_ARGS];
    static void *lvalues [RUNNER_MAX_LAUNCHES][RUNNER_MAX_ARGS];
    void *fns [RUNNER_MAX_LAUNCHES];
    for (uint32_t j = 0; j < req->nlaunches; j++) {
        runner_launch_t *launch = &req->launches [j];
        if (strnlen (launch->kernel, RUNNER_MAX_SYMBOL) >= RUNNER_MAX_SYMBOL
        ||  launch->kernel [0] == 0 || launch->nargs > RUNNER_MAX_ARGS) {
            snprintf (msg, sizeof msg, "launch %u: bad kernel name or argument count", j);
            s_send_reply (sock, RUNNER_BAD_REQUEST, 0, msg);
            return;
        }
        for (uint32_t k = 0; k < launch->nargs; k++) {
            uint32_t a = launch->args [k];
            if (a >= req->nargs) {
                snprintf (msg, sizeof msg, "launch %u: argument %u names arg %u of %u", j, k, a,
                          req->nargs);
                s_send_reply (sock, RUNNER_BAD_REQUEST, 0, msg);
                return;
            }
            ltypes [j][k] = types [a];
            lvalues [j][k] = &values [a];
        }
        fns [j] = s_resolve (self, launch->kernel);
        if (!fns [j]) {
            snprintf (msg, sizeof msg, "kernel '%.128s' is not a function of the candidate's module",
                      launch->kernel);
            s_send_reply (sock, RUNNER_NO_SYMBOL, 0, msg);
            return;
        }
        if (ffi_prep_cif (&cifs [j], FFI_DEFAULT_ABI, launch->nargs, &ffi_type_void,
                          ltypes [j]) != FFI_OK) {
            snprintf (msg, sizeof msg, "launch %u: cannot prepare the call", j);
            s_send_reply (sock, RUNNER_BAD_REQUEST, 0, msg);
            return;
        }
    }
    //  Per launch: wall and CPU time (the profile of the CPU backend).
    static runner_reply_t reply;
    memset (&reply, 0, sizeof reply);
    reply.nlaunches = req->nlaunches;
    uint64_t t0 = common_now_ns ();
    for (uint32_t j = 0; j < req->nlaunches; j++) {
        uint64_t w0 = common_now_ns (), c0 = s_cpu_ns ();
        ffi_call (&cifs [j], FFI_FN (fns [j]), NULL, lvalues [j]);
        reply.launch_cpu_ns [j] = s_cpu_ns () - c0;
        reply.launch_wall_ns [j] = common_now_ns () - w0;
    }
    reply.elapsed_ns = common_now_ns () - t0;
    reply.status = RUNNER_OK;
    reply.seq = s_seq;
    while (send (sock, &reply, sizeof reply, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

static int
s_kernel_main (s_args_t *args)
{
    s_runner_t self = { .args = args };
    self.handle = dlopen (SANDBOX_ROOT_OBJECT, RTLD_NOW | RTLD_LOCAL);
    if (!self.handle) {
        char msg [256];
        const char *why = dlerror ();
        snprintf (msg, sizeof msg, "load: %s", why? why: "dlopen failed");
        s_send_reply (args->sock, RUNNER_SETUP_FAILED, 0, msg);
        return 1;
    }
    if (dlinfo (self.handle, RTLD_DI_LINKMAP, &self.map) != 0 || !self.map) {
        s_send_reply (args->sock, RUNNER_SETUP_FAILED, 0, "load: no link map");
        return 1;
    }
    //  READY. What confines us is the supervisor's to say, not ours.
    s_send_reply (args->sock, RUNNER_OK, 0, NULL);
    static runner_request_t req;
    for (;;) {
        ssize_t n = recv (args->sock, &req, sizeof req, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            _exit (0);
        if (n < 0)
            _exit (1);
        if (n != (ssize_t) sizeof req) {
            s_send_reply (args->sock, RUNNER_BAD_REQUEST, 0, "request of the wrong size");
            continue;
        }
        s_seq = req.seq;
        switch (req.op) {
            case RUNNER_OP_PING:
                s_send_reply (args->sock, RUNNER_OK, 0, NULL);
                break;
            case RUNNER_OP_EXIT:
                _exit (0);
            case RUNNER_OP_RUN:
                s_run (&self, &req);
                break;
            default:
                s_send_reply (args->sock, RUNNER_BAD_REQUEST, 0, "unknown op");
                break;
        }
    }
}

int
main (int argc, char **argv)
{
    sandbox_confine_args_t confine;
    char err [512];
    s_args_t args;
    argc = sandbox_confine_parse (argc, argv, &confine, err, sizeof err);
    if (argc < 0 || s_args_parse (argc, argv, &args) != 0) {
        dprintf (2, "kgym-runner: %s\n", argc < 0? err: "usage: kgym-runner --mode kernel|exec|probe "
                 "[--sock FD --shm FD] SANDBOX-OPTIONS [-- PROGRAM ARGS]");
        return 64;
    }
    //  What the candidate's object may link besides libc, loaded while the
    //  host's files are still there (candidates are linked with -lm).
    if (args.mode == S_MODE_KERNEL)
        dlopen ("libm.so.6", RTLD_NOW | RTLD_GLOBAL);
    if (sandbox_confine (&confine, err, sizeof err) != 0)
        _exit (127);
    switch (args.mode) {
        case S_MODE_PROBE: {
            //  Stay until the supervisor has looked at our namespaces and hangs up.
            char byte;
            while (read (args.sock, &byte, 1) > 0)
                ;
            return 0;
        }
        case S_MODE_EXEC:
            execv (args.argv [0], args.argv);
            dprintf (2, "kgym-runner: cannot run %s: %s\n", args.argv [0], strerror (errno));
            return 127;
        default:
            return s_kernel_main (&args);
    }
}
