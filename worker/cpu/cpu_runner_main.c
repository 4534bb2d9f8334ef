/*  kgym-runner - the sandboxed child that loads and calls C kernels.

    Spawned by sandbox (posix_spawn, own process group, fds passed by
    number). It confines itself before anything untrusted runs, in this
    order: join its cgroup (still privileged), die with its parent, new
    network and IPC namespaces (a user namespace too when not root), drop
    to nobody when root, rlimits, no_new_privs, not dumpable, close every
    other fd, seccomp. Then by mode:

        kernel  dlopen the candidate (its constructors run confined), send
                the READY reply with the caps text, serve requests
                (cpu_runner_proto.h) until EXIT or EOF.
        exec    execv the command (the compiler): may start processes and
                write files in its working directory, nothing else.
        probe   send the caps text and exit (what this host allows).

    kgym-runner --mode kernel|exec|probe --ppid PID --mem BYTES --pids N
                --cpu S [--sock FD] [--so FD] [--shm FD] [--cgroup DIR]...
                [-- PROGRAM ARGS...]

    Once the candidate is loaded everything in this process is the
    candidate's to corrupt: the supervisor trusts nothing it says.
*/
#include "common_util.h"
#include "cpu_runner_proto.h"
#include "common_dtype.h"
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <ffi.h>
#include <grp.h>
#include <link.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define S_NOBODY        65534
#define S_MAX_CGROUPS   2
#define S_EXEC_FSIZE    (256ull << 20)  //  the compiler's output files
#define S_NOFILE_KERNEL 32
#define S_NOFILE_EXEC   256
#define S_NPROC_LOOSE   4096            //  RLIMIT_NPROC when the pids cgroup binds

typedef enum { S_MODE_KERNEL, S_MODE_EXEC, S_MODE_PROBE } s_mode_t;

//  Command line.
typedef struct {
    s_mode_t mode;                  //  what to do once confined
    pid_t ppid;                     //  the spawner; we must still be its child
    uint64_t mem_bytes;             //  memory cap
    uint64_t max_pids;              //  processes+threads cap
    uint64_t cpu_s;                 //  RLIMIT_CPU seconds
    int sock, so, shm;              //  passed descriptors, -1 when absent
    int netns, ipcns;               //  namespaces to enter instead of making new ones, -1 when absent
    const char *cgroups [S_MAX_CGROUPS];    //  cgroup directories to join
    int ncgroups;
    char **argv;                    //  exec mode: the command
} s_args_t;

//  What was actually enforced (the caps text).
typedef struct {
    const char *cgroup;             //  "v2", "v1", "none"
    uint64_t cg_memory;             //  memory cap read back from the cgroup, 0 = none
    uint64_t cg_pids;               //  pids cap read back, 0 = none
    bool netns;                     //  new network namespace
    bool userns;                    //  new user namespace (not root)
    bool ipcns;                     //  new IPC namespace
    bool nobody;                    //  dropped to nobody
    uid_t uid;                      //  uid we run as (outside view)
    bool seccomp;                   //  filter installed
    bool empty_root;                //  kernel mode: a root of our own holding only the candidate
    uint64_t rlimit_as;             //  bytes
    uint64_t rlimit_nproc;
    char text [256];                //  the JSON
} s_caps_t;

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

static void s_send_reply (int sock, uint32_t status, uint64_t elapsed_ns, const char *message);

//  Where confinement failures are reported in kernel and probe modes.
static int s_report_fd = -1;

//  Refuse to go on: the supervisor hears why (socket or stderr).
static void
s_die (const char *what)
{
    if (s_report_fd >= 0)
        s_send_reply (s_report_fd, RUNNER_SETUP_FAILED, 0, what);
    dprintf (2, "kgym-runner: %s\n", what);
    _exit (127);
}

static int
s_parse_u64 (const char *text, uint64_t *value)
{
    if (!text || !*text)
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull (text, &end, 10);
    if (errno || *end || text [0] == '-')
        return -1;
    *value = v;
    return 0;
}

static int
s_parse_fd (const char *text, int *fd)
{
    uint64_t v;
    if (s_parse_u64 (text, &v) || v > 65535)
        return -1;
    *fd = (int) v;
    return 0;
}

static int
s_args_parse (int argc, char **argv, s_args_t *args)
{
    memset (args, 0, sizeof *args);
    args->sock = args->so = args->shm = -1;
    args->netns = args->ipcns = -1;
    args->mem_bytes = 4ull << 30;
    args->max_pids = 32;
    args->cpu_s = 120;
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
        uint64_t u;
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
        if (strcmp (opt, "--ppid") == 0) {
            if (s_parse_u64 (val, &u) || u == 0 || u > INT32_MAX)
                return -1;
            args->ppid = (pid_t) u;
        }
        else
        if (strcmp (opt, "--mem") == 0) {
            if (s_parse_u64 (val, &args->mem_bytes) || args->mem_bytes == 0)
                return -1;
        }
        else
        if (strcmp (opt, "--pids") == 0) {
            if (s_parse_u64 (val, &args->max_pids) || args->max_pids == 0)
                return -1;
        }
        else
        if (strcmp (opt, "--cpu") == 0) {
            if (s_parse_u64 (val, &args->cpu_s) || args->cpu_s == 0)
                return -1;
        }
        else
        if (strcmp (opt, "--sock") == 0) {
            if (s_parse_fd (val, &args->sock))
                return -1;
        }
        else
        if (strcmp (opt, "--so") == 0) {
            if (s_parse_fd (val, &args->so))
                return -1;
        }
        else
        if (strcmp (opt, "--shm") == 0) {
            if (s_parse_fd (val, &args->shm))
                return -1;
        }
        else
        if (strcmp (opt, "--netns") == 0) {
            if (s_parse_fd (val, &args->netns))
                return -1;
        }
        else
        if (strcmp (opt, "--ipcns") == 0) {
            if (s_parse_fd (val, &args->ipcns))
                return -1;
        }
        else
        if (strcmp (opt, "--cgroup") == 0) {
            if (args->ncgroups >= S_MAX_CGROUPS)
                return -1;
            args->cgroups [args->ncgroups++] = val;
        }
        else
            return -1;
    }
    if (!have_mode || args->ppid == 0)
        return -1;
    if (args->mode == S_MODE_EXEC && (!args->argv || !args->argv [0] || args->argv [0][0] != '/'))
        return -1;
    if (args->mode == S_MODE_KERNEL && (args->sock < 3 || args->so < 3 || args->shm < 3))
        return -1;
    if (args->mode == S_MODE_PROBE && args->sock < 3)
        return -1;
    return 0;
}

static int
s_write_text (const char *path, const char *text)
{
    int fd = open (path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen (text);
    ssize_t n = write (fd, text, len);
    close (fd);
    return n == (ssize_t) len? 0: -1;
}

//  The first unsigned number in a small file, 0 when none ("max" reads as 0).
static uint64_t
s_read_u64_file (const char *path)
{
    char buf [64];
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read (fd, buf, sizeof buf - 1);
    close (fd);
    if (n <= 0)
        return 0;
    buf [n] = 0;
    return strtoull (buf, NULL, 10);
}

static void
s_send_reply (int sock, uint32_t status, uint64_t elapsed_ns, const char *message)
{
    runner_reply_t reply;
    memset (&reply, 0, sizeof reply);
    reply.status = status;
    reply.elapsed_ns = elapsed_ns;
    if (message)
        snprintf (reply.message, sizeof reply.message, "%s", message);
    while (send (sock, &reply, sizeof reply, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

//  ---------------------------------------------------------------------
//  Confinement steps

//  Join the cgroup(s) the supervisor made and read back the caps in force.
static void
s_join_cgroups (const s_args_t *args, s_caps_t *caps)
{
    caps->cgroup = "none";
    char pid [24];
    snprintf (pid, sizeof pid, "%d", (int) getpid ());
    bool joined = false, v2 = false;
    for (int i = 0; i < args->ncgroups; i++) {
        char path [4200];
        snprintf (path, sizeof path, "%s/cgroup.procs", args->cgroups [i]);
        if (s_write_text (path, pid) != 0)
            continue;
        joined = true;
        snprintf (path, sizeof path, "%s/cgroup.controllers", args->cgroups [i]);
        if (access (path, F_OK) == 0) {
            v2 = true;
            snprintf (path, sizeof path, "%s/memory.max", args->cgroups [i]);
            caps->cg_memory = s_read_u64_file (path);
            snprintf (path, sizeof path, "%s/pids.max", args->cgroups [i]);
            caps->cg_pids = s_read_u64_file (path);
        }
        else {
            snprintf (path, sizeof path, "%s/memory.limit_in_bytes", args->cgroups [i]);
            if (access (path, F_OK) == 0)
                caps->cg_memory = s_read_u64_file (path);
            snprintf (path, sizeof path, "%s/pids.max", args->cgroups [i]);
            if (access (path, F_OK) == 0)
                caps->cg_pids = s_read_u64_file (path);
        }
    }
    //  A limit far above the cap (v1 "unlimited") binds nothing.
    if (caps->cg_memory > args->mem_bytes + (64ull << 20))
        caps->cg_memory = 0;
    if (caps->cg_pids > args->max_pids)
        caps->cg_pids = 0;
    if (joined)
        caps->cgroup = v2? "v2": "v1";
}

//  Die with the spawner; refuse to go on if it is already gone.
static void
s_parent_death (const s_args_t *args)
{
    if (prctl (PR_SET_PDEATHSIG, SIGKILL) != 0)
        s_die ("sandbox: PR_SET_PDEATHSIG failed");
    if (getppid () != args->ppid)
        _exit (127);
}

static int
s_write_map (const char *file, const char *text)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/self/%s", file);
    return s_write_text (path, text);
}

//  Kernel mode: a mount namespace whose root is a small tmpfs holding only
//  the candidate's object, so no file of the host can be opened, read or
//  listed from it (the seccomp filter already refuses writes). What the
//  object needs besides libc (libm: it is linked with -lm) is loaded first,
//  from the real root. Needs CAP_SYS_ADMIN: root, or the fresh user
//  namespace before its capabilities go. When it cannot be done the host's
//  world-readable files stay readable and the caps text says so
//  ("empty_root": false).
#define S_CANDIDATE_PATH "/candidate.so"

static void
s_empty_root (const s_args_t *args, s_caps_t *caps)
{
    if (args->mode != S_MODE_KERNEL || args->so < 0)
        return;
    dlopen ("libm.so.6", RTLD_NOW | RTLD_GLOBAL);
    struct stat st;
    if (fstat (args->so, &st) != 0 || !S_ISREG (st.st_mode)
    ||  unshare (CLONE_NEWNS) != 0
    ||  mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return;
    char options [96];
    snprintf (options, sizeof options, "size=%llu,mode=0755,nr_inodes=16",
              (unsigned long long) st.st_size + (1u << 20));
    if (mount ("kgym", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, options) != 0)
        return;
    //  Copy the object in (by offset: the descriptor's position is left alone).
    int out = open ("/tmp" S_CANDIDATE_PATH, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    bool copied = out >= 0;
    static char buf [65536];
    off_t at = 0;
    while (copied) {
        ssize_t n = pread (args->so, buf, sizeof buf, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            copied = n == 0 && at == st.st_size;
            break;
        }
        copied = write (out, buf, (size_t) n) == n;
        at += n;
    }
    if (out >= 0)
        close (out);
    if (!copied || mkdir ("/tmp/old", 0700) != 0
    ||  syscall (SYS_pivot_root, "/tmp", "/tmp/old") != 0 || chdir ("/") != 0
    ||  umount2 ("/old", MNT_DETACH) != 0)
        s_die ("sandbox: cannot switch to the empty root");
    rmdir ("/old");
    //  Nothing is mounted or created there from here on.
    mount (NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
    caps->empty_root = true;
}

//  New network (only lo, down) and IPC namespaces; not root: in a new user
//  namespace mapping only our own ids, then without capabilities.
//  As root, the supervisor may hand us empty namespaces made once by a probe
//  runner: entering one costs microseconds, making one milliseconds. They
//  hold nothing a kernel could use to reach another (no sockets, no SysV IPC).
static void
s_namespaces (const s_args_t *args, s_caps_t *caps)
{
    if (geteuid () == 0) {
        //  Root stays in the host's user namespace: it drops to nobody next.
        if ((args->netns >= 0 && setns (args->netns, CLONE_NEWNET) == 0)
        ||  unshare (CLONE_NEWNET) == 0)
            caps->netns = true;
        if ((args->ipcns >= 0 && setns (args->ipcns, CLONE_NEWIPC) == 0)
        ||  unshare (CLONE_NEWIPC) == 0)
            caps->ipcns = true;
        s_empty_root (args, caps);
        return;
    }
    uid_t uid = geteuid ();
    gid_t gid = getegid ();
    if (unshare (CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC) != 0)
        return;
    caps->userns = caps->netns = caps->ipcns = true;
    char map [64];
    s_write_map ("setgroups", "deny");
    snprintf (map, sizeof map, "%u %u 1", (unsigned) uid, (unsigned) uid);
    s_write_map ("uid_map", map);
    snprintf (map, sizeof map, "%u %u 1", (unsigned) gid, (unsigned) gid);
    s_write_map ("gid_map", map);
    s_empty_root (args, caps);
    //  unshare gave us every capability inside the new namespace: drop them.
    struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data [2];
    memset (data, 0, sizeof data);
    syscall (SYS_capset, &hdr, data);
}

static void
s_drop_root (s_caps_t *caps)
{
    caps->uid = geteuid ();
    if (geteuid () != 0 || caps->userns)
        return;
    if (setgroups (0, NULL) != 0
    ||  setresgid (S_NOBODY, S_NOBODY, S_NOBODY) != 0
    ||  setresuid (S_NOBODY, S_NOBODY, S_NOBODY) != 0
    ||  geteuid () != S_NOBODY || getuid () != S_NOBODY)
        s_die ("sandbox: cannot drop to nobody");
    caps->nobody = true;
    caps->uid = S_NOBODY;
}

static void
s_limit (int resource, uint64_t soft, uint64_t hard, const char *name)
{
    struct rlimit rl = { (rlim_t) soft, (rlim_t) hard };
    if (setrlimit (resource, &rl) != 0) {
        char msg [96];
        snprintf (msg, sizeof msg, "sandbox: setrlimit %s: %s", name, strerror (errno));
        s_die (msg);
    }
}

static void
s_rlimits (const s_args_t *args, s_caps_t *caps)
{
    //  With a memory cgroup the address-space cap is only a backstop, loose
    //  enough that the cgroup (a clear "out of memory") binds first.
    uint64_t as = caps->cg_memory? args->mem_bytes + args->mem_bytes / 2 + (1ull << 30)
                                 : args->mem_bytes + (256ull << 20);
    s_limit (RLIMIT_AS, as, as, "AS");
    caps->rlimit_as = as;
    s_limit (RLIMIT_CPU, args->cpu_s, args->cpu_s + 1, "CPU");
    uint64_t fsize = args->mode == S_MODE_EXEC? S_EXEC_FSIZE: 0;
    s_limit (RLIMIT_FSIZE, fsize, fsize, "FSIZE");
    uint64_t nofile = args->mode == S_MODE_EXEC? S_NOFILE_EXEC: S_NOFILE_KERNEL;
    s_limit (RLIMIT_NOFILE, nofile, nofile, "NOFILE");
    s_limit (RLIMIT_CORE, 0, 0, "CORE");
    s_limit (RLIMIT_MSGQUEUE, 0, 0, "MSGQUEUE");
    //  RLIMIT_NPROC counts every process of the uid (all runners share
    //  nobody): exact only when no pids cgroup does the job precisely.
    uint64_t nproc = caps->cg_pids? S_NPROC_LOOSE: args->max_pids;
    s_limit (RLIMIT_NPROC, nproc, nproc, "NPROC");
    caps->rlimit_nproc = nproc;
}

//  Close every descriptor but stdio and the ones we were given.
static void
s_close_fds (const s_args_t *args)
{
    int keep [3] = { args->sock, args->so, args->shm };
    //  sort the (at most three) kept fds
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (keep [j] < keep [i]) {
                int t = keep [i]; keep [i] = keep [j]; keep [j] = t;
            }
    unsigned int from = 3;
    bool ok = true;
    for (int i = 0; i < 3; i++) {
        if (keep [i] < 0)
            continue;
        if ((unsigned) keep [i] > from)
            ok &= syscall (SYS_close_range, from, (unsigned) keep [i] - 1, 0) == 0;
        from = (unsigned) keep [i] + 1;
    }
    ok &= syscall (SYS_close_range, from, ~0u, 0) == 0;
    if (ok)
        return;
    //  Kernels before 5.9: one by one, up to the current limit.
    long max = sysconf (_SC_OPEN_MAX);
    if (max < 0 || max > 1 << 20)
        max = 1 << 20;
    for (int fd = 3; fd < max; fd++)
        if (fd != keep [0] && fd != keep [1] && fd != keep [2])
            close (fd);
}

//  Deny syscall name (when this libseccomp knows it) with err.
static int
s_deny (scmp_filter_ctx ctx, int err, const char *name, unsigned int argc,
        const struct scmp_arg_cmp *cmp)
{
    int nr = seccomp_syscall_resolve_name (name);
    if (nr == __NR_SCMP_ERROR)
        return 0;
    int rc = seccomp_rule_add_array (ctx, SCMP_ACT_ERRNO (err), nr, argc, cmp);
    if (rc != 0)
        dprintf (2, "kgym-runner: seccomp rule for %s: %s\n", name, strerror (-rc));
    return rc;
}

#define S_DENY(ctx, name)               s_deny (ctx, EPERM, name, 0, NULL)
#define S_DENY_IF(ctx, name, ...)       \
    s_deny (ctx, EPERM, name, 1, (struct scmp_arg_cmp []) { __VA_ARGS__ })

static int
s_seccomp (const s_args_t *args)
{
    scmp_filter_ctx ctx = seccomp_init (SCMP_ACT_ALLOW);
    if (!ctx)
        return -1;
    int rc = 0;
    bool kernel = args->mode != S_MODE_EXEC;
    uint32_t self = (uint32_t) getpid ();

    //  Kernels get no sockets at all (runners may share a network namespace);
    //  the compiler only local ones. No peeking at or steering other processes.
    if (args->mode == S_MODE_KERNEL) {
        rc |= S_DENY (ctx, "socket");
        rc |= S_DENY (ctx, "socketpair");
        rc |= S_DENY (ctx, "mq_open");
    }
    else
        rc |= S_DENY_IF (ctx, "socket", SCMP_A0_32 (SCMP_CMP_NE, AF_UNIX));
    const char *always [] = {
        "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open",
        "pidfd_getfd", "pidfd_send_signal", "mount", "umount2", "pivot_root", "chroot",
        "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
        "unshare", "setns", "bpf", "keyctl", "add_key", "request_key", "perf_event_open",
        "userfaultfd", "init_module", "finit_module", "delete_module", "kexec_load",
        "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "io_uring_setup",
        "io_uring_enter", "io_uring_register", "setsid", "setpgid", "quotactl",
        "sethostname", "setdomainname", "settimeofday", "clock_settime", "clock_adjtime",
        "adjtimex", "syslog", "vhangup", "iopl", "ioperm", "open_by_handle_at",
        "name_to_handle_at", "fanotify_init", "lookup_dcookie", "uselib", "memfd_secret",
        "tkill", "mknod", "mknodat", "chown", "fchown", "lchown", "fchownat",
        "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
        NULL
    };
    for (int i = 0; always [i]; i++)
        rc |= S_DENY (ctx, always [i]);
    //  personality(0xffffffff) only asks.
    rc |= S_DENY_IF (ctx, "personality", SCMP_A0_32 (SCMP_CMP_NE, 0xffffffffu));
    //  The kernel reads these as int: compare the low 32 bits only (a
    //  32-bit EQ would miss garbage in the high half; NE rules deny it).
    rc |= S_DENY_IF (ctx, "prctl", SCMP_A0_64 (SCMP_CMP_MASKED_EQ, 0xffffffffu, PR_SET_DUMPABLE));
    rc |= S_DENY_IF (ctx, "prctl", SCMP_A0_64 (SCMP_CMP_MASKED_EQ, 0xffffffffu, PR_SET_PTRACER));
    rc |= S_DENY_IF (ctx, "prctl", SCMP_A0_64 (SCMP_CMP_MASKED_EQ, 0xffffffffu, PR_SET_MM));
    if (!kernel) {
        //  The compiler signals its own children; never everyone it can see.
        rc |= S_DENY_IF (ctx, "kill", SCMP_A0_64 (SCMP_CMP_MASKED_EQ, 0xffffffffu, 0xffffffffu));
    }
    else {
        //  Signals only to itself (abort, raise, pthread_kill use these).
        rc |= S_DENY_IF (ctx, "kill", SCMP_A0_32 (SCMP_CMP_NE, self));
        rc |= S_DENY_IF (ctx, "tgkill", SCMP_A0_32 (SCMP_CMP_NE, self));
        rc |= S_DENY_IF (ctx, "rt_sigqueueinfo", SCMP_A0_32 (SCMP_CMP_NE, self));
        rc |= S_DENY_IF (ctx, "rt_tgsigqueueinfo", SCMP_A0_32 (SCMP_CMP_NE, self));
        //  No new processes; threads only (the pids cap bounds them). clone3
        //  hides its flags in memory: ENOSYS makes glibc fall back to clone.
        const char *procs [] = { "execve", "execveat", "fork", "vfork", NULL };
        for (int i = 0; procs [i]; i++)
            rc |= S_DENY (ctx, procs [i]);
        rc |= S_DENY_IF (ctx, "clone", SCMP_A0_64 (SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
        rc |= s_deny (ctx, ENOSYS, "clone3", 0, NULL);
        //  No writing, creating or changing files (the fds we hold are enough).
        const struct { const char *name; int arg; } opens [] = { { "open", 1 }, { "openat", 2 } };
        const uint64_t bad [] = { O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND };
        for (int i = 0; i < 2; i++)
            for (size_t b = 0; b < sizeof bad / sizeof bad [0]; b++) {
                struct scmp_arg_cmp cmp = SCMP_CMP64 ((unsigned) opens [i].arg, SCMP_CMP_MASKED_EQ,
                                                      bad [b], bad [b]);
                rc |= s_deny (ctx, EPERM, opens [i].name, 1, &cmp);
            }
        //  openat2 hides its flags in memory: ENOSYS makes glibc use openat.
        rc |= s_deny (ctx, ENOSYS, "openat2", 0, NULL);
        const char *files [] = {
            "creat", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat",
            "renameat2", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod",
            "fchmodat", "fchmodat2", "truncate", "ftruncate", "fallocate", "utime", "utimes",
            "futimesat", "utimensat", "mq_open", "shmget", "msgget", "semget", NULL
        };
        for (int i = 0; files [i]; i++)
            rc |= S_DENY (ctx, files [i]);
#if defined(__x86_64__)
        //  fchmodat2 (452) is newer than some libseccomp releases.
        if (seccomp_syscall_resolve_name ("fchmodat2") == __NR_SCMP_ERROR)
            rc |= seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), 452, 0);
#endif
    }
    if (rc == 0)
        rc = seccomp_load (ctx);
    seccomp_release (ctx);
    return rc == 0? 0: -1;
}

static void
s_caps_text (const s_args_t *args, s_caps_t *caps)
{
    char mem [32] = "null", pids [32] = "null";
    if (caps->cg_memory)
        snprintf (mem, sizeof mem, "%llu", (unsigned long long) caps->cg_memory);
    if (caps->cg_pids)
        snprintf (pids, sizeof pids, "%llu", (unsigned long long) caps->cg_pids);
    char uid [24];
    if (caps->nobody)
        snprintf (uid, sizeof uid, "\"nobody\"");
    else
        snprintf (uid, sizeof uid, "%u", (unsigned) caps->uid);
    snprintf (caps->text, sizeof caps->text,
              "{\"netns\":%s,\"userns\":%s,\"uid\":%s,\"seccomp\":%s,\"cgroup\":\"%s\","
              "\"memory_bytes\":%s,\"pids\":%s,\"rlimit_as\":%llu,\"rlimit_nproc\":%llu,"
              "\"cpu_s\":%llu,\"empty_root\":%s}",
              caps->netns? "true": "false", caps->userns? "true": "false", uid,
              caps->seccomp? "true": "false", caps->cgroup, mem, pids,
              (unsigned long long) caps->rlimit_as, (unsigned long long) caps->rlimit_nproc,
              (unsigned long long) args->cpu_s, caps->empty_root? "true": "false");
}

//  Everything before untrusted code: see the file header for the order.
static void
s_confine (const s_args_t *args, s_caps_t *caps)
{
    memset (caps, 0, sizeof *caps);
    s_join_cgroups (args, caps);
    s_parent_death (args);
    s_namespaces (args, caps);
    s_drop_root (caps);
    //  A change of credentials clears the parent-death signal: set it again.
    s_parent_death (args);
    s_rlimits (args, caps);
    if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        s_die ("sandbox: PR_SET_NO_NEW_PRIVS failed");
    prctl (PR_SET_DUMPABLE, 0, 0, 0, 0);
    s_close_fds (args);
    if (s_seccomp (args) != 0)
        s_die ("sandbox: seccomp filter failed");
    caps->seccomp = true;
    s_caps_text (args, caps);
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
    while (send (sock, &reply, sizeof reply, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

static int
s_kernel_main (s_args_t *args, s_caps_t *caps)
{
    s_runner_t self = { .args = args };
    char path [64];
    if (caps->empty_root)
        snprintf (path, sizeof path, "%s", S_CANDIDATE_PATH);
    else
        snprintf (path, sizeof path, "/proc/self/fd/%d", args->so);
    self.handle = dlopen (path, RTLD_NOW | RTLD_LOCAL);
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
    close (args->so);
    s_send_reply (args->sock, RUNNER_OK, 0, caps->text);
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
    s_args_t args;
    if (s_args_parse (argc, argv, &args) != 0)
        s_die ("usage: kgym-runner --mode kernel|exec|probe --ppid PID [options] [-- PROGRAM ARGS]");
    if (args.mode != S_MODE_EXEC)
        s_report_fd = args.sock;
    s_caps_t caps;
    s_confine (&args, &caps);
    switch (args.mode) {
        case S_MODE_PROBE: {
            s_send_reply (args.sock, RUNNER_OK, 0, caps.text);
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
            return s_kernel_main (&args, &caps);
    }
}
