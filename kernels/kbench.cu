// Kernel sweep harness for the GPU machine (kernels/README.md, "Choosing the block size"): loads a
// PTX file through the driver API and times every fp32 step kernel and block size with CUDA events
// over back-to-back launches (no interop, no host work between them), at N = 16384 ... 1048576
// (uniform ball, masses 0.5-1.5 / N, or all 1 / N with KBENCH_EQUAL_MASSES=1, eps = 0.01; the
// equal-mass kernels nbody_step_u* run only with equal masses). Each row also gives the kernel's velocity change
// against nbody_step_p1's (relative L2 difference: the j-split kernels add in another order).
// Build and run there (the sweep's PTX adds the exploration variants the product does not ship,
// kernels/README.md "Which kernels ship"; kernels/nbody.ptx alone times the shipped ones and
// skips the rest):
//   nvcc -ptx -arch=compute_75 -std=c++17 --use_fast_math -DNBODY_ALL_VARIANTS -o /tmp/all.ptx kernels/nbody.cu
//   nvcc -O2 -o /tmp/kbench kernels/kbench.cu -lcuda
//   /tmp/kbench /tmp/all.ptx [N [KERNEL [BLOCK [EPS2]]]] > sweep.csv
// Prints CSV: n,kernel,p,s,block,ms,rate,err_vs_p1 (rate: interactions/s, N^2 per launch). Each
// kernel runs twice: as nbody_step_<v> (one launch), and as its stream-K pair nbody_stepk_<v> on
// SMs x (resident blocks per SM) persistent CTAs + nbody_stepk_finish (rows named nbody_stepk_<v>).
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <string>
#include <random>
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_; cuGetErrorString(r_, &s_); fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_); exit(1); } } while (0)
// kind: 0 classic, 1 mass-scaled (tile B * 20 bytes), 2 equal-mass.
struct K { const char* name; int p, s; int kind; };
static const K KS[] = {
  {"nbody_step_p1",1,1,0},{"nbody_step_p2",2,1,0},{"nbody_step_p4",4,1,0},
  {"nbody_step_s2",1,2,0},{"nbody_step_s4",1,4,0},{"nbody_step_s8",1,8,0},
  {"nbody_step_m2x2",2,2,1},{"nbody_step_m2x4",2,4,1},{"nbody_step_m2x8",2,8,1},
  {"nbody_step_m4x1",4,1,1},{"nbody_step_m4x4",4,4,1},
  {"nbody_step_u2x4",2,4,2},{"nbody_step_u4x1",4,1,2},
};
static CUmodule mod;
static CUdeviceptr scratch; static size_t scratch_bytes;
// The stream-K pair of kernel k ("nbody_step_X" -> "nbody_stepk_X"): partial on `ctas` CTAs, then
// finish; `ctas` = 0 asks the occupancy API. Returns false when the PTX lacks it.
static bool launch_sk(const K& k, int n, int B, CUdeviceptr pin, CUdeviceptr pout, CUdeviceptr vel, float dt, float kick, float eps2, int* ctas_out) {
  std::string nm = std::string("nbody_stepk_") + (k.name + strlen("nbody_step_"));
  CUfunction f, fin;
  if (cuModuleGetFunction(&f, mod, nm.c_str()) != CUDA_SUCCESS || cuModuleGetFunction(&fin, mod, "nbody_stepk_finish") != CUDA_SUCCESS) return false;
  unsigned sh = B * (k.kind == 1 ? 20 : 16);
  int per_sm = 0; CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, B, sh));
  CUdevice d; CK(cuCtxGetDevice(&d)); int sms; CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
  int ctas = sms * (per_sm > 0 ? per_sm : 1); *ctas_out = ctas;
  int bpb = B / k.s * k.p; size_t need = 16 * ((size_t)ctas + (n + bpb - 1) / bpb) * bpb;
  if (need > scratch_bytes) { if (scratch) cuMemFree(scratch); CK(cuMemAlloc(&scratch, need)); scratch_bytes = need; }
  float g = 1.0f; int ib = 0, ie = n;
  void* a1[] = {&pin, &scratch, &n, &eps2, &ib, &ie};
  CK(cuLaunchKernel(f, ctas, 1, 1, B, 1, 1, sh, 0, a1, 0));
  void* a2[] = {&pin, &pout, &vel, &scratch, &n, &dt, &kick, &g, &ib, &ie, &bpb, &ctas};
  CK(cuLaunchKernel(fin, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0, a2, 0));
  return true;
}
static double run_sk(const K& k, int n, int B, CUdeviceptr pin, CUdeviceptr pout, CUdeviceptr vel, int iters, float eps2) {
  int ctas; float dt = 1e-3f, kick = 1e-3f;
  for (int w = 0; w < 2; ++w) if (!launch_sk(k, n, B, pin, pout, vel, dt, kick, eps2, &ctas)) return -1;
  CUevent a, b; CK(cuEventCreate(&a, 0)); CK(cuEventCreate(&b, 0));
  CK(cuEventRecord(a, 0));
  for (int w = 0; w < iters; ++w) launch_sk(k, n, B, pin, pout, vel, dt, kick, eps2, &ctas);
  CK(cuEventRecord(b, 0)); CK(cuEventSynchronize(b));
  float ms; CK(cuEventElapsedTime(&ms, a, b));
  cuEventDestroy(a); cuEventDestroy(b);
  return ms / iters;
}
static double run(const K& k, int n, int B, CUdeviceptr pin, CUdeviceptr pout, CUdeviceptr vel, int iters, float eps2) {
  CUfunction f; if (cuModuleGetFunction(&f, mod, k.name) != CUDA_SUCCESS) return -1;
  int bpb = B / k.s * k.p; unsigned grid = (n + bpb - 1) / bpb; unsigned sh = B * (k.kind == 1 ? 20 : 16);
  float dt = 1e-3f, kick = 1e-3f, g = 1.0f; int ib = 0, ie = n;
  void* args[] = {&pin, &pout, &vel, &n, &dt, &kick, &eps2, &g, &ib, &ie};
  CUevent a, b; CK(cuEventCreate(&a, 0)); CK(cuEventCreate(&b, 0));
  for (int w = 0; w < 2; ++w) CK(cuLaunchKernel(f, grid, 1, 1, B, 1, 1, sh, 0, args, 0));
  CK(cuEventRecord(a, 0));
  for (int w = 0; w < iters; ++w) CK(cuLaunchKernel(f, grid, 1, 1, B, 1, 1, sh, 0, args, 0));
  CK(cuEventRecord(b, 0)); CK(cuEventSynchronize(b));
  float ms; CK(cuEventElapsedTime(&ms, a, b));
  cuEventDestroy(a); cuEventDestroy(b);
  return ms / iters;
}
int main(int argc, char** argv) {
  CK(cuInit(0)); CUdevice d; CK(cuDeviceGet(&d, 0)); CUcontext c; CK(cuDevicePrimaryCtxRetain(&c, d)); CK(cuCtxSetCurrent(c));
  FILE* fp = argc > 1 ? fopen(argv[1], "rb") : nullptr;
  if (!fp) { fprintf(stderr, "usage: kbench PTX [N [KERNEL [BLOCK [EPS2]]]] (cannot open the PTX file)\n"); return 2; }
  fseek(fp, 0, SEEK_END); long sz = ftell(fp); fseek(fp, 0, SEEK_SET);
  std::string ptx(sz, '\0');
  if (fread(&ptx[0], 1, sz, fp) != (size_t)sz) { fprintf(stderr, "cannot read %s\n", argv[1]); return 1; }
  fclose(fp);
  CK(cuModuleLoadData(&mod, ptx.c_str()));
  std::vector<int> ns = {16384, 32768, 65536, 131072, 262144, 1048576};
  int only_n = argc > 2 ? atoi(argv[2]) : 0; const char* only_k = argc > 3 ? argv[3] : nullptr; int only_b = argc > 4 ? atoi(argv[4]) : 0;
  float eps2 = argc > 5 ? atof(argv[5]) : 1e-4f;
  printf("n,kernel,p,s,block,ms,rate,err_vs_p1\n");
  for (int n : ns) {
    if (only_n && n != only_n) continue;
    const bool equal = getenv("KBENCH_EQUAL_MASSES") && atoi(getenv("KBENCH_EQUAL_MASSES")) == 1;
    std::mt19937 rng(n); std::uniform_real_distribution<float> U(-1.f, 1.f), M(0.5f, 1.5f);
    std::vector<float> h(4 * (size_t)n), v(4 * (size_t)n, 0.f);
    for (int i = 0; i < n; ++i) { float x, y, z; do { x = U(rng); y = U(rng); z = U(rng); } while (x*x+y*y+z*z > 1); h[4*i]=x; h[4*i+1]=y; h[4*i+2]=z; h[4*i+3]=equal ? 1.0f / n : M(rng)/n; }
    size_t bytes = 16 * (size_t)n; CUdeviceptr pin, pout, vel, vref;
    CK(cuMemAlloc(&pin, bytes)); CK(cuMemAlloc(&pout, bytes)); CK(cuMemAlloc(&vel, bytes)); CK(cuMemAlloc(&vref, bytes));
    CK(cuMemcpyHtoD(pin, h.data(), bytes));
    double est = (double)n * n / 2e12 * 1e3; int iters = std::max(3, (int)(300.0 / est)); if (n >= 1048576) iters = 3;
    // reference: p1 one launch from zero velocity -> velocities
    std::vector<float> ref(4 * (size_t)n), got(4 * (size_t)n);
    {
      CK(cuMemcpyHtoD(vref, v.data(), bytes));
      CUfunction f; CK(cuModuleGetFunction(&f, mod, "nbody_step_p1")); float dt = 0.f, kick = 1.f, g = 1.f; int ib = 0, ie = n;
      void* args[] = {&pin, &pout, &vref, &n, &dt, &kick, &eps2, &g, &ib, &ie};
      CK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 256 * 16, 0, args, 0)); CK(cuCtxSynchronize());
      CK(cuMemcpyDtoH(ref.data(), vref, bytes));
    }
    for (const K& k : KS) {
      if (only_k && strcmp(only_k, k.name)) continue;
      if (k.kind == 2 && !equal) continue;
      if (n >= 1048576 && !only_k && strcmp(k.name, "nbody_step_p4") && strcmp(k.name, "nbody_step_m4x1") && strcmp(k.name, "nbody_step_m2x2") && strcmp(k.name, "nbody_step_u4x1")) continue;
      for (int B : {256, 512, 1024}) {
        if (only_b && B != only_b) continue;
        if (B % (32 * k.s)) continue;
        { CUfunction f; if (cuModuleGetFunction(&f, mod, k.name) != CUDA_SUCCESS) continue; }
        // correctness: one launch, dt=0 kick=1 from zero velocity
        CK(cuMemcpyHtoD(vel, v.data(), bytes));
        { CUfunction f; CK(cuModuleGetFunction(&f, mod, k.name)); float dt = 0.f, kick = 1.f, g = 1.f; int ib = 0, ie = n;
          int bpb = B / k.s * k.p; void* args[] = {&pin, &pout, &vel, &n, &dt, &kick, &eps2, &g, &ib, &ie};
          CK(cuLaunchKernel(f, (n + bpb - 1) / bpb, 1, 1, B, 1, 1, B * (k.kind == 1 ? 20 : 16), 0, args, 0)); CK(cuCtxSynchronize()); }
        CK(cuMemcpyDtoH(got.data(), vel, bytes));
        double num = 0, den = 0; for (size_t i = 0; i < 4 * (size_t)n; ++i) { if (i % 4 == 3) continue; double dd = got[i] - ref[i]; num += dd * dd; den += (double)ref[i] * ref[i]; }
        double ms = run(k, n, B, pin, pout, vel, iters, eps2);
        printf("%d,%s,%d,%d,%d,%.4f,%.4e,%.2e\n", n, k.name, k.p, k.s, B, ms, (double)n * n / (ms * 1e-3), sqrt(num / den));
        fflush(stdout);
        // The stream-K pair: the same correctness check, then its time.
        CK(cuMemcpyHtoD(vel, v.data(), bytes));
        int ctas = 0;
        if (!launch_sk(k, n, B, pin, pout, vel, 0.f, 1.f, eps2, &ctas)) continue;
        CK(cuCtxSynchronize());
        CK(cuMemcpyDtoH(got.data(), vel, bytes));
        num = 0; for (size_t i = 0; i < 4 * (size_t)n; ++i) { if (i % 4 == 3) continue; double dd = got[i] - ref[i]; num += dd * dd; }
        ms = run_sk(k, n, B, pin, pout, vel, iters, eps2);
        printf("%d,nbody_stepk_%s,%d,%d,%d,%.4f,%.4e,%.2e\n", n, k.name + strlen("nbody_step_"), k.p, k.s, B, ms, (double)n * n / (ms * 1e-3), sqrt(num / den));
        fflush(stdout);
      }
    }
    cuMemFree(pin); cuMemFree(pout); cuMemFree(vel); cuMemFree(vref);
  }
  return 0;
}
