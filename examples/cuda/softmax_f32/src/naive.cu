// Straightforward row softmax: one thread per row, float.
extern "C" __global__ void softmax(const float *x, float *y, int M, int N)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= M)
        return;
    const float *row = x + (long long) r * N;
    float *out = y + (long long) r * N;
    float m = row[0];
    for (int j = 1; j < N; j++)
        m = fmaxf(m, row[j]);
    float s = 0.0f;
    for (int j = 0; j < N; j++)
        s += expf(row[j] - m);
    for (int j = 0; j < N; j++)
        out[j] = expf(row[j] - m) / s;
}
