/*  fuzz_targets - the entry function of every fuzz target.

    Each function takes arbitrary bytes, feeds them to a decoder or parser
    the way a broker or worker would, checks the invariants that must hold
    for any input, and frees everything it made. The libFuzzer stubs
    (fuzz/fuzz_*.c, built with clang by -Dfuzz=enabled) call them, and so
    does tests/test_fuzz_regressions.c, which replays every saved crasher
    and seed with the ordinary gcc build. A broken invariant aborts, as a
    sanitizer would. docs/fuzzing.md says what each target covers.
*/
#ifndef FUZZ_TARGETS_H
#define FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

//  A msgpack document: the bounded reader (proto_mpr) token by token and
//  value by value, and proto_mpk_decode with the default and tight limits,
//  each decoded value re-encoded and decoded again.
int fuzz_one_mpk (const uint8_t *data, size_t size);

//  A protocol message as frames (layout in fuzz_targets.c), through
//  proto_msg_decode: the checks proto_msg_recv makes on what it read.
int fuzz_one_msg (const uint8_t *data, size_t size);

//  A job as JSON text: common_job_from_json, then common_task_layout of
//  every size for every program with a small and the default cap, then the
//  same job through msgpack (encode, decode, parse) with the same verdict.
int fuzz_one_job_json (const uint8_t *data, size_t size);

//  A job as a msgpack body, as a worker receives it: proto_mpk_decode, then
//  everything fuzz_one_job_json does with the decoded value.
int fuzz_one_job_mpk (const uint8_t *data, size_t size);

//  An expression: byte 0 picks a set of variable values, the rest is the
//  text. common_expr_eval against common_expr_check and against itself.
int fuzz_one_expr (const uint8_t *data, size_t size);

//  cache_key: a job body as the broker reads it (docs/fuzzing.md).
int fuzz_one_cache_key (const uint8_t *data, size_t size);

//  One target: its name (the folder under fuzz/corpus and fuzz/regressions)
//  and its entry function.
typedef struct {
    const char *name;                               //  "mpk", "job_json", ...
    int (*one) (const uint8_t *data, size_t size);  //  fuzz_one_*
} fuzz_target_t;

//  Every target, ended by { NULL, NULL }.
extern const fuzz_target_t fuzz_targets [];

//  Make runs repeatable (jansson's hash seed). Call once, before any input.
void fuzz_init (void);

#endif
