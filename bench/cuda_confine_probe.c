/*  cuda_confine_probe - which confinement step keeps cuInit from working (a GPU host).

    Each variant runs in a child of its own (no CUDA in this process): it
    applies one step of the sandbox (sandbox_kind's cuda row), then dlopens
    libcuda.so.1 and calls cuInit, and says what it returned. Run as root
    on the GPU host: bench/cuda_confine_probe
*/
#include "sandbox_seccomp.h"
#include "sandbox_kind.h"
#include <dlfcn.h>
#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*s_cuinit_t) (unsigned);

static int
s_cuinit (void)
{
    void *lib = dlopen ("libcuda.so.1", RTLD_NOW);
    if (!lib)
        return -1000;
    s_cuinit_t init = (s_cuinit_t) dlsym (lib, "cuInit");
    return init? init (0): -1001;
}

//  Deny only the named calls (EPERM), everything else allowed.
static int
s_deny (const char *const *names)
{
    scmp_filter_ctx ctx = seccomp_init (SCMP_ACT_ALLOW);
    for (int i = 0; names [i]; i++) {
        int nr = seccomp_syscall_resolve_name (names [i]);
        if (nr != __NR_SCMP_ERROR)
            seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), nr, 0);
    }
    prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    int rc = seccomp_load (ctx);
    seccomp_release (ctx);
    return rc;
}

static int
s_variant (int v)
{
    char err [256] = "";
    switch (v) {
        case 0: break;
        case 1:
            if (unshare (CLONE_NEWPID) != 0)
                return -2;
            {
                pid_t pid = fork ();
                if (pid == 0)
                    _exit (s_cuinit () & 0xff);
                int status = 0;
                waitpid (pid, &status, 0);
                return WIFEXITED (status)? WEXITSTATUS (status): -3;
            }
        case 2: if (unshare (CLONE_NEWIPC) != 0) return -2; break;
        case 3:
            if (setgroups (0, NULL) || setresgid (1879072183, 1879072183, 1879072183)
            ||  setresuid (1879072183, 1879072183, 1879072183))
                return -2;
            break;
        case 4:
            prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            if (sandbox_seccomp_load (sandbox_kind_info (SANDBOX_CUDA)->relax, EPERM, err, sizeof err))
                return -2;
            break;
        case 5: {
            const char *n [] = { "sched_setscheduler", "sched_setparam", "sched_setattr", NULL };
            if (s_deny (n))
                return -2;
            break;
        }
        case 6: {
            const char *n [] = { "shmget", "shmat", "shmctl", "msgget", "semget", "mq_open", NULL };
            if (s_deny (n))
                return -2;
            break;
        }
        case 7: {
            const char *n [] = { "personality", NULL };
            if (s_deny (n))
                return -2;
            break;
        }
        case 8: {
            const char *n [] = { "setpriority", "prlimit64", "ioprio_set", "sched_setaffinity", "migrate_pages", "move_pages", "mbind", NULL };
            if (s_deny (n))
                return -2;
            break;
        }
        case 9: {
            const char *n [] = { "prctl", NULL };
            if (s_deny (n))
                return -2;
            break;
        }
        case 10: {
            const char *n [] = { "kill", "tgkill", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal", "kcmp", NULL };
            if (s_deny (n))
                return -2;
            break;
        }
        case 11: {
            const char *n [] = { "mknod", "mknodat", "chown", "fchown", "lchown", "fchownat", "setxattr", "fsetxattr", "lsetxattr", NULL };
            if (s_deny (n))
                return -2;
            break;
        }
        case 12: { struct rlimit rl = { 32, 32 }; setrlimit (RLIMIT_NPROC, &rl); break; }
        default: return -99;
    }
    return s_cuinit ();
}

int
main (void)
{
    static const char *names [] = {
        "nothing", "pid namespace", "ipc namespace", "another uid", "the cuda kind's whole filter",
        "deny sched_set*", "deny SysV/POSIX IPC", "deny personality", "deny others' limits/affinity/mbind",
        "deny prctl", "deny signals/pidfd/kcmp", "deny mknod/chown/xattr", "RLIMIT_NPROC 32"
    };
    for (int v = 0; v < 13; v++) {
        fflush (stdout);
        pid_t pid = fork ();
        if (pid == 0)
            _exit (s_variant (v) & 0xff);
        int status = 0;
        waitpid (pid, &status, 0);
        printf ("%-40s cuInit -> %d%s\n", names [v], WIFEXITED (status)? WEXITSTATUS (status): -1,
                WIFSIGNALED (status)? " (killed)": "");
    }
    return 0;
}
