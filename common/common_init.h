/*  common_init - the init distributions of input tensors.

    A value depends only on (seed, stream, index) through common_philox, so
    inputs are regenerated instead of stored, on the host or on the GPU.
    Distributions and their parameters (JSON keys in parentheses):
        normal  (mean=0, std=1)       Box-Muller
        uniform (low=0, high=1)       low + (high-low)*u
        randint (low=0, high=10)      integer in [low, high)
        zeros, ones
        arange  (start=0, step=1)     start + step*index (no randomness)
    normal and uniform of f32, f16 and bf16 take the float path: in float
    arithmetic, four elements per Philox block (24-bit uniforms), which the
    GPU generates at memory speed; every other pair in double, one block
    per element (53-bit uniforms). Integer dtypes round (nearest) and
    saturate; see common_dtype_set.
*/
#ifndef COMMON_INIT_H
#define COMMON_INIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common_dtype.h"

typedef enum {
    INIT_NORMAL = 0, INIT_UNIFORM, INIT_RANDINT, INIT_ZEROS, INIT_ONES, INIT_ARANGE
} common_init_dist_t;

//  One input's distribution.
typedef struct {
    common_init_dist_t dist;    //  which distribution
    double p0;                  //  mean | low | start
    double p1;                  //  std | high | step
} common_init_t;

//  Parse a name ("normal"); -1 when unknown.
int common_init_dist_parse (const char *name, common_init_dist_t *dist);
const char *common_init_dist_name (common_init_dist_t dist);

//  True when init of dtype takes the float path (four elements per block).
bool common_init_float_path (const common_init_t *init, common_dtype_t dtype);

//  The value of element index of a dtype tensor (before rounding to the
//  dtype: common_dtype_set gives its bits; on the float path a float).
double common_init_value (const common_init_t *init, common_dtype_t dtype, uint64_t seed,
                          uint64_t stream, uint64_t index);

//  Fill count elements of buf (dtype) with the distribution's values.
void common_init_fill (const common_init_t *init, common_dtype_t dtype, void *buf,
                       size_t count, uint64_t seed, uint64_t stream);

//  Fill an output buffer so that an unwritten element can never pass: NaN for
//  float dtypes; for integers, random bits from (seed, stream), so no fixed
//  sentinel can be matched by accident or by design.
void common_init_poison (common_dtype_t dtype, void *buf, size_t count,
                         uint64_t seed, uint64_t stream);

#endif
