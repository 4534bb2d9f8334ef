// Hostile: asks for 1 MiB of dynamic shared memory per block (the launch's
// "shared": "1048576"); an H100/H200 multiprocessor has 228 KiB, and a block
// may have at most 227 KiB. The evaluator must refuse the launch before
// making it. The kernel itself would be a correct sum. Expected: invalid.
extern "C" __global__ void sum_zero(float *y)
{
    y[0] = 0.0f;
}

extern "C" __global__ void sum_blocks(const float *x, float *y, int N)
{
    extern __shared__ float buf[];
    float s = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x)
        s += x[i];
    buf[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < blockDim.x; k++)
            s += buf[k];
        atomicAdd(y, s);
    }
}
