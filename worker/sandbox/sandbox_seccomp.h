/*  sandbox_seccomp - the one seccomp filter every runner installs.

    Default allow; the listed calls fail with an errno (EPERM) and a call of
    another ABI (x32, i386) kills the process. The deny list is the same for
    every kind; a kind relaxes it only by the SANDBOX_RELAX_* bits of its
    row in sandbox_kind.c, where each relaxation gives its reason.

    Denied for every kind:
      - sockets (AF_UNIX too unless relaxed; other families then answer
        EAFNOSUPPORT), System V and POSIX IPC objects
      - reaching into other processes: ptrace, process_vm_*, kcmp, pidfd_*,
        process_madvise, process_mrelease; signals to any process but
        itself; another process's limits, priority, scheduling, I/O priority,
        CPU affinity and memory placement (prlimit64, set/getpriority,
        sched_setaffinity, ioprio_set, migrate_pages, move_pages on others;
        sched_setattr, sched_setscheduler, sched_setparam always)
      - namespace and mount games: mount API, pivot_root, chroot, unshare,
        setns, clone with namespace flags
      - setsid, setpgid: nothing leaves the process group the supervisor
        stops and kills (with PROCESSES, setpgid succeeds and does nothing:
        build tools such as ninja put each child in a group of its own)
      - large or privileged kernel surface: bpf, keyrings, perf_event_open,
        userfaultfd, io_uring, modules, kexec, reboot, swap, acct, quotas,
        clocks, host and domain names, syslog, iopl/ioperm, file handles,
        fanotify, memfd_secret, personality changes, prctl PR_SET_DUMPABLE,
        PR_SET_PTRACER and PR_SET_MM, mknod, chown, extended attributes
      - unless PROCESSES: fork, vfork, clone without CLONE_THREAD, execve
        (clone3 answers ENOSYS: its flags are in memory; glibc falls back)
      - unless FILE_WRITES: opening for writing and every call that creates,
        removes, renames or changes a file (openat2 answers ENOSYS)
*/
#ifndef SANDBOX_SECCOMP_H
#define SANDBOX_SECCOMP_H

#include <stddef.h>

//  The errno a denied call gets in production.
#define SANDBOX_SECCOMP_ERRNO       1       //  EPERM
//  The errno the self-test build uses, so a refusal by the filter can be
//  told from the kernel's own EPERM.
#define SANDBOX_SECCOMP_TEST_ERRNO  4000

//  Or'ed into relax by a runner the supervisor pins to one CPU (a CPU
//  job's: sandbox_config_t.pinned). Not a relaxation but its opposite:
//  sched_setaffinity is refused to every thread, its own included, so a
//  candidate cannot move its threads to other CPUs (another job's, or more
//  cores than the reference has).
#define SANDBOX_SECCOMP_PINNED      0x100u

//  Install the filter on every thread (TSYNC) with relax (SANDBOX_RELAX_*)
//  and deny_errno. The caller must hold no_new_privs. 0, or -1 with why.
int sandbox_seccomp_load (unsigned relax, int deny_errno, char *err, size_t errlen);

//  Test-only, after sandbox_seccomp_load: attempt every call the filter can
//  deny, with arguments it denies and that are harmless when allowed, and
//  write one JSON object to fd: name -> errno (0 when it succeeded), or
//  null for a call the kind's relaxations allow (not attempted).
void sandbox_seccomp_selftest (unsigned relax, int fd);

#endif
