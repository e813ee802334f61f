// A CUDA program whose leaks all go through one allocation helper, recorded under
// `compute-sanitizer --leak-check full` by torch_memory.py. Two callers leak through make_buffer():
// process_batch() leaks 4 MiB on each of its 5 calls, main() leaks 1 MiB once. A third caller,
// checksum(), frees what it gets: not a leak. Grouping leaks by the innermost user frame names only
// make_buffer; the callers are what differ.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void fill(float* data, size_t n, float value) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) data[i] = value;
}

// The shared helper: every device buffer of this program comes from here.
static float* make_buffer(size_t bytes) {
  float* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;  // HELPER-ALLOC
  return p;
}

// One batch's staging buffer; the pointer is dropped at return, never freed.
static float process_batch(int batch) {
  const size_t n = (4u << 20) / sizeof(float);
  float* staging = make_buffer(n * sizeof(float));  // LEAK-CALLER process_batch
  if (!staging) return -1.0f;
  fill<<<(unsigned)((n + 255) / 256), 256>>>(staging, n, (float)batch);
  float first = 0.0f;
  cudaMemcpy(&first, staging, sizeof(float), cudaMemcpyDeviceToHost);
  return first;
}

// Frees its buffer: not a leak.
static float checksum() {
  const size_t n = (2u << 20) / sizeof(float);
  float* tmp = make_buffer(n * sizeof(float));
  if (!tmp) return -1.0f;
  fill<<<(unsigned)((n + 255) / 256), 256>>>(tmp, n, 0.5f);
  float first = 0.0f;
  cudaMemcpy(&first, tmp, sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(tmp);
  return first;
}

int main() {
  float* lookup = make_buffer(1u << 20);  // LEAK-CALLER main (1 MiB, kept until exit, never freed)
  if (!lookup) return 1;
  float total = 0.0f;
  for (int b = 0; b < 5; ++b) total += process_batch(b);
  total += checksum();
  std::printf("total = %.1f, lookup at %p\n", total, (void*)lookup);
  cudaDeviceReset();  // tears the context down: the leak check runs here
  return 0;
}
