/*  sandbox_confine - a runner confines itself before untrusted input.

    See sandbox_confine.h for the steps and their order. Everything here
    runs in the runner, before anything untrusted: it may trust its command
    line (the supervisor wrote it) but checks it all the same.
*/
#include "common_util.h"
#include "sandbox_confine.h"
#include "sandbox_file.h"
#include "sandbox_root.h"
#include "sandbox_seccomp.h"
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define S_FD_MAX    65535           //  descriptors passed by number

//  ---------------------------------------------------------------------
//  Options

static int
s_parse_u64 (const char *text, uint64_t *value)
{
    if (!text || *text < '0' || *text > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull (text, &end, 10);
    if (errno || *end)
        return -1;
    *value = v;
    return 0;
}

static int
s_parse_fd (const char *text, int *fd)
{
    uint64_t v;
    if (s_parse_u64 (text, &v) || v < 3 || v > S_FD_MAX)
        return -1;
    *fd = (int) v;
    return 0;
}

int
sandbox_confine_parse (int argc, char **argv, sandbox_confine_args_t *args, char *err, size_t errlen)
{
    memset (args, 0, sizeof *args);
    int kind = -1;
    args->sync = args->object = -1;
    args->rlimit_as = args->rlimit_cpu = args->rlimit_fsize = SANDBOX_RLIMIT_LEAVE;
    args->rlimit_nofile = args->rlimit_nproc = SANDBOX_RLIMIT_LEAVE;
    size_t ncgroups = 0;
    int out = 1;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv [i];
        const char *val = i + 1 < argc? argv [i + 1]: NULL;
        if (strcmp (opt, "--") == 0) {
            while (i < argc)
                argv [out++] = argv [i++];
            break;
        }
        bool ok = true, takes = true;
        uint64_t u = 0;
        if (strcmp (opt, "--userns") == 0)
            args->userns = true, takes = false;
        else
        if (strcmp (opt, "--selftest") == 0)
            args->selftest = true, takes = false;
        else
        if (strcmp (opt, "--pinned") == 0)
            args->pinned = true, takes = false;
        else
        if (strcmp (opt, "--kind") == 0)
            ok = (kind = sandbox_kind_from_name (val)) >= 0;
        else
        if (strcmp (opt, "--sync") == 0)
            ok = s_parse_fd (val, &args->sync) == 0;
        else
        if (strcmp (opt, "--uid") == 0)
            ok = s_parse_u64 (val, &u) == 0 && u > 0 && u < 0xffffffffu && (args->uid = (uid_t) u);
        else
        if (strcmp (opt, "--cgroup") == 0)
            ok = val && *val == '/' && ncgroups < SANDBOX_CGROUP_DIRS && (args->cgroups [ncgroups++] = val);
        else
        if (strcmp (opt, "--object") == 0)
            ok = s_parse_fd (val, &args->object) == 0;
        else
        if (strcmp (opt, "--ro") == 0)
            ok = val && args->nro < SANDBOX_CONFINE_PATHS && (args->ro [args->nro++] = val);
        else
        if (strcmp (opt, "--rw") == 0)
            ok = val && !args->rw && (args->rw = val);
        else
        if (strcmp (opt, "--rw-at") == 0)
            ok = val && !args->rw_at && (args->rw_at = val);
        else
        if (strcmp (opt, "--keep") == 0)
            ok = args->nkeep < SANDBOX_CONFINE_KEEP && s_parse_fd (val, &args->keep [args->nkeep++]) == 0;
        else
        if (strcmp (opt, "--rlimit-as") == 0)
            ok = s_parse_u64 (val, &args->rlimit_as) == 0;
        else
        if (strcmp (opt, "--rlimit-cpu") == 0)
            ok = s_parse_u64 (val, &args->rlimit_cpu) == 0 && args->rlimit_cpu > 0;
        else
        if (strcmp (opt, "--rlimit-fsize") == 0)
            ok = s_parse_u64 (val, &args->rlimit_fsize) == 0;
        else
        if (strcmp (opt, "--rlimit-nofile") == 0)
            ok = s_parse_u64 (val, &args->rlimit_nofile) == 0 && args->rlimit_nofile > 3;
        else
        if (strcmp (opt, "--rlimit-nproc") == 0)
            ok = s_parse_u64 (val, &args->rlimit_nproc) == 0 && args->rlimit_nproc > 0;
        else {
            argv [out++] = argv [i];        //  the program's own
            continue;
        }
        if (!ok || (takes && !val)) {
            common_seterr (err, errlen, "bad sandbox option %s %.80s", opt, takes && val? val: "");
            return -1;
        }
        i += takes;
    }
    argv [out] = NULL;
    args->kind = (sandbox_kind_t) (kind < 0? 0: kind);
    if (kind < 0 || args->sync < 0) {
        common_seterr (err, errlen, "sandbox options need --kind and --sync");
        return -1;
    }
    if (args->uid && args->userns) {
        common_seterr (err, errlen, "--uid and --userns exclude each other");
        return -1;
    }
    return out;
}

//  ---------------------------------------------------------------------
//  Steps

static int
s_join_cgroups (const sandbox_confine_args_t *args, char *err, size_t errlen)
{
    for (int i = 0; i < SANDBOX_CGROUP_DIRS && args->cgroups [i]; i++) {
        char path [4200];
        snprintf (path, sizeof path, "%s/cgroup.procs", args->cgroups [i]);
        //  0 is "the writer": in its pid namespace the runner is pid 1.
        if (sandbox_file_write (path, "0") != 0) {
            common_seterr (err, errlen, "cannot join cgroup %s: %s", args->cgroups [i], strerror (errno));
            return -1;
        }
    }
    return 0;
}

static int
s_pdeathsig (char *err, size_t errlen)
{
    if (prctl (PR_SET_PDEATHSIG, SIGKILL) != 0) {
        common_seterr (err, errlen, "PR_SET_PDEATHSIG: %s", strerror (errno));
        return -1;
    }
    return 0;
}

//  The kernel ignores a signal a namespace's init sends itself while its
//  action is the default (abort() would end in SIGSEGV, raise(SIGTERM) do
//  nothing). The runner relays such a death as exit 128+N, which the
//  supervisor reads back as "killed by N". Faults the kernel forces keep
//  working either way; signals the program set up itself are untouched.
static void
s_relay (int sig)
{
    _exit (128 + sig);
}

static void
s_relay_signals (void)
{
    const int fatal [] = {
        SIGHUP, SIGINT, SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGUSR1, SIGSEGV,
        SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF,
        SIGIO, SIGPWR, SIGSYS
    };
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = s_relay;
    sigfillset (&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal [0] + (size_t) (SIGRTMAX - SIGRTMIN + 1); i++) {
        int sig = i < sizeof fatal / sizeof fatal [0]? fatal [i]
                : SIGRTMIN + (int) (i - sizeof fatal / sizeof fatal [0]);
        struct sigaction old;
        if (sigaction (sig, NULL, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO))
            sigaction (sig, &sa, NULL);
    }
}

//  Root: become the runner's own uid, no way back.
static int
s_switch_uid (uid_t uid, char *err, size_t errlen)
{
    uid_t r, e, s;
    if (setgroups (0, NULL) != 0 || setresgid (uid, uid, uid) != 0 || setresuid (uid, uid, uid) != 0
    ||  getresuid (&r, &e, &s) != 0 || r != uid || e != uid || s != uid || setuid (0) == 0) {
        common_seterr (err, errlen, "cannot become uid %u: %s", (unsigned) uid, strerror (errno));
        return -1;
    }
    return 0;
}

//  Root of a user namespace: every capability gone, and gone for good (no
//  regaining them as root through exec).
static int
s_drop_capabilities (char *err, size_t errlen)
{
    unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP
                       | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED
                       | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    bool ok = prctl (PR_SET_SECUREBITS, bits, 0, 0, 0) == 0;
    for (int cap = 0; ok && cap < 64 && prctl (PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
        ok = prctl (PR_CAPBSET_DROP, cap, 0, 0, 0) == 0;
    ok = ok && prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == 0;
    struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data [2];
    memset (data, 0, sizeof data);
    ok = ok && syscall (SYS_capset, &hdr, data) == 0 && syscall (SYS_capget, &hdr, data) == 0
       && !data [0].effective && !data [0].permitted && !data [1].effective && !data [1].permitted;
    if (!ok)
        common_seterr (err, errlen, "cannot drop capabilities: %s", strerror (errno));
    return ok? 0: -1;
}

static int
s_rlimits (const sandbox_confine_args_t *args, char *err, size_t errlen)
{
    const struct { int resource; uint64_t soft, hard; const char *name; } limits [] = {
        { RLIMIT_CORE,     0, 0, "core" },
        { RLIMIT_MSGQUEUE, 0, 0, "msgqueue" },
        { RLIMIT_AS,       args->rlimit_as, args->rlimit_as, "as" },
        //  SIGXCPU at the soft limit, SIGKILL a second later.
        { RLIMIT_CPU,      args->rlimit_cpu,
                           args->rlimit_cpu == SANDBOX_RLIMIT_LEAVE? args->rlimit_cpu: args->rlimit_cpu + 1, "cpu" },
        { RLIMIT_FSIZE,    args->rlimit_fsize, args->rlimit_fsize, "fsize" },
        { RLIMIT_NOFILE,   args->rlimit_nofile, args->rlimit_nofile, "nofile" },
        { RLIMIT_NPROC,    args->rlimit_nproc, args->rlimit_nproc, "nproc" },
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits [0]; i++) {
        if (limits [i].soft == SANDBOX_RLIMIT_LEAVE)
            continue;
        struct rlimit rl = { (rlim_t) limits [i].soft, (rlim_t) limits [i].hard };
        if (setrlimit (limits [i].resource, &rl) != 0) {
            common_seterr (err, errlen, "setrlimit %s: %s", limits [i].name, strerror (errno));
            return -1;
        }
    }
    return 0;
}

//  Close every descriptor but stdio, sync and the kept ones.
static int
s_close_fds (const sandbox_confine_args_t *args)
{
    int keep [SANDBOX_CONFINE_KEEP + 1];
    size_t n = 0;
    keep [n++] = args->sync;
    for (size_t i = 0; i < args->nkeep; i++)
        keep [n++] = args->keep [i];
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && keep [j] < keep [j - 1]; j--) {
            int t = keep [j]; keep [j] = keep [j - 1]; keep [j - 1] = t;
        }
    unsigned from = 3;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned) keep [i] > from && syscall (SYS_close_range, from, (unsigned) keep [i] - 1, 0) != 0)
            return -1;
        if ((unsigned) keep [i] + 1 > from)
            from = (unsigned) keep [i] + 1;
    }
    return (int) syscall (SYS_close_range, from, ~0u, 0);
}

//  Tell the supervisor (best effort: it may be gone).
static void
s_say (int sync, const char *text)
{
    size_t len = strlen (text);
    while (send (sync, text, len, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

static int
s_steps (const sandbox_confine_args_t *args, char *err, size_t errlen)
{
    const sandbox_kind_info_t *kind = sandbox_kind_info (args->kind);
    bool root = geteuid () == 0 && !args->userns;
    if (root && !args->uid) {
        common_seterr (err, errlen, "started as root without a uid to become");
        return -1;
    }
    if (s_join_cgroups (args, err, errlen)
    ||  (kind->pdeathsig && s_pdeathsig (err, errlen)))
        return -1;
    if (kind->in_process && getpid () == 1)
        s_relay_signals ();
    if (sandbox_root_enter (kind->root, args->ro, args->nro, args->rw, args->rw_at, args->object,
                            err, errlen))
        return -1;
    if (root? s_switch_uid (args->uid, err, errlen): s_drop_capabilities (err, errlen))
        return -1;
    if ((kind->pdeathsig && s_pdeathsig (err, errlen)) || s_rlimits (args, err, errlen))
        return -1;
    if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        common_seterr (err, errlen, "no_new_privs / dumpable: %s", strerror (errno));
        return -1;
    }
    if (s_close_fds (args) != 0) {
        common_seterr (err, errlen, "close_range: %s", strerror (errno));
        return -1;
    }
    return sandbox_seccomp_load (kind->relax | (args->pinned? SANDBOX_SECCOMP_PINNED: 0),
                                 args->selftest? SANDBOX_SECCOMP_TEST_ERRNO: SANDBOX_SECCOMP_ERRNO,
                                 err, errlen);
}

int
sandbox_confine (const sandbox_confine_args_t *args, char *err, size_t errlen)
{
    if (s_steps (args, err, errlen) != 0) {
        char line [600];
        snprintf (line, sizeof line, "error: %s\n", err);
        s_say (args->sync, line);
        return -1;
    }
    s_say (args->sync, "confined\n");
    char go = 0;
    ssize_t n;
    while ((n = read (args->sync, &go, 1)) < 0 && errno == EINTR)
        ;
    if (n != 1 || go != 'g') {
        common_seterr (err, errlen, "the supervisor did not confirm the confinement");
        return -1;
    }
    if (args->selftest) {
        sandbox_seccomp_selftest (sandbox_kind_info (args->kind)->relax
                                  | (args->pinned? SANDBOX_SECCOMP_PINNED: 0), args->sync);
        _exit (0);
    }
    close (args->sync);
    return 0;
}
