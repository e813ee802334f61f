// A small CUDA program with two known device-memory leaks at distinct call sites, recorded under
// `compute-sanitizer --leak-check full` by record.py. The cudaMalloc lines marked LEAK-SITE are the
// allocations that are never freed; record.py reads their line numbers for the README.
#include <cstdio>
#include <cuda_runtime.h>

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

__global__ void scale(float* data, size_t n, float factor) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * factor + 1.0f;
}

// Scratch space for a reduction; the caller forgets to free it.
static float* make_scratch(size_t n) {
  float* p = nullptr;
  if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) return nullptr;  // LEAK-SITE scratch
  return p;
}

// Uploads one lookup table; every call allocates a new one and the caller drops the previous one.
static float* load_table(size_t n, float value) {
  float* t = nullptr;
  if (cudaMalloc(&t, n * sizeof(float)) != cudaSuccess) return nullptr;  // LEAK-SITE table
  cudaMemset(t, 0, n * sizeof(float));
  scale<<<(unsigned)((n + 255) / 256), 256>>>(t, n, value);
  return t;
}

int main() {
  const size_t n = 1 << 20;  // 4 MiB of floats
  float* work = nullptr;
  CHECK(cudaMalloc(&work, n * sizeof(float)));  // freed below: not a leak
  CHECK(cudaMemset(work, 0, n * sizeof(float)));
  scale<<<(unsigned)((n + 255) / 256), 256>>>(work, n, 2.0f);

  float* scratch = make_scratch(n / 4);  // 1 MiB, never freed
  if (!scratch) return 1;
  float* table = nullptr;
  for (int i = 0; i < 3; ++i) {
    table = load_table(n / 16, (float)i);  // 256 KiB each; only the last pointer is kept, none freed
    if (!table) return 1;
  }
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  float first = 0.0f;
  CHECK(cudaMemcpy(&first, work, sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("work[0] = %.1f, scratch at %p, last table at %p\n", first, (void*)scratch, (void*)table);
  CHECK(cudaFree(work));
  CHECK(cudaDeviceReset());  // tears the context down: the leak check runs here
  return 0;
}
