// Optimised transpose: 32x32 tiles staged through shared memory (one column
// of padding, so the column reads are free of bank conflicts); a 32x8 block
// moves one tile, 4 elements per thread, with coalesced reads and writes.
// Edge tiles are bounds-checked.
#define TILE 32
#define ROWS 8

extern "C" __global__ void transpose(const float *__restrict__ x, float *__restrict__ y, int M, int N)
{
    __shared__ float tile[TILE][TILE + 1];
    int j0 = blockIdx.x * TILE, i0 = blockIdx.y * TILE;
    int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int k = 0; k < TILE; k += ROWS) {
        int i = i0 + ty + k, j = j0 + tx;
        if (i < M && j < N)
            tile[ty + k][tx] = x[(long long) i * N + j];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; k += ROWS) {
        int j = j0 + ty + k, i = i0 + tx;   // y row j, column i
        if (j < N && i < M)
            y[(long long) j * M + i] = tile[tx][ty + k];
    }
}
