/*  cpu_runner - the supervisor's handle on one sandboxed kgym-runner.

    A runner holds one loaded shared object (the candidate's, the
    reference's or the baseline's) and runs its launches on tensors in
    shared memory on request. The supervisor measures every run's wall time
    itself, kills the whole process group (and cgroup) after a timeout, and
    after each completed run stops the runner's processes (SIGSTOP, waited
    for) until the next request, so nothing the kernel left running can
    change the outputs while they are being checked.
*/
#ifndef CPU_RUNNER_H
#define CPU_RUNNER_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include "cpu_runner_proto.h"
#include "sandbox.h"

typedef struct cpu_runner_t cpu_runner_t;

typedef enum {
    RUN_OK = 0,                 //  the launches returned
    RUN_TIMEOUT,                //  killed after the timeout
    RUN_CRASH,                  //  the runner died (signal or exit) during the run
    RUN_ERROR                   //  the runner refused (no such symbol, bad request); message says why
} cpu_run_status_t;

typedef struct {
    cpu_run_status_t status; //  what happened
    int signal;                 //  RUN_CRASH: terminating signal, 0 if it exited
    int exit_code;              //  RUN_CRASH: exit code when it exited
    uint64_t wall_ns;           //  supervisor-measured time: from waking the runner to its reply
    uint64_t cpu_ns;            //  the runner's CPU time over the call, every thread (its process
                                //  CPU clock, read here: trusted)
    bool over_cpu;              //  RUN_TIMEOUT: stopped for its CPU time (else for wall time)
    uint32_t threads;           //  RUN_OK: threads alive once it was stopped again (read here; 1 = none left)
    uint64_t runner_ns;         //  runner-reported time (untrusted hint)
    char message[256];          //  reason for anything but RUN_OK
    uint32_t runner_status;     //  RUN_ERROR: the runner's runner_status_t
    uint32_t nlaunches;         //  RUN_OK: entries in the per-launch figures
    uint64_t launch_wall_ns[RUNNER_MAX_LAUNCHES];   //  RUN_OK: per launch wall time (runner-reported hint)
    uint64_t launch_cpu_ns[RUNNER_MAX_LAUNCHES];    //  RUN_OK: per launch process CPU time (hint)
} cpu_run_outcome_t;

//  Start a runner that loads the shared object in so_fd (a memfd or file,
//  not closed here). NULL with a reason when the runner could not start
//  or could not load the object (err then begins with "load: ").
cpu_runner_t *cpu_runner_new (const sandbox_config_t *cfg, int so_fd,
                                    char *err, size_t errlen);

//  The two halves of new, so several runners can start at once: start
//  spawns (NULL with a reason when it could not); ready waits for the
//  runner to confine itself and load the object (-1 with a reason as new
//  gives it; the caller then destroys the runner).
cpu_runner_t *cpu_runner_start (const sandbox_config_t *cfg, int so_fd,
                                      char *err, size_t errlen);
int cpu_runner_ready (cpu_runner_t *self, char *err, size_t errlen);

//  Between the two: wait for the runner to confine itself and let the
//  sandbox check it from outside (sandbox_confirm), before the module is
//  loaded. -1 with a reason beginning "sandbox: " (the sandbox's failure,
//  not the module's; the runner is then dead). ready does it when the
//  caller has not.
int cpu_runner_confirm (cpu_runner_t *self, char *err, size_t errlen);

//  The supervisor's mapping of the shared memory, grown to at least size
//  bytes (contents undefined after growing). NULL on failure.
void *cpu_runner_shm (cpu_runner_t *self, size_t size);

//  Run req (op RUN; shm_size is set here) and wait up to timeout_s of wall
//  time and cpu_s of the runner's CPU time (0: no CPU limit), killing it past
//  either (RUN_TIMEOUT). Returns 0 with *out filled whatever happened; -1
//  only when the runner was already gone (out->message says why).
int cpu_runner_run (cpu_runner_t *self, runner_request_t *req, double timeout_s, double cpu_s,
                    cpu_run_outcome_t *out);

//  Round trip of an empty request.
int cpu_runner_ping (cpu_runner_t *self, double timeout_s, uint64_t *rtt_ns);

//  CPU time the runner process has used so far, every thread, dead ones
//  too (its process CPU clock, read from outside). 0 once it is gone.
uint64_t cpu_runner_cpu_ns (cpu_runner_t *self);

//  False once the runner has died or was killed.
bool cpu_runner_alive (cpu_runner_t *self);

//  Every thread of the runner on one CPU (sandbox_pin). 0 or -1.
int cpu_runner_pin (cpu_runner_t *self, int cpu);

//  Caps in force for this runner, JSON object text (borrowed): built by the
//  sandbox from what it set up and saw of the runner, never from the runner.
const char *cpu_runner_caps (cpu_runner_t *self);

//  The runner's sandbox (pid, process group, cgroup), borrowed (added).
sandbox_t *cpu_runner_sandbox (cpu_runner_t *self);

//  Kill the runner's whole process group and cgroup, reap, free.
void cpu_runner_destroy (cpu_runner_t **self_p);

#endif
