// Reference fused bias + GELU + residual: one thread per element, double.
extern "C" __global__ void bgr_ref(const float *x, const float *bias, const float *res, float *y, int M, int N)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y;
    if (i >= M || j >= N)
        return;
    long long k = (long long) i * N + j;
    double v = (double) x[k] + bias[j];
    double u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    y[k] = (float) (0.5 * v * (1.0 + tanh(u)) + res[k]);
}
