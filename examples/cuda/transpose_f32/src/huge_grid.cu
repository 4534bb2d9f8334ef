// Hostile: a correct one-thread-per-element transpose launched with
// grid.y = 2^20, beyond the hardware limit of 65535 for grid.y and grid.z.
// The evaluator must reject the launch before making it. Expected: invalid.
extern "C" __global__ void transpose(const float *x, float *y, int M, int N)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < M && j < N)
        y[(long long) j * M + i] = x[(long long) i * N + j];
}
