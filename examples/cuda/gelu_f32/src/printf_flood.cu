// Hostile: floods the device printf buffer. Every thread prints a billion
// lines before computing its (correct) element. The device-side buffer
// drops what does not fit, so this does not exhaust host memory: it just
// runs for hours. Expected: timeout.
extern "C" __global__ void gelu(const float *x, float *y, int N)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N)
        return;
    for (long long k = 0; k < 1000000000LL; k++)
        printf("kgym flood: thread %d line %lld\n", i, k);
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}
