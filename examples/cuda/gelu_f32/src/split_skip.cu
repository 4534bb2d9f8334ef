// Two declared launches, the second a no-op that should have done the second
// half: gelu_main covers only i < N/2, gelu_rest returns at once. Both
// launches run (the kernel count matches), but y[N/2..] keeps its NaN
// poison, so this is incorrect: a launch that runs but does nothing passes
// only when the outputs are right anyway.
extern "C" __global__ void gelu_main(const float *x, float *y, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N / 2) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}

extern "C" __global__ void gelu_rest(const float *x, float *y, int N)
{
    return;
}
