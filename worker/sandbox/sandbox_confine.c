/*  sandbox_confine - a runner confines itself before untrusted code loads.

    See sandbox_confine.h for the order of steps and what each enforces.
*/
#include "common_util.h"
#include "sandbox_confine.h"
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/landlock.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define NOBODY 65534


//  Write text to a file (cgroup and /proc knobs). 0 or -1 (errno kept).
static int
s_write_file (const char *path, const char *text)
{
    int fd = open (path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen (text);
    ssize_t n = write (fd, text, len);
    int saved = errno;
    close (fd);
    errno = saved;
    return n == (ssize_t) len? 0: -1;
}

//  Read a small file into buf (NUL-terminated). Bytes read or -1.
static ssize_t
s_read_file (const char *path, char *buf, size_t size)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read (fd, buf, size - 1);
    close (fd);
    if (n < 0)
        return -1;
    buf [n] = 0;
    return n;
}

//  Append printf text to a JSON object being built in caps.
static void
s_caps_add (char *caps, size_t capslen, const char *fmt, ...)
{
    size_t used = strlen (caps);
    if (used + 2 >= capslen)
        return;
    va_list args;
    va_start (args, fmt);
    vsnprintf (caps + used, capslen - used, fmt, args);
    va_end (args);
}

static int
s_join_cgroups (const sandbox_confine_opts_t *opts, char *caps, size_t capslen,
                char *err, size_t errlen)
{
    if (!opts->cgroups [0])
        return 0;
    char pid [32];
    snprintf (pid, sizeof pid, "%d\n", (int) getpid ());
    uint64_t memory_max = 0, pids_max = 0;
    bool v2 = false;
    for (size_t i = 0; i < SANDBOX_CONFINE_MAX_CGROUPS && opts->cgroups [i]; i++) {
        char path [SANDBOX_CONFINE_PATH + 32];
        snprintf (path, sizeof path, "%s/cgroup.procs", opts->cgroups [i]);
        if (s_write_file (path, pid)) {
            common_seterr (err, errlen, "cannot join cgroup %s: %s", opts->cgroups [i], strerror (errno));
            return -1;
        }
        //  Report the limits in force from the files themselves.
        char buf [64];
        snprintf (path, sizeof path, "%s/memory.max", opts->cgroups [i]);
        if (s_read_file (path, buf, sizeof buf) > 0) {
            v2 = true;
            memory_max = strtoull (buf, NULL, 10);
        }
        snprintf (path, sizeof path, "%s/memory.limit_in_bytes", opts->cgroups [i]);
        if (s_read_file (path, buf, sizeof buf) > 0)
            memory_max = strtoull (buf, NULL, 10);
        snprintf (path, sizeof path, "%s/pids.max", opts->cgroups [i]);
        if (s_read_file (path, buf, sizeof buf) > 0)
            pids_max = strtoull (buf, NULL, 10);
    }
    s_caps_add (caps, capslen, "\"cgroup\":\"%s\",\"memory_max\":%llu,\"pids_max\":%llu,",
                v2? "v2": "v1", (unsigned long long) memory_max, (unsigned long long) pids_max);
    return 0;
}

//  New network namespace; unprivileged via a user namespace that maps our ids.
static int
s_netns (bool *in_userns)
{
    *in_userns = false;
    if (geteuid () == 0 && unshare (CLONE_NEWNET) == 0)
        return 0;
    uid_t uid = geteuid ();
    gid_t gid = getegid ();
    if (unshare (CLONE_NEWUSER | CLONE_NEWNET))
        return -1;
    *in_userns = true;
    char map [64];
    snprintf (map, sizeof map, "%u %u 1\n", (unsigned) uid, (unsigned) uid);
    if (s_write_file ("/proc/self/uid_map", map))
        return -1;
    s_write_file ("/proc/self/setgroups", "deny\n");
    snprintf (map, sizeof map, "%u %u 1\n", (unsigned) gid, (unsigned) gid);
    if (s_write_file ("/proc/self/gid_map", map))
        return -1;
    return 0;
}

static int
s_rlimit (int resource, uint64_t value)
{
    struct rlimit rl = { (rlim_t) value, (rlim_t) value };
    return setrlimit (resource, &rl);
}

//  Landlock (Linux 5.13+): the process may afterwards only read below
//  read[] and read/write below write[]. Returns 0, or -1 when unsupported.
static int
s_landlock (const char *const *read_paths, const char *const *write_paths)
{
#ifdef SYS_landlock_create_ruleset
    int abi = (int) syscall (SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 1)
        return -1;
    uint64_t read_access = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE
                         | LANDLOCK_ACCESS_FS_READ_DIR;
    uint64_t all = read_access | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR
                 | LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR
                 | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG
                 | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO
                 | LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
#ifdef LANDLOCK_ACCESS_FS_REFER
    if (abi >= 2)
        all |= LANDLOCK_ACCESS_FS_REFER;
#endif
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
    if (abi >= 3)
        all |= LANDLOCK_ACCESS_FS_TRUNCATE;
#endif
    struct landlock_ruleset_attr attr = { .handled_access_fs = all };
    int ruleset = (int) syscall (SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (ruleset < 0)
        return -1;
    for (int pass = 0; pass < 2; pass++) {
        const char *const *paths = pass? write_paths: read_paths;
        for (size_t i = 0; i < SANDBOX_CONFINE_MAX_PATHS && paths [i]; i++) {
            int fd = open (paths [i], O_PATH | O_CLOEXEC);
            if (fd < 0)
                continue;           //  a missing tree simply stays unreachable
            struct stat st;
            uint64_t access = pass? all: read_access;
            //  Rules on a file may only name file rights.
            if (fstat (fd, &st) == 0 && !S_ISDIR (st.st_mode))
                access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE
                        | LANDLOCK_ACCESS_FS_WRITE_FILE
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
                        | (abi >= 3? LANDLOCK_ACCESS_FS_TRUNCATE: 0)
#endif
                        ;
            struct landlock_path_beneath_attr rule = { .allowed_access = access, .parent_fd = fd };
            int rc = (int) syscall (SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
            close (fd);
            if (rc) {
                close (ruleset);
                return -1;
            }
        }
    }
    //  restrict_self needs no_new_privs (or CAP_SYS_ADMIN): set it here already.
    prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    int rc = (int) syscall (SYS_landlock_restrict_self, ruleset, 0);
    close (ruleset);
    return rc? -1: 0;
#else
    (void) read_paths; (void) write_paths;
    return -1;
#endif
}

static int
s_drop_to_nobody (void)
{
    if (setgroups (0, NULL))
        return -1;
    if (setresgid (NOBODY, NOBODY, NOBODY))
        return -1;
    if (setresuid (NOBODY, NOBODY, NOBODY))
        return -1;
    //  Make sure there is no way back.
    if (setuid (0) == 0)
        return -1;
    return 0;
}

#define RULE(action, name, ...) \
    (seccomp_rule_add (ctx, action, SCMP_SYS (name), __VA_ARGS__) == 0 || s_missing_syscall (#name))

//  A syscall this libseccomp/arch does not know is no hole: nothing can call it.
static bool
s_missing_syscall (const char *name)
{
    return seccomp_syscall_resolve_name (name) == __NR_SCMP_ERROR;
}

static int
s_seccomp (unsigned allow, char *err, size_t errlen)
{
    scmp_filter_ctx ctx = seccomp_init (SCMP_ACT_ALLOW);
    if (!ctx) {
        common_seterr (err, errlen, "seccomp_init failed");
        return -1;
    }
    //  Threads CUDA or NVRTC may already have started get the filter too.
    seccomp_attr_set (ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    uint32_t eperm = SCMP_ACT_ERRNO (EPERM);
    bool ok = true;
    ok &= RULE (SCMP_ACT_ERRNO (EAFNOSUPPORT), socket, 1, SCMP_A0 (SCMP_CMP_NE, AF_UNIX));
    ok &= RULE (SCMP_ACT_ERRNO (EAFNOSUPPORT), socketpair, 1, SCMP_A0 (SCMP_CMP_NE, AF_UNIX));
    static const char *denied [] = {
        "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root",
        "unshare", "setns", "bpf", "keyctl", "add_key", "request_key", "kexec_load",
        "kexec_file_load", "init_module", "finit_module", "delete_module", "io_uring_setup",
        "io_uring_enter", "io_uring_register", "userfaultfd", "open_by_handle_at",
        "name_to_handle_at", "fsopen", "fsmount", "fspick", "move_mount", "open_tree",
        "swapon", "swapoff", "reboot", "settimeofday", "clock_settime", "acct", "quotactl",
        "lookup_dcookie", "vhangup", "syslog", NULL
    };
    for (size_t i = 0; denied [i]; i++) {
        int nr = seccomp_syscall_resolve_name (denied [i]);
        if (nr != __NR_SCMP_ERROR && seccomp_rule_add (ctx, eperm, nr, 0))
            ok = false;
    }
    if (!(allow & SANDBOX_CONFINE_ALLOW_PERF))
        ok &= RULE (eperm, perf_event_open, 0);
    if (!(allow & SANDBOX_CONFINE_ALLOW_EXEC)) {
        ok &= RULE (eperm, execve, 0);
        ok &= RULE (eperm, execveat, 0);
    }
    if (!(allow & SANDBOX_CONFINE_ALLOW_FORK)) {
        ok &= RULE (eperm, fork, 0);
        ok &= RULE (eperm, vfork, 0);
        ok &= RULE (eperm, clone, 1, SCMP_A0 (SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
        //  clone3 passes its flags in memory seccomp cannot read: ENOSYS
        //  makes glibc (pthread_create) fall back to clone.
        ok &= RULE (SCMP_ACT_ERRNO (ENOSYS), clone3, 0);
    }
    if (allow & SANDBOX_CONFINE_DENY_WRITE) {
        uint64_t wr = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
        ok &= RULE (eperm, open, 1, SCMP_A1 (SCMP_CMP_MASKED_EQ, wr, O_WRONLY));
        ok &= RULE (eperm, open, 1, SCMP_A1 (SCMP_CMP_MASKED_EQ, O_RDWR, O_RDWR));
        ok &= RULE (eperm, open, 1, SCMP_A1 (SCMP_CMP_MASKED_EQ, O_CREAT, O_CREAT));
        ok &= RULE (eperm, open, 1, SCMP_A1 (SCMP_CMP_MASKED_EQ, O_TRUNC, O_TRUNC));
        ok &= RULE (eperm, openat, 1, SCMP_A2 (SCMP_CMP_MASKED_EQ, O_WRONLY, O_WRONLY));
        ok &= RULE (eperm, openat, 1, SCMP_A2 (SCMP_CMP_MASKED_EQ, O_RDWR, O_RDWR));
        ok &= RULE (eperm, openat, 1, SCMP_A2 (SCMP_CMP_MASKED_EQ, O_CREAT, O_CREAT));
        ok &= RULE (eperm, openat, 1, SCMP_A2 (SCMP_CMP_MASKED_EQ, O_TRUNC, O_TRUNC));
        //  openat2 hides its flags in memory.
        ok &= RULE (SCMP_ACT_ERRNO (ENOSYS), openat2, 0);
        static const char *fs_changes [] = {
            "creat", "mkdir", "mkdirat", "unlink", "unlinkat", "rename", "renameat",
            "renameat2", "link", "linkat", "symlink", "symlinkat", "truncate", "chmod",
            "fchmodat", "chown", "fchownat", "lchown", "mknod", "mknodat", NULL
        };
        for (size_t i = 0; fs_changes [i]; i++) {
            int nr = seccomp_syscall_resolve_name (fs_changes [i]);
            if (nr != __NR_SCMP_ERROR && seccomp_rule_add (ctx, eperm, nr, 0))
                ok = false;
        }
    }
    if (!ok) {
        seccomp_release (ctx);
        common_seterr (err, errlen, "seccomp rule could not be added");
        return -1;
    }
    int rc = seccomp_load (ctx);
    seccomp_release (ctx);
    if (rc) {
        common_seterr (err, errlen, "seccomp_load: %s", strerror (-rc));
        return -1;
    }
    return 0;
}

int
sandbox_confine (const sandbox_confine_opts_t *opts, char *caps, size_t capslen,
                char *err, size_t errlen)
{
    if (!caps || capslen < 64) {
        common_seterr (err, errlen, "caps buffer too small");
        return -1;
    }
    snprintf (caps, capslen, "{");
    if (s_join_cgroups (opts, caps, capslen, err, errlen))
        return -1;
    bool was_root = geteuid () == 0;

    bool netns = false, userns = false;
    if (opts->netns) {
        netns = s_netns (&userns) == 0;
        if (!netns && opts->strict) {
            common_seterr (err, errlen, "cannot create a network namespace: %s", strerror (errno));
            return -1;
        }
    }
    s_caps_add (caps, capslen, "\"netns\":%s,", netns? "true": "false");

    //  rlimits: a failure here is a bug or a hostile parent: always fatal.
    //  No core files, ever (they would hold device data mapped in the process).
    if (s_rlimit (RLIMIT_CORE, 0)) {
        common_seterr (err, errlen, "setrlimit core: %s", strerror (errno));
        return -1;
    }
    struct { int resource; uint64_t value; const char *name; } limits [] = {
        { RLIMIT_AS,     opts->rlimit_as,     "rlimit_as" },
        { RLIMIT_CPU,    opts->rlimit_cpu,    "rlimit_cpu" },
        { RLIMIT_FSIZE,  opts->rlimit_fsize,  "rlimit_fsize" },
        { RLIMIT_NOFILE, opts->rlimit_nofile, "nofile" },
        { RLIMIT_NPROC,  opts->rlimit_nproc,  "nproc" },
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits [0]; i++) {
        if (limits [i].value == 0)
            continue;
        if (s_rlimit (limits [i].resource, limits [i].value)) {
            common_seterr (err, errlen, "setrlimit %s: %s", limits [i].name, strerror (errno));
            return -1;
        }
        s_caps_add (caps, capslen, "\"%s\":%llu,", limits [i].name,
                    (unsigned long long) limits [i].value);
    }

    bool landlock = false;
    if (opts->landlock_read [0] || opts->landlock_write [0]) {
        landlock = s_landlock (opts->landlock_read, opts->landlock_write) == 0;
        if (!landlock && opts->strict) {
            common_seterr (err, errlen, "Landlock is not available");
            return -1;
        }
    }

    const char *user = userns? "userns": was_root? "root": "user";
    if (opts->drop_to_nobody && geteuid () == 0) {
        if (s_drop_to_nobody ()) {
            if (opts->strict) {
                common_seterr (err, errlen, "cannot drop to nobody: %s", strerror (errno));
                return -1;
            }
        }
        else
            user = userns? "userns-nobody": "nobody";
    }
    s_caps_add (caps, capslen, "\"user\":\"%s\",", user);

    if (opts->pdeathsig) {
        pid_t parent = getppid ();
        if (prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)) {
            common_seterr (err, errlen, "PR_SET_PDEATHSIG: %s", strerror (errno));
            return -1;
        }
        //  The parent may have died before the call took effect.
        if (getppid () != parent || parent == 1) {
            common_seterr (err, errlen, "parent is gone");
            return -1;
        }
    }
    if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
        common_seterr (err, errlen, "PR_SET_NO_NEW_PRIVS: %s", strerror (errno));
        return -1;
    }
    if (prctl (PR_SET_DUMPABLE, 0, 0, 0, 0)) {
        common_seterr (err, errlen, "PR_SET_DUMPABLE: %s", strerror (errno));
        return -1;
    }
    s_caps_add (caps, capslen, "\"no_new_privs\":true,\"dumpable\":false,\"landlock\":%s,",
                landlock? "true": "false");
    if (opts->seccomp) {
        if (s_seccomp (opts->seccomp_allow, err, errlen))
            return -1;
        s_caps_add (caps, capslen, "\"seccomp\":true,\"exec\":%s,\"fork\":%s,\"perf\":%s,\"write\":%s}",
                    opts->seccomp_allow & SANDBOX_CONFINE_ALLOW_EXEC? "true": "false",
                    opts->seccomp_allow & SANDBOX_CONFINE_ALLOW_FORK? "true": "false",
                    opts->seccomp_allow & SANDBOX_CONFINE_ALLOW_PERF? "true": "false",
                    opts->seccomp_allow & SANDBOX_CONFINE_DENY_WRITE? "false": "true");
    }
    else
        s_caps_add (caps, capslen, "\"seccomp\":false}");
    return 0;
}

//  --- supervisor side ---

static int
s_mkdir (const char *path)
{
    if (mkdir (path, 0755) == 0 || errno == EEXIST)
        return 0;
    return -1;
}

//  Is /sys/fs/cgroup a cgroup v2 mount with the memory controller?
static bool
s_v2_available (void)
{
    char buf [256];
    return s_read_file ("/sys/fs/cgroup/cgroup.controllers", buf, sizeof buf) > 0
        && strstr (buf, "memory") != NULL;
}

int
sandbox_confine_cgroup_new (const char *name, uint64_t memory_max, uint32_t pids_max,
                           sandbox_confine_cgroup_t *cg, char *err, size_t errlen)
{
    memset (cg, 0, sizeof *cg);
    if (!name || !*name || strchr (name, '/') || strlen (name) > 64) {
        common_seterr (err, errlen, "bad cgroup name");
        return -1;
    }
    char value [32];
    if (s_v2_available ()) {
        const char *root = "/sys/fs/cgroup/kgym";
        char path [SANDBOX_CONFINE_PATH + 64];
        if (s_mkdir (root)) {
            common_seterr (err, errlen, "mkdir %s: %s", root, strerror (errno));
            return -1;
        }
        snprintf (path, sizeof path, "%s/cgroup.subtree_control", root);
        //  EBUSY: processes live in root's parent leaf; then there is nothing to do.
        if (s_write_file (path, "+memory +pids")) {
            common_seterr (err, errlen, "enabling memory+pids under %s: %s", root, strerror (errno));
            return -1;
        }
        snprintf (cg->dirs [0], sizeof cg->dirs [0], "%s/%s", root, name);
        if (s_mkdir (cg->dirs [0])) {
            common_seterr (err, errlen, "mkdir %s: %s", cg->dirs [0], strerror (errno));
            return -1;
        }
        cg->ndirs = 1;
        cg->version = 2;
        if (memory_max) {
            snprintf (path, sizeof path, "%s/memory.max", cg->dirs [0]);
            snprintf (value, sizeof value, "%llu", (unsigned long long) memory_max);
            if (s_write_file (path, value) == 0)
                cg->memory_max = memory_max;
            snprintf (path, sizeof path, "%s/memory.swap.max", cg->dirs [0]);
            s_write_file (path, "0");
        }
        if (pids_max) {
            snprintf (path, sizeof path, "%s/pids.max", cg->dirs [0]);
            snprintf (value, sizeof value, "%u", pids_max);
            if (s_write_file (path, value) == 0)
                cg->pids_max = pids_max;
        }
        if (!cg->memory_max && memory_max) {
            common_seterr (err, errlen, "cannot set memory.max in %s", cg->dirs [0]);
            sandbox_confine_cgroup_remove (cg);
            return -1;
        }
        return 0;
    }
    //  cgroup v1: one directory per controller hierarchy.
    static const char *controllers [] = { "memory", "pids" };
    for (size_t i = 0; i < 2; i++) {
        char root [SANDBOX_CONFINE_PATH];
        snprintf (root, sizeof root, "/sys/fs/cgroup/%s/kgym", controllers [i]);
        char *dir = cg->dirs [cg->ndirs];
        snprintf (dir, SANDBOX_CONFINE_PATH, "%s/%s", root, name);
        if (s_mkdir (root) || s_mkdir (dir))
            continue;
        char path [SANDBOX_CONFINE_PATH + 64];
        if (i == 0 && memory_max) {
            snprintf (path, sizeof path, "%s/memory.limit_in_bytes", dir);
            snprintf (value, sizeof value, "%llu", (unsigned long long) memory_max);
            if (s_write_file (path, value))
                continue;
            cg->memory_max = memory_max;
            snprintf (path, sizeof path, "%s/memory.memsw.limit_in_bytes", dir);
            s_write_file (path, value);
        }
        if (i == 1 && pids_max) {
            snprintf (path, sizeof path, "%s/pids.max", dir);
            snprintf (value, sizeof value, "%u", pids_max);
            if (s_write_file (path, value))
                continue;
            cg->pids_max = pids_max;
        }
        cg->ndirs++;
    }
    if (cg->ndirs == 0) {
        common_seterr (err, errlen, "no cgroup v2 with memory, and no v1 memory/pids hierarchy");
        return -1;
    }
    cg->version = 1;
    return 0;
}

void
sandbox_confine_cgroup_kill (const sandbox_confine_cgroup_t *cg)
{
    for (size_t i = 0; i < cg->ndirs; i++) {
        char path [SANDBOX_CONFINE_PATH + 32];
        snprintf (path, sizeof path, "%s/cgroup.kill", cg->dirs [i]);
        if (s_write_file (path, "1") == 0)
            continue;
        snprintf (path, sizeof path, "%s/cgroup.procs", cg->dirs [i]);
        char buf [4096];
        if (s_read_file (path, buf, sizeof buf) <= 0)
            continue;
        char *save = NULL;
        for (char *tok = strtok_r (buf, "\n", &save); tok; tok = strtok_r (NULL, "\n", &save)) {
            long pid = strtol (tok, NULL, 10);
            if (pid > 1)
                kill ((pid_t) pid, SIGKILL);
        }
    }
}

bool
sandbox_confine_cgroup_oom (const sandbox_confine_cgroup_t *cg)
{
    for (size_t i = 0; i < cg->ndirs; i++) {
        char path [SANDBOX_CONFINE_PATH + 32], buf [1024];
        snprintf (path, sizeof path, "%s/memory.events", cg->dirs [i]);
        if (s_read_file (path, buf, sizeof buf) > 0) {
            const char *p = strstr (buf, "oom_kill ");
            if (p && strtoull (p + 9, NULL, 10) > 0)
                return true;
        }
        snprintf (path, sizeof path, "%s/memory.oom_control", cg->dirs [i]);
        if (s_read_file (path, buf, sizeof buf) > 0) {
            const char *p = strstr (buf, "oom_kill ");
            if (p && strtoull (p + 9, NULL, 10) > 0)
                return true;
        }
    }
    return false;
}

void
sandbox_confine_cgroup_remove (sandbox_confine_cgroup_t *cg)
{
    sandbox_confine_cgroup_kill (cg);
    for (size_t i = 0; i < cg->ndirs; i++) {
        //  The killed processes leave asynchronously: retry briefly.
        for (int tries = 0; tries < 50; tries++) {
            if (rmdir (cg->dirs [i]) == 0 || errno == ENOENT)
                break;
            usleep (2000);
        }
    }
    cg->ndirs = 0;
    cg->version = 0;
}
