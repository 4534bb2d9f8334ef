// A correct kernel (naive.cu) with a compiler option outside the allow-list:
// --pre-include would make NVRTC read an arbitrary host file into the
// compilation. Must be rejected before compiling. Expected: invalid.
extern "C" __global__ void layernorm(const float *x, const float *gamma, const float *beta, float *y,
                                     int M, int N, float eps)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= M)
        return;
    const float *row = x + (long long) r * N;
    float mean = 0.0f;
    for (int j = 0; j < N; j++)
        mean += row[j];
    mean /= N;
    float var = 0.0f;
    for (int j = 0; j < N; j++)
        var += (row[j] - mean) * (row[j] - mean);
    var /= N;
    float inv = 1.0f / sqrtf(var + eps);
    for (int j = 0; j < N; j++)
        y[(long long) r * N + j] = (row[j] - mean) * inv * gamma[j] + beta[j];
}
