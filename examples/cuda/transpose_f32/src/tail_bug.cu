// Subtly wrong: the tiled transpose with the bounds checks "optimised away":
// a block whose tile would cross the matrix edge does nothing, on the
// theory that real sizes are multiples of 32. The partial tiles at the
// right and bottom edges are never written. Correct whenever M and N are
// multiples of 32.
#define TILE 32
#define ROWS 8

extern "C" __global__ void transpose(const float *__restrict__ x, float *__restrict__ y, int M, int N)
{
    __shared__ float tile[TILE][TILE + 1];
    int j0 = blockIdx.x * TILE, i0 = blockIdx.y * TILE;
    if (i0 + TILE > M || j0 + TILE > N)
        return;
    int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int k = 0; k < TILE; k += ROWS)
        tile[ty + k][tx] = x[(long long) (i0 + ty + k) * N + j0 + tx];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; k += ROWS)
        y[(long long) (j0 + ty + k) * M + i0 + tx] = tile[tx][ty + k];
}
