// Reference row softmax: one thread per row, in double.
extern "C" __global__ void softmax_ref(const float *x, float *y, int M, int N)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= M)
        return;
    const float *row = x + (long long) r * N;
    float *out = y + (long long) r * N;
    double m = row[0];
    for (int j = 1; j < N; j++)
        m = fmax(m, (double) row[j]);
    double s = 0.0;
    for (int j = 0; j < N; j++)
        s += exp((double) row[j] - m);
    for (int j = 0; j < N; j++)
        out[j] = (float) (exp((double) row[j] - m) / s);
}
