/*  common_compare - compare an output against the reference's.

    An element passes when |got - expected| <= atol + rtol * |expected| and
    neither is NaN (NaN never equals anything, so NaN-poisoned outputs that
    were never written fail). Infinities pass only when equal. Integers are
    compared as integers, exactly (the same rule without a round trip
    through double, which would let an i64 near 2^54 be off by one).
    common_compare_bits is the task's "exact" tolerance: equal bit for bit.
*/
#ifndef COMMON_COMPARE_H
#define COMMON_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common_dtype.h"

#define COMMON_COMPARE_KEEP 8   //  mismatches kept with their index

//  One element that failed.
typedef struct {
    size_t index;               //  flat element index
    double expected;            //  reference value
    double got;                 //  candidate value
} common_mismatch_t;

//  Outcome of one buffer comparison.
typedef struct {
    size_t count;               //  elements compared
    size_t bad;                 //  elements that failed
    double max_abs;             //  largest |got-expected| over finite pairs
    double max_rel;             //  largest |got-expected|/|expected| over finite pairs, expected != 0
    common_mismatch_t first[COMMON_COMPARE_KEEP];   //  first failures, by index
    size_t nfirst;              //  entries used in first[]
} common_compare_t;

//  Compare count elements; fills out. Never fails.
void common_compare (common_dtype_t dtype, const void *expected, const void *got, size_t count,
                     double atol, double rtol, common_compare_t *out);

//  Bit for bit: every element's bytes equal (NaN payloads and signed zeros
//  included). max_abs is filled as above; max_rel stays 0.
void common_compare_bits (common_dtype_t dtype, const void *expected, const void *got, size_t count,
                          common_compare_t *out);

//  How many elements of buf are NaN (0 for integers): a reference output
//  compared with itself fails exactly there.
size_t common_compare_nans (common_dtype_t dtype, const void *buf, size_t count);

//  The same passes, a large buffer split over up to threads threads (a
//  part is at least 1 Mi elements; 0 or 1: this thread only). The outcome
//  is the serial pass's, the first failures by index included. exact:
//  common_compare_bits' rule, else common_compare's.
void common_compare_threads (common_dtype_t dtype, const void *expected, const void *got, size_t count,
                             double atol, double rtol, bool exact, unsigned threads, common_compare_t *out);
size_t common_compare_nans_threads (common_dtype_t dtype, const void *buf, size_t count, unsigned threads);

#endif
