// Reference GELU (tanh form): one thread per element, in double.
extern "C" __global__ void gelu_ref(const float *x, float *y, int N)
{
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        double v = x[i];
        double u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
        y[i] = (float) (0.5 * v * (1.0 + tanh(u)));
    }
}
