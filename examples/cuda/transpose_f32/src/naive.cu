// Straightforward transpose: one thread per element; reads coalesce, writes
// are strided by M.
extern "C" __global__ void transpose(const float *x, float *y, int M, int N)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < M && j < N)
        y[(long long) j * M + i] = x[(long long) i * N + j];
}
