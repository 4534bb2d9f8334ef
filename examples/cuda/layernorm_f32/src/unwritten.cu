// Hostile: returns without writing y, hoping the output buffer already
// holds something that passes. Outputs are NaN-poisoned before every run.
// Expected: incorrect.
extern "C" __global__ void layernorm(const float *x, const float *gamma, const float *beta, float *y,
                                     int M, int N, float eps)
{
}
