/*  sandbox_seccomp - the one seccomp filter every runner installs.

    See sandbox_seccomp.h for what it denies; sandbox_kind.c for the
    relaxations. Rules naming "another process" take a pid argument: in its
    own pid namespace a runner is pid 1, so 0 and 1 are itself and anything
    above is another (libseccomp allows one comparison per argument and
    rule, so "neither 0 nor self" is written as "above 1"). Outside a pid
    namespace (unit tests) only 0 counts as itself.
*/
#include "common_util.h"
#include "sandbox_seccomp.h"
#include "sandbox_kind.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_PRIO_PROCESS          0       //  setpriority's which: one process
//  x86_64 numbers where the C library's headers are older than the kernel.
#ifndef SYS_memfd_secret
#define SYS_memfd_secret        447
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2           452
#endif
#define S_IOPRIO_WHO_PROCESS    1       //  ioprio_set's which: one process

//  Denied for every kind, whatever the arguments.
static const char *const s_always [] = {
    //  reaching into other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open", "pidfd_getfd",
    "pidfd_send_signal", "process_madvise", "process_mrelease", "tkill",
    "sched_setattr", "sched_setscheduler", "sched_setparam",
    //  namespaces and mounts
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "unshare", "setns",
    //  leaving the session and process group the supervisor stops and kills
    //  (setpgid: see sandbox_seccomp_load)
    "setsid",
    //  IPC objects
    "shmget", "msgget", "semget", "mq_open",
    //  large or privileged kernel surface
    "bpf", "keyctl", "add_key", "request_key", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct",
    "quotactl", "quotactl_fd", "sethostname", "setdomainname", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "syslog", "vhangup", "iopl", "ioperm", "open_by_handle_at",
    "name_to_handle_at", "fanotify_init", "lookup_dcookie", "uselib", "memfd_secret",
    "mknod", "mknodat", "chown", "fchown", "lchown", "fchownat",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    "setxattrat", "removexattrat", "open_tree_attr",
    NULL
};

//  Denied unless SANDBOX_RELAX_FILE_WRITES (open/openat by their flags).
static const char *const s_file_changes [] = {
    "creat", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat",
    "renameat2", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat",
    "fchmodat2", "truncate", "ftruncate", "fallocate", "utime", "utimes", "futimesat",
    "utimensat", NULL
};

//  Denied unless SANDBOX_RELAX_PROCESSES (clone by its flags).
static const char *const s_processes [] = { "execve", "execveat", "fork", "vfork", NULL };

//  x86_64 numbers of calls newer than some libseccomp releases know.
static const struct { const char *name; int nr; } s_numbers [] = {
#if defined(__x86_64__)
    { "mount_setattr", 442 }, { "quotactl_fd", 443 }, { "memfd_secret", 447 },
    { "process_mrelease", 448 }, { "fchmodat2", 452 }, { "setxattrat", 463 },
    { "removexattrat", 466 }, { "open_tree_attr", 467 },
#endif
    { NULL, 0 }
};

static int
s_number (const char *name)
{
    int nr = seccomp_syscall_resolve_name (name);
    for (int i = 0; nr == __NR_SCMP_ERROR && s_numbers [i].name; i++)
        if (strcmp (s_numbers [i].name, name) == 0)
            nr = s_numbers [i].nr;
    return nr;
}

//  The filter being built.
typedef struct {
    scmp_filter_ctx ctx;
    int deny;                   //  errno of a denied call
    int failed;                 //  first libseccomp error
    char what [64];             //  the call it failed on
} s_filter_t;

//  Deny name (when it exists here) with errno when every comparison holds.
static void
s_rule (s_filter_t *f, int err, const char *name, unsigned argc, const struct scmp_arg_cmp *cmp)
{
    int nr = s_number (name);
    if (nr == __NR_SCMP_ERROR || f->failed)
        return;                 //  a call this architecture lacks is no hole
    int rc = seccomp_rule_add_array (f->ctx, SCMP_ACT_ERRNO ((unsigned) err), nr, argc, cmp);
    if (rc) {
        f->failed = rc;
        snprintf (f->what, sizeof f->what, "%s", name);
    }
}

#define S_DENY(f, name)          s_rule (f, (f)->deny, name, 0, NULL)
#define S_DENY_IF(f, name, ...)  \
    s_rule (f, (f)->deny, name, 1, (struct scmp_arg_cmp []) { __VA_ARGS__ })

//  Deny name when its argument arg names another process.
static void
s_deny_other (s_filter_t *f, const char *name, unsigned arg)
{
    struct scmp_arg_cmp cmp = getpid () == 1? SCMP_CMP32 (arg, SCMP_CMP_GT, 1)
                                            : SCMP_CMP32 (arg, SCMP_CMP_NE, 0);
    s_rule (f, f->deny, name, 1, &cmp);
}

int
sandbox_seccomp_load (unsigned relax, int deny_errno, char *err, size_t errlen)
{
    s_filter_t f = { .ctx = seccomp_init (SCMP_ACT_ALLOW), .deny = deny_errno };
    if (!f.ctx) {
        common_seterr (err, errlen, "seccomp_init failed");
        return -1;
    }
    //  Threads a runner may already have (NVRTC's, the driver's) get it too.
    seccomp_attr_set (f.ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    for (int i = 0; s_always [i]; i++)
        S_DENY (&f, s_always [i]);
    uint32_t self = (uint32_t) getpid ();
    //  setpgid: a kind with processes of its own runs build tools that put
    //  each child in a group of its own (ninja's posix_spawn, for
    //  load_inline); the call succeeds and changes nothing, so every
    //  process stays in the group the supervisor stops while it times the
    //  baseline. Others are refused.
    s_rule (&f, relax & SANDBOX_RELAX_PROCESSES? 0: f.deny, "setpgid", 0, NULL);

    //  Sockets: none, or local ones only. Other families answer "not
    //  supported", as the CUDA runner's filter always did: a library that
    //  probes for them (the driver) takes that in its stride.
    if (relax & SANDBOX_RELAX_UNIX_SOCKETS) {
        struct scmp_arg_cmp cmp = SCMP_A0_32 (SCMP_CMP_NE, AF_UNIX);
        s_rule (&f, EAFNOSUPPORT, "socket", 1, &cmp);
        s_rule (&f, EAFNOSUPPORT, "socketpair", 1, &cmp);
    }
    else {
        S_DENY (&f, "socket");
        S_DENY (&f, "socketpair");
    }
    //  personality(0xffffffff) only asks. prctl's option is an int: compare
    //  the low 32 bits (garbage above them must not slip past an EQ).
    S_DENY_IF (&f, "personality", SCMP_A0_32 (SCMP_CMP_NE, 0xffffffffu));
    const int options [] = { PR_SET_DUMPABLE, PR_SET_PTRACER, PR_SET_MM };
    for (size_t i = 0; i < sizeof options / sizeof options [0]; i++)
        S_DENY_IF (&f, "prctl", SCMP_A0_64 (SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint64_t) options [i]));

    //  Signals: only to itself; a kind with processes of its own may signal
    //  them (its pid namespace holds nothing else), never everyone at once.
    if (relax & SANDBOX_RELAX_PROCESSES) {
        S_DENY_IF (&f, "kill", SCMP_A0_32 (SCMP_CMP_EQ, 0xffffffffu));
        S_DENY_IF (&f, "rt_sigqueueinfo", SCMP_A0_32 (SCMP_CMP_EQ, 0xffffffffu));
    }
    else {
        const char *const sigs [] = { "kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", NULL };
        for (int i = 0; sigs [i]; i++)
            S_DENY_IF (&f, sigs [i], SCMP_A0_32 (SCMP_CMP_NE, self));
    }
    //  Another process's limits, priority, affinity, I/O priority, pages.
    s_deny_other (&f, "prlimit64", 0);
    s_deny_other (&f, "migrate_pages", 0);
    s_deny_other (&f, "move_pages", 0);
    if (relax & SANDBOX_SECCOMP_PINNED)
        S_DENY (&f, "sched_setaffinity");
    else
    if (!(relax & SANDBOX_RELAX_OWN_AFFINITY))
        s_deny_other (&f, "sched_setaffinity", 0);
    const char *const prio [] = { "setpriority", "getpriority", NULL };
    for (int i = 0; prio [i]; i++) {
        S_DENY_IF (&f, prio [i], SCMP_A0_32 (SCMP_CMP_NE, S_PRIO_PROCESS));
        s_deny_other (&f, prio [i], 1);
    }
    S_DENY_IF (&f, "ioprio_set", SCMP_A0_32 (SCMP_CMP_NE, S_IOPRIO_WHO_PROCESS));
    s_deny_other (&f, "ioprio_set", 1);

    //  New namespaces through clone; clone3 hides its flags in memory:
    //  ENOSYS makes glibc fall back to clone, whose flags are visible.
    const uint64_t ns_flags [] = { CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
                                   CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP };
    for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags [0]; i++)
        S_DENY_IF (&f, "clone", SCMP_A0_64 (SCMP_CMP_MASKED_EQ, ns_flags [i], ns_flags [i]));
    s_rule (&f, ENOSYS, "clone3", 0, NULL);
    //  No new processes; threads are fine (the pids cap bounds them).
    if (!(relax & SANDBOX_RELAX_PROCESSES)) {
        for (int i = 0; s_processes [i]; i++)
            S_DENY (&f, s_processes [i]);
        S_DENY_IF (&f, "clone", SCMP_A0_64 (SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
    }
    //  No writing, creating or changing files (the fds it holds are enough).
    if (!(relax & SANDBOX_RELAX_FILE_WRITES)) {
        const struct { const char *name; unsigned arg; } opens [] = { { "open", 1 }, { "openat", 2 } };
        const uint64_t bad [] = { O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND };
        for (size_t i = 0; i < 2; i++)
            for (size_t b = 0; b < sizeof bad / sizeof bad [0]; b++) {
                struct scmp_arg_cmp cmp = SCMP_CMP64 (opens [i].arg, SCMP_CMP_MASKED_EQ, bad [b], bad [b]);
                s_rule (&f, f.deny, opens [i].name, 1, &cmp);
            }
        s_rule (&f, ENOSYS, "openat2", 0, NULL);
        for (int i = 0; s_file_changes [i]; i++)
            S_DENY (&f, s_file_changes [i]);
    }
    int rc = f.failed;
    if (rc)
        common_seterr (err, errlen, "seccomp rule for %s: %s", f.what, strerror (-rc));
    else
    if ((rc = seccomp_load (f.ctx)) != 0)
        common_seterr (err, errlen, "seccomp_load: %s", strerror (-rc));
    seccomp_release (f.ctx);
    return rc? -1: 0;
}

//  ---------------------------------------------------------------------
//  Self-test: each denied call once, with arguments the filter denies.

//  pid 2: not itself, and in the runner's own pid namespace no one else.
#define S_OTHER 2

//  Run fn's call; its errno, 0 when it succeeded.
static int
s_errno (long rc)
{
    return rc < 0? errno: 0;
}

//  A call that would make a process: the child (if any) leaves at once.
static int
s_spawn_errno (long rc)
{
    if (rc == 0)
        _exit (0);
    if (rc > 0) {
        waitpid ((pid_t) rc, NULL, 0);
        return 0;
    }
    return errno;
}

//  setpgid (0, 0) in a child of its own (the runner leads its group
//  already): the filter refuses it with an errno, or lets it succeed with
//  no effect; either reads as the test errno. 0: the child left the group.
static int
s_setpgid_errno (bool procs)
{
    if (!procs)
        return s_errno (syscall (SYS_setpgid, 0, 0));
    pid_t group = getpgrp ();
    pid_t pid = fork ();
    if (pid == 0) {
        long rc = syscall (SYS_setpgid, 0, 0);
        _exit (rc < 0 || getpgrp () == group? 0: 1);
    }
    if (pid < 0)
        return errno;
    int status = 0;
    waitpid (pid, &status, 0);
    return WIFEXITED (status) && WEXITSTATUS (status) == 0? SANDBOX_SECCOMP_TEST_ERRNO: 0;
}

static int
s_socket_errno (long fd)
{
    if (fd >= 0)
        close ((int) fd);
    return fd < 0? errno: 0;
}

static void
s_report (FILE *out, bool *first, const char *name, bool relaxed, int err)
{
    if (relaxed)
        fprintf (out, "%s\"%s\":null", *first? "": ",", name);
    else
        fprintf (out, "%s\"%s\":%d", *first? "": ",", name, err);
    *first = false;
}

void
sandbox_seccomp_selftest (unsigned relax, int fd)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream (&text, &len);
    if (!out)
        return;
    bool first = true;
    bool procs = relax & SANDBOX_RELAX_PROCESSES, files = relax & SANDBOX_RELAX_FILE_WRITES;
    const char *none = "/nonexistent/kgym";
    siginfo_t info;
    memset (&info, 0, sizeof info);
    cpu_set_t cpus;
    CPU_ZERO (&cpus);
    struct rlimit rl;
    int sv [2];
    fputc ('{', out);
#define S_PROBE(name, relaxed, call)  \
    do { errno = 0; s_report (out, &first, name, relaxed, (relaxed)? 0: (call)); } while (0)
    S_PROBE ("socket_inet", false, s_socket_errno (socket (AF_INET, SOCK_STREAM, 0)));
    S_PROBE ("socket_unix", relax & SANDBOX_RELAX_UNIX_SOCKETS, s_socket_errno (socket (AF_UNIX, SOCK_STREAM, 0)));
    S_PROBE ("socketpair_unix", relax & SANDBOX_RELAX_UNIX_SOCKETS,
             socketpair (AF_UNIX, SOCK_STREAM, 0, sv) == 0? (close (sv [0]), close (sv [1]), 0): errno);
    S_PROBE ("ptrace", false, s_errno (syscall (SYS_ptrace, 2 /* PEEKDATA */, S_OTHER, 0, 0)));
    S_PROBE ("process_vm_readv", false, s_errno (syscall (SYS_process_vm_readv, S_OTHER, NULL, 0, NULL, 0, 0)));
    S_PROBE ("process_vm_writev", false, s_errno (syscall (SYS_process_vm_writev, S_OTHER, NULL, 0, NULL, 0, 0)));
    S_PROBE ("kcmp", false, s_errno (syscall (SYS_kcmp, 1, S_OTHER, 0, 0, 0)));
    S_PROBE ("pidfd_open", false, s_errno (syscall (SYS_pidfd_open, S_OTHER, 0)));
    S_PROBE ("pidfd_getfd", false, s_errno (syscall (SYS_pidfd_getfd, -1, 0, 0)));
    S_PROBE ("pidfd_send_signal", false, s_errno (syscall (SYS_pidfd_send_signal, -1, 0, NULL, 0)));
    S_PROBE ("process_madvise", false, s_errno (syscall (SYS_process_madvise, -1, NULL, 0, 0, 0)));
    S_PROBE ("tkill", false, s_errno (syscall (SYS_tkill, S_OTHER, 0)));
    S_PROBE ("kill_other", false, s_errno (syscall (SYS_kill, procs? -1: S_OTHER, 0)));
    S_PROBE ("tgkill_other", procs, s_errno (syscall (SYS_tgkill, S_OTHER, S_OTHER, 0)));
    S_PROBE ("rt_sigqueueinfo_other", false,
             s_errno (syscall (SYS_rt_sigqueueinfo, procs? -1: S_OTHER, 0, &info)));
    S_PROBE ("rt_tgsigqueueinfo_other", procs,
             s_errno (syscall (SYS_rt_tgsigqueueinfo, S_OTHER, S_OTHER, 0, &info)));
    S_PROBE ("prlimit64_other", false, s_errno (syscall (SYS_prlimit64, S_OTHER, RLIMIT_CPU, NULL, &rl)));
    S_PROBE ("setpriority_other", false, s_errno (syscall (SYS_setpriority, S_PRIO_PROCESS, S_OTHER, 0)));
    S_PROBE ("setpriority_group", false, s_errno (syscall (SYS_setpriority, 1 /* PGRP */, S_OTHER, 0)));
    S_PROBE ("getpriority_other", false, s_errno (syscall (SYS_getpriority, S_PRIO_PROCESS, S_OTHER)));
    S_PROBE ("sched_setaffinity_other", (relax & SANDBOX_RELAX_OWN_AFFINITY) && !(relax & SANDBOX_SECCOMP_PINNED),
             s_errno (syscall (SYS_sched_setaffinity, S_OTHER, sizeof cpus, &cpus)));
    S_PROBE ("sched_setaffinity_self", !(relax & SANDBOX_SECCOMP_PINNED),
             s_errno (syscall (SYS_sched_setaffinity, 0, sizeof cpus, &cpus)));
    S_PROBE ("sched_setattr", false, s_errno (syscall (SYS_sched_setattr, 0, NULL, 0)));
    S_PROBE ("sched_setscheduler", false, s_errno (syscall (SYS_sched_setscheduler, 0, 0, NULL)));
    S_PROBE ("sched_setparam", false, s_errno (syscall (SYS_sched_setparam, 0, NULL)));
    S_PROBE ("ioprio_set_other", false, s_errno (syscall (SYS_ioprio_set, S_IOPRIO_WHO_PROCESS, S_OTHER, 0)));
    S_PROBE ("migrate_pages_other", false, s_errno (syscall (SYS_migrate_pages, S_OTHER, 0, NULL, NULL)));
    S_PROBE ("move_pages_other", false, s_errno (syscall (SYS_move_pages, S_OTHER, 0, NULL, NULL, NULL, 0)));
    S_PROBE ("mount", false, s_errno (syscall (SYS_mount, "none", none, "tmpfs", 0, NULL)));
    S_PROBE ("umount2", false, s_errno (syscall (SYS_umount2, none, 0)));
    S_PROBE ("pivot_root", false, s_errno (syscall (SYS_pivot_root, none, none)));
    S_PROBE ("chroot", false, s_errno (syscall (SYS_chroot, none)));
    S_PROBE ("open_tree", false, s_errno (syscall (SYS_open_tree, -1, none, 0)));
    S_PROBE ("fsopen", false, s_errno (syscall (SYS_fsopen, "kgym-none", 0)));
    S_PROBE ("unshare", false, s_errno (syscall (SYS_unshare, 0)));
    S_PROBE ("setns", false, s_errno (syscall (SYS_setns, -1, 0)));
    S_PROBE ("clone_newuser", false, s_spawn_errno (syscall (SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, NULL, NULL, 0)));
    S_PROBE ("clone3", false, s_errno (syscall (SYS_clone3, NULL, 0)));
    S_PROBE ("setsid", false, s_errno (syscall (SYS_setsid)));
    S_PROBE ("setpgid", false, s_setpgid_errno (procs));
    S_PROBE ("shmget", false, s_errno (syscall (SYS_shmget, 0, 0, 0)));
    S_PROBE ("msgget", false, s_errno (syscall (SYS_msgget, 1, 0)));
    S_PROBE ("semget", false, s_errno (syscall (SYS_semget, 1, 0, 0)));
    S_PROBE ("mq_open", false, s_errno (syscall (SYS_mq_open, "", 0, 0, NULL)));
    S_PROBE ("bpf", false, s_errno (syscall (SYS_bpf, -1, NULL, 0)));
    S_PROBE ("keyctl", false, s_errno (syscall (SYS_keyctl, -1, 0, 0, 0, 0)));
    S_PROBE ("add_key", false, s_errno (syscall (SYS_add_key, "user", NULL, NULL, 0, 0)));
    S_PROBE ("perf_event_open", false, s_errno (syscall (SYS_perf_event_open, NULL, 0, -1, -1, 0)));
    S_PROBE ("userfaultfd", false, s_errno (syscall (SYS_userfaultfd, ~0)));
    S_PROBE ("io_uring_setup", false, s_errno (syscall (SYS_io_uring_setup, 0, NULL)));
    S_PROBE ("init_module", false, s_errno (syscall (SYS_init_module, NULL, 0, "")));
    S_PROBE ("kexec_load", false, s_errno (syscall (SYS_kexec_load, 0, 0, NULL, ~0ul)));
    S_PROBE ("reboot", false, s_errno (syscall (SYS_reboot, 0, 0, 0, NULL)));
    S_PROBE ("swapon", false, s_errno (syscall (SYS_swapon, none, 0)));
    S_PROBE ("acct", false, s_errno (syscall (SYS_acct, none)));
    S_PROBE ("sethostname", false, s_errno (syscall (SYS_sethostname, NULL, (size_t) -1)));
    S_PROBE ("clock_settime", false, s_errno (syscall (SYS_clock_settime, -1, NULL)));
    S_PROBE ("syslog", false, s_errno (syscall (SYS_syslog, 999, NULL, 0)));
    S_PROBE ("iopl", false, s_errno (syscall (SYS_iopl, 99)));
    S_PROBE ("open_by_handle_at", false, s_errno (syscall (SYS_open_by_handle_at, -1, NULL, 0)));
    S_PROBE ("fanotify_init", false, s_errno (syscall (SYS_fanotify_init, ~0u, 0)));
    S_PROBE ("memfd_secret", false, s_errno (syscall (SYS_memfd_secret, ~0u)));
    S_PROBE ("personality_set", false, s_errno (syscall (SYS_personality, 0)));
    S_PROBE ("prctl_set_dumpable", false, s_errno (syscall (SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0)));
    S_PROBE ("prctl_set_ptracer", false, s_errno (syscall (SYS_prctl, PR_SET_PTRACER, 0, 0, 0, 0)));
    S_PROBE ("prctl_set_mm", false, s_errno (syscall (SYS_prctl, PR_SET_MM, ~0ul, 0, 0, 0)));
    S_PROBE ("mknod", false, s_errno (syscall (SYS_mknod, none, 0, 0)));
    S_PROBE ("chown", false, s_errno (syscall (SYS_chown, none, 0, 0)));
    S_PROBE ("fchown", false, s_errno (syscall (SYS_fchown, -1, 0, 0)));
    S_PROBE ("setxattr", false, s_errno (syscall (SYS_setxattr, none, "user.kgym", "", 0, 0)));
    S_PROBE ("removexattr", false, s_errno (syscall (SYS_removexattr, none, "user.kgym")));
    //  Processes (the child of an allowed fork leaves at once).
    S_PROBE ("fork", procs, s_spawn_errno (syscall (SYS_fork)));
    S_PROBE ("clone_process", procs, s_spawn_errno (syscall (SYS_clone, SIGCHLD, 0, NULL, NULL, 0)));
    S_PROBE ("execve", procs, s_errno (syscall (SYS_execve, none, NULL, NULL)));
    S_PROBE ("execveat", procs, s_errno (syscall (SYS_execveat, -1, none, NULL, NULL, 0)));
    //  Files.
    S_PROBE ("open_write", files, s_errno (syscall (SYS_open, none, O_WRONLY | O_CREAT, 0600)));
    S_PROBE ("openat_write", files, s_errno (syscall (SYS_openat, AT_FDCWD, none, O_RDWR, 0)));
    S_PROBE ("openat_append", files, s_errno (syscall (SYS_openat, AT_FDCWD, none, O_APPEND, 0)));
    S_PROBE ("openat2", files, s_errno (syscall (SYS_openat2, AT_FDCWD, none, NULL, 0)));
    S_PROBE ("creat", files, s_errno (syscall (SYS_creat, none, 0600)));
    S_PROBE ("mkdir", files, s_errno (syscall (SYS_mkdir, none, 0700)));
    S_PROBE ("rmdir", files, s_errno (syscall (SYS_rmdir, none)));
    S_PROBE ("unlink", files, s_errno (syscall (SYS_unlink, none)));
    S_PROBE ("rename", files, s_errno (syscall (SYS_rename, none, none)));
    S_PROBE ("link", files, s_errno (syscall (SYS_link, none, none)));
    S_PROBE ("symlink", files, s_errno (syscall (SYS_symlink, none, none)));
    S_PROBE ("chmod", files, s_errno (syscall (SYS_chmod, none, 0)));
    S_PROBE ("fchmodat2", files, s_errno (syscall (SYS_fchmodat2, -1, none, 0, 0)));
    S_PROBE ("truncate", files, s_errno (syscall (SYS_truncate, none, 0)));
    S_PROBE ("ftruncate", files, s_errno (syscall (SYS_ftruncate, -1, 0)));
    S_PROBE ("fallocate", files, s_errno (syscall (SYS_fallocate, -1, 0, 0, 0)));
    S_PROBE ("utimensat", files, s_errno (syscall (SYS_utimensat, -1, none, NULL, 0)));
#undef S_PROBE
    fputs ("}\n", out);
    fclose (out);
    for (size_t done = 0; text && done < len; ) {
        ssize_t n = write (fd, text + done, len - done);
        if (n <= 0 && errno != EINTR)
            break;
        done += n > 0? (size_t) n: 0;
    }
    free (text);
}
