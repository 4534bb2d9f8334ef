/*  runner_proto - messages between the CPU worker and its kgym-runner child.

    The supervisor (cpu_runner.c) and the sandboxed runner (cpu_runner_main.c)
    talk over a SOCK_SEQPACKET socketpair, one fixed-size struct per message.
    Tensors live in one shared memory file (memfd) that both map; pointer args
    are byte offsets into it. The runner is our code, but once the candidate's
    shared object is loaded everything in the runner's process is the
    candidate's to corrupt: the supervisor trusts no reply field except as a
    hint, measures time itself and checks every output itself.

    Exchange:
        runner -> supervisor   runner_reply_t (status 0, message = caps text)  once, after sandboxing
        supervisor -> runner   runner_request_t op=RUN  -> runner_reply_t
        supervisor -> runner   runner_request_t op=PING -> runner_reply_t      (round-trip calibration)
        supervisor -> runner   runner_request_t op=EXIT (no reply)
    Each request carries a number the runner echoes in its reply; the
    supervisor drops any reply whose number is not the one it waits for.
*/
#ifndef CPU_RUNNER_PROTO_H
#define CPU_RUNNER_PROTO_H

#include <stdint.h>

#define RUNNER_MAX_ARGS     65      //  task args + workspace
#define RUNNER_MAX_LAUNCHES 64
#define RUNNER_MAX_SYMBOL   128

typedef enum { RUNNER_OP_RUN = 1, RUNNER_OP_PING = 2, RUNNER_OP_EXIT = 3 } runner_op_t;
typedef enum {
    RUNNER_ARG_PTR = 1,         //  a tensor in the shared memory, at offset
    RUNNER_ARG_SCALAR = 2,      //  a value
    RUNNER_ARG_WORKSPACE = 3    //  the runner's own scratch memory (workspace_bytes, zeroed each run)
} runner_arg_kind_t;

typedef enum {
    RUNNER_OK = 0,
    RUNNER_NO_SYMBOL = 1,       //  a kernel is not defined by the candidate's object
    RUNNER_BAD_REQUEST = 2,     //  offsets outside the shared memory, bad counts
    RUNNER_SHM_FAILED = 3,      //  could not map the shared memory
    RUNNER_SETUP_FAILED = 4     //  sandbox or dlopen failed (message says why)
} runner_status_t;

//  One argument of a call.
typedef struct {
    uint32_t kind;              //  runner_arg_kind_t
    uint32_t dtype;             //  common_dtype_t of a scalar
    uint64_t offset;            //  PTR: byte offset into the shared memory
    uint64_t bits;              //  SCALAR: value bits, little-endian in the low bytes of the dtype's size
} runner_arg_t;

//  One call of a kernel.
typedef struct {
    char kernel[RUNNER_MAX_SYMBOL]; //  symbol, NUL-terminated
    uint32_t nargs;                 //  entries in args
    uint32_t args[RUNNER_MAX_ARGS]; //  indices into runner_request_t.args
} runner_launch_t;

typedef struct {
    uint32_t op;                //  runner_op_t
    uint32_t nargs;             //  entries in args
    uint32_t nlaunches;         //  entries in launches
    uint32_t seq;               //  the request's number, echoed in its reply (READY is 0)
    uint64_t shm_size;          //  bytes of the shared memory to map (remapped when it changes)
    uint64_t workspace_bytes;   //  scratch the runner maps privately and zeroes before the call:
                                //  the supervisor never holds memory the candidate sizes
    runner_arg_t args[RUNNER_MAX_ARGS];
    runner_launch_t launches[RUNNER_MAX_LAUNCHES];
} runner_request_t;

typedef struct {
    uint32_t status;            //  runner_status_t
    uint32_t nlaunches;         //  entries in the per-launch figures
    uint64_t elapsed_ns;        //  runner's own clock around the launches (a hint only)
    char message[256];          //  reason, or the sandbox caps on the first reply
    uint64_t launch_wall_ns[RUNNER_MAX_LAUNCHES];   //  per launch: wall time (a hint only)
    uint64_t launch_cpu_ns[RUNNER_MAX_LAUNCHES];    //  per launch: process CPU time, all threads (a hint only)
    uint32_t seq;               //  the request's seq: a late reply (READY after a forged one,
    uint32_t reserved;          //  a stray from a leftover thread) is never taken for another's
} runner_reply_t;

#endif
