// All-pairs N-body gravity, fp32, for the CUDA-GL interop demo.
//
// Compiled by kernels/gen_ptx.py with NVRTC 11.8 to kernels/nbody.ptx (compute_75, PTX ISA 7.8)
// with --use_fast_math: rsqrtf is a single `rsqrt.approx.ftz.f32` (MUFU.RSQ), denormals flush to
// zero. Do not compile it without fast math / -ftz=true: rsqrt.approx without .ftz costs extra
// instructions per interaction. kernels/README.md has the ABI, the block sizes and the P rule.
//
// Layout: pos[i] = (x, y, z, mass), vel[i] = (vx, vy, vz, 0), both float4, N bodies.
//
// Force (Plummer softening, GPU Gems 3 ch. 31 eq. 3):
//   a_i = G sum_j m_j (x_j - x_i) / (r_ij^2 + eps^2)^(3/2)
// eps2 > 0: every term is finite; the j == i term is 0 because x_j - x_i == 0.
// eps2 == 0: exact Newtonian gravity; a term with r^2 == 0 (j == i, or two bodies at the same
// point) contributes 0. The choice is one block-uniform branch outside the tile loop, selecting one
// of two instantiations, so the softened inner loop carries no guard instruction.
//
// Work split: a block of B threads (B = blockDim.x, a runtime launch parameter) integrates B * P
// bodies; thread t handles bodies blockIdx.x * B * P + k * B + t, k < P. All bodies j stream through
// shared memory in tiles of B (dynamic shared memory, B * 16 bytes); each float4 read from shared
// memory (LDS.128) feeds P interactions.

// The tile of bodies j in shared memory: blockDim.x float4 (dynamic shared memory).
extern __shared__ float4 nbody_tile[];

// Internal helpers live in a named namespace: NVRTC names the symbols of an anonymous one after a
// hash, which would leak into the PTX.
namespace nbody {

// Tile slots past N hold mass 0 at this far-away point. With eps2 == 0 a massless slot placed
// near a real body (e.g. at the origin) could give 0 * inf = NaN; from 1e18 the term
// 1/r^3 < 1e-54 flushes to 0, so the slot adds exactly 0 for any body with |x| << 1e18.
#define NBODY_PAD_COORD 1.0e18f

// Largest finite float: the clamp of the unsoftened path (see interact<false>).
#define NBODY_FLT_MAX 3.402823466e38f

// Inner-loop unroll factor: source bodies per loop trip (each against the thread's P bodies).
// U * P == 32 keeps the loop body at 400-490 SASS instructions (4-7 of them the trip's own, per
// 32 interactions) and lets every block size that is a multiple of 32 tile exactly. The
// mass-scaled loop of P = 4 unsplit (nbody_step_m4x1, its stream-K half) takes 32 sources per
// trip (128 interactions, ~1580 SASS instructions): 12.37 instructions per interaction instead
// of 12.53, and 2-3 % faster on the H200 (kernels/README.md, "Variants tried"); 32 divides
// every valid B. (Also its guarded self-tile loop, which shares the loop's `used`.)
__host__ __device__ constexpr int unroll_for(const int p, const int s, const bool scaled) {
    return scaled && p == 4 && s == 1 ? 32 : 32 / p;
}

__device__ __forceinline__ float4 pad_body() {
    return make_float4(NBODY_PAD_COORD, NBODY_PAD_COORD, NBODY_PAD_COORD, 0.0f);
}

// One interaction of body i (at xi) with body b, added to acc.
// Softened: 3 FADD, 3 FFMA (r^2 starts at eps2), MUFU.RSQ, 3 FMUL, 3 FFMA = 13 instructions.
// Unsoftened: the same 13 (r^2 starts with an FMUL) plus one FMNMX. For r^2 == 0 rsqrt gives +inf
// and m * inv^3 is +inf (or NaN for m == 0); min(NaN or inf, FLT_MAX) = FLT_MAX (PTX min returns
// the non-NaN operand), and the displacement, exactly 0 here, times FLT_MAX adds exactly 0.
// (Two distinct bodies closer than ~1e-13, where 1/r^3 overflows, get the bounded term
// |dx| * FLT_MAX instead of inf; never NaN.)
template <bool Soft>
__device__ __forceinline__ void interact(const float4 b, const float3 xi, float3& acc, const float eps2) {
    const float dx = b.x - xi.x;
    const float dy = b.y - xi.y;
    const float dz = b.z - xi.z;
    float r2 = Soft ? fmaf(dx, dx, eps2) : dx * dx;
    r2 = fmaf(dy, dy, r2);
    r2 = fmaf(dz, dz, r2);
    const float inv = rsqrtf(r2);
    float s = b.w * (inv * inv * inv);
    if (!Soft) {
        s = fminf(s, NBODY_FLT_MAX);
    }
    acc.x = fmaf(dx, s, acc.x);
    acc.y = fmaf(dy, s, acc.y);
    acc.z = fmaf(dz, s, acc.z);
}

// Mass-scaled source body (softened path of the nbody_step_mPxS kernels; README.md, "mass-scaled
// loop"): with k = sign(m) / sqrt(|m|) (correctly rounded) and positions taken relative to the
// block's centre c (its first body), the tile holds q = (k (x - c), k (y - c), k (z - c), k) and
// e = eps2 k^2. Then d = fma(x_i - c, -k, q) = k (x_j - x_i), r'^2 = |d|^2 + e = k^2 (r^2 + eps2),
// z = rsqrt(r'^2) and z^3 d = m (x_j - x_i) / (r^2 + eps2)^(3/2): the interaction without the
// multiplication by m, 12 instructions. (Relative to c, the extra rounding of k (x - c) scales
// with the distances inside the cluster, not with its distance from the origin.) A massless body
// (or a pad slot) gets q = 0, e = 1: its term is exactly 0.
__device__ __forceinline__ void scale_body(const float4 b, const float3 c, const float eps2, float4& q, float& e) {
    const float am = fabsf(b.w);
    if (am > 0.0f) {
        const float k = copysignf(__frsqrt_rn(am), b.w);
        q = make_float4(k * (b.x - c.x), k * (b.y - c.y), k * (b.z - c.z), k);
        e = eps2 * (k * k);
    } else {
        q = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        e = 1.0f;
    }
}

// One mass-scaled interaction of body i (at xi) with the scaled source (q, e), added to acc:
// 3 FFMA (d), 3 FFMA (r'^2 from e), MUFU.RSQ, 2 FMUL, 3 FFMA = 12 instructions. `self` drops the
// term (j == i: k x_j is rounded, so d is not exactly 0 there as x_j - x_i is).
template <bool Guard>
__device__ __forceinline__ void interact_scaled(const float4 q, const float e, const float3 xi, float3& acc,
                                                const bool self) {
    const float dx = fmaf(xi.x, -q.w, q.x);
    const float dy = fmaf(xi.y, -q.w, q.y);
    const float dz = fmaf(xi.z, -q.w, q.z);
    float r2 = fmaf(dx, dx, e);
    r2 = fmaf(dy, dy, r2);
    r2 = fmaf(dz, dz, r2);
    const float z = rsqrtf(r2);
    float s = z * z * z;
    if (Guard && self) {
        s = 0.0f;
    }
    acc.x = fmaf(dx, s, acc.x);
    acc.y = fmaf(dy, s, acc.y);
    acc.z = fmaf(dz, s, acc.z);
}

// The inner loop's three forms in `accumulate`: the classic interaction softened or exact
// (eps2 == 0), and the mass-scaled one (softened only). The equal-mass loop has a function of its
// own (`accumulate_uniform`).
enum class Loop { Soft, Exact, Scaled };

// The step kernels' families, a template parameter of `block_sums`, `step` and `step_partial`:
// the classic loop (nbody_step_pP, _sS), the mass-scaled one (nbody_step_mPxS) and the
// equal-mass one (nbody_step_uPxS); with eps2 == 0 every family runs the classic exact loop.
enum class Family { Classic, Scaled, Uniform };

// The tile loop of every fp32 step kernel: the sum over all N bodies j of the interactions with
// this thread's P bodies at xi[]. A block of B threads has S split lanes of T = B / S threads:
// lane s = t / T takes slots [s T, (s + 1) T) of every tile of B bodies (S = 1: all of them), so
// each thread makes N / S interactions per body (the j-split, README.md). T must be a multiple of
// 32 (B a multiple of 32 S): every warp then has one s, so its loop bounds and shared-memory reads
// are warp-uniform (each LDS is a broadcast). Every thread of the block must call it (it
// synchronises the block). `self[k]` is the index of body k (Scaled: its own term is dropped; the
// other forms need no guard). Scaled: xi[] and the tile are relative to the block's centre c.
// The sources are bodies [j0, j1) (0 <= j0 < j1 <= n): all n for a step, a stream-K segment's
// share otherwise; tiles start at j0, and slots at or past j1 hold pad bodies. Adds this
// thread's partial sums to acc[].
template <int P, int S, Loop L>
__device__ __forceinline__ void accumulate(const float4* __restrict__ pos_in, const int j0, const int j1,
                                           const float eps2, const float3 c, const float3 (&xi)[P],
                                           const int (&self)[P], float3 (&acc)[P]) {
    constexpr bool Scaled = L == Loop::Scaled;
    constexpr int U = unroll_for(P, S, Scaled);
    const int B = blockDim.x;
    const int T = B / S;
    const int t = threadIdx.x;
    const int lo = S == 1 ? 0 : (t / T) * T;
    // Scaled: the tile's e values follow its B float4 (dynamic shared memory B * 20 bytes).
    float* etile = reinterpret_cast<float*>(nbody_tile + B);

    // Register prefetch: the global load of the next tile is issued before the current tile is
    // computed, so its latency hides behind the inner loop.
    float4 next = j0 + t < j1 ? pos_in[j0 + t] : pad_body();
#pragma unroll 1
    for (int base = j0; base < j1; base += B) {
        if (Scaled) {
            // Slots past N hold pad_body(), massless: scale_body gives them q = 0, e = 1.
            float4 q;
            float e;
            scale_body(next, c, eps2, q, e);
            nbody_tile[t] = q;
            etile[t] = e;
        } else {
            nbody_tile[t] = next;
        }
        __syncthreads();
        const int j = base + B + t;
        next = j < j1 ? pos_in[j] : pad_body();

        // This lane's slots below j1, rounded up to U (the padding slots up to there are
        // massless, or q = 0 when scaled). Warp-uniform.
        const int rem = max(0, j1 - base - lo);
        const int used = min(T, (rem + (U - 1)) & ~(U - 1));
        // Scaled: does one of this thread's bodies sit in this lane's slots of this tile?
        bool guard = false;
        int slot[P];
#pragma unroll
        for (int k = 0; k < P; ++k) {
            slot[k] = self[k] - base - lo;
            guard |= Scaled && static_cast<unsigned>(slot[k]) < static_cast<unsigned>(T);
        }
        const float4* tile = nbody_tile + lo;
        // Scaled: the e values of four sources come in one LDS.128 (et + s is 16-byte aligned:
        // etile follows B float4, and lo and s are multiples of 32 and of U >= 4).
        const float4* et4 = reinterpret_cast<const float4*>(etile + lo);
        if (guard) {
            // At most P tiles per thread take this loop, with one select per interaction.
#pragma unroll 1
            for (int s = 0; s < used; s += U) {
#pragma unroll
                for (int u = 0; u < U; u += 4) {
                    const float4 e4 = et4[(s + u) / 4];
                    const float e[4] = {e4.x, e4.y, e4.z, e4.w};
#pragma unroll
                    for (int v = 0; v < 4; ++v) {
                        const float4 b = tile[s + u + v];
#pragma unroll
                        for (int k = 0; k < P; ++k) {
                            interact_scaled<true>(b, e[v], xi[k], acc[k], s + u + v == slot[k]);
                        }
                    }
                }
            }
        } else if (Scaled) {
#pragma unroll 1
            for (int s = 0; s < used; s += U) {
#pragma unroll
                for (int u = 0; u < U; u += 4) {
                    const float4 e4 = et4[(s + u) / 4];
                    const float e[4] = {e4.x, e4.y, e4.z, e4.w};
                    if (P == 4 && S == 1) {
                        // m4x1: body by body over the four sources, the order ptxas scheduled
                        // best (with U = 32, N = 262144 on the H200: 2.222e12 interactions/s
                        // against 2.213e12 source by source; for m4x4 and the P = 2 kernels it
                        // was slower; kernels/README.md, "Variants tried").
                        float4 b[4];
#pragma unroll
                        for (int v = 0; v < 4; ++v) {
                            b[v] = tile[s + u + v];
                        }
#pragma unroll
                        for (int k = 0; k < P; ++k) {
#pragma unroll
                            for (int v = 0; v < 4; ++v) {
                                interact_scaled<false>(b[v], e[v], xi[k], acc[k], false);
                            }
                        }
                    } else {
#pragma unroll
                        for (int v = 0; v < 4; ++v) {
                            const float4 b = tile[s + u + v];
#pragma unroll
                            for (int k = 0; k < P; ++k) {
                                interact_scaled<false>(b, e[v], xi[k], acc[k], false);
                            }
                        }
                    }
                }
            }
        } else {
#pragma unroll 1
            for (int s = 0; s < used; s += U) {
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const float4 b = tile[s + u];
#pragma unroll
                    for (int k = 0; k < P; ++k) {
                        interact<L == Loop::Soft>(b, xi[k], acc[k], eps2);
                    }
                }
            }
        }
        __syncthreads();
    }
}

// One equal-mass interaction of body i (at xi) with source body b, whose mass is every body's:
// 3 FADD, 3 FFMA (r^2 starts at eps2), MUFU.RSQ, 2 FMUL, 3 FFMA = 12 instructions; the caller
// multiplies the sum by the common mass once. The j == i term is exactly 0 (dx = dy = dz = 0 and
// z^3 = eps^-3 is finite), so there is no guard; a pad slot (NBODY_PAD_COORD) gives z^3 < 1e-54,
// which flushes to 0.
__device__ __forceinline__ void interact_uniform(const float3 b, const float3 xi, float3& acc, const float eps2) {
    const float dx = b.x - xi.x;
    const float dy = b.y - xi.y;
    const float dz = b.z - xi.z;
    float r2 = fmaf(dx, dx, eps2);
    r2 = fmaf(dy, dy, r2);
    r2 = fmaf(dz, dz, r2);
    const float z = rsqrtf(r2);
    const float s = z * z * z;
    acc.x = fmaf(dx, s, acc.x);
    acc.y = fmaf(dy, s, acc.y);
    acc.z = fmaf(dz, s, acc.z);
}

// The equal-mass tile loop (softened, eps2 > 0; README.md, "Equal masses"): `accumulate`'s
// shape, lanes and bounds, with the tile holding x, y, z of each source packed (12 bytes a
// source, the first B * 12 bytes of the B * 16), so four sources come in three LDS.128, and the
// sum left without the mass. P = 4, S = 1 takes 32 sources per trip, body by body, as m4x1.
// A function of its own rather than a fourth form of `accumulate`: there, the same code changed
// NVRTC's PTX of the other kernels (the order of a few moves), whose schedules were tuned on
// the H200 and which ptxas then scheduled differently.
template <int P, int S>
__device__ __forceinline__ void accumulate_uniform(const float4* __restrict__ pos_in, const int j0, const int j1,
                                                   const float eps2, const float3 (&xi)[P], float3 (&acc)[P]) {
    constexpr int U = unroll_for(P, S, true);
    const int B = blockDim.x;
    const int T = B / S;
    const int t = threadIdx.x;
    const int lo = S == 1 ? 0 : (t / T) * T;
    float* ptile = reinterpret_cast<float*>(nbody_tile);
    // 3 lo floats are 16-byte aligned: lo is a multiple of 32.
    const float4* pt4 = reinterpret_cast<const float4*>(ptile + 3 * lo);
    float4 next = j0 + t < j1 ? pos_in[j0 + t] : pad_body();
#pragma unroll 1
    for (int base = j0; base < j1; base += B) {
        ptile[3 * t] = next.x;
        ptile[3 * t + 1] = next.y;
        ptile[3 * t + 2] = next.z;
        __syncthreads();
        const int j = base + B + t;
        next = j < j1 ? pos_in[j] : pad_body();
        // This lane's slots below j1, rounded up to U (pad bodies up to there). Warp-uniform.
        const int rem = max(0, j1 - base - lo);
        const int used = min(T, (rem + (U - 1)) & ~(U - 1));
#pragma unroll 1
        for (int s = 0; s < used; s += U) {
#pragma unroll
            for (int u = 0; u < U; u += 4) {
                const float4 w0 = pt4[(s + u) / 4 * 3];
                const float4 w1 = pt4[(s + u) / 4 * 3 + 1];
                const float4 w2 = pt4[(s + u) / 4 * 3 + 2];
                const float3 b[4] = {make_float3(w0.x, w0.y, w0.z), make_float3(w0.w, w1.x, w1.y),
                                     make_float3(w1.z, w1.w, w2.x), make_float3(w2.y, w2.z, w2.w)};
                if (P == 4 && S == 1) {
#pragma unroll
                    for (int k = 0; k < P; ++k) {
#pragma unroll
                        for (int v = 0; v < 4; ++v) {
                            interact_uniform(b[v], xi[k], acc[k], eps2);
                        }
                    }
                } else {
#pragma unroll
                    for (int v = 0; v < 4; ++v) {
#pragma unroll
                        for (int k = 0; k < P; ++k) {
                            interact_uniform(b[v], xi[k], acc[k], eps2);
                        }
                    }
                }
            }
        }
        __syncthreads();
    }
}

// The leapfrog update of body i with acceleration sum a (README.md, semantics): vel[i] += a g kick,
// pos_out[i] = pos_in[i] + vel[i] dt_drift (gk = g kick).
__device__ __forceinline__ void update(const float4* __restrict__ pos_in, float4* __restrict__ pos_out,
                                       float4* __restrict__ vel, const int i, const float3 a, const float gk,
                                       const float dt_drift) {
    const float4 b = pos_in[i];
    float4 v = vel[i];
    v.x = fmaf(a.x, gk, v.x);
    v.y = fmaf(a.y, gk, v.y);
    v.z = fmaf(a.z, gk, v.z);
    v.w = 0.0f;
    vel[i] = v;
    pos_out[i] = make_float4(fmaf(v.x, dt_drift, b.x), fmaf(v.y, dt_drift, b.y), fmaf(v.z, dt_drift, b.z), b.w);
}

// The acceleration sums of one block of T P bodies (T = B / S; body first + k T, k < P, of the
// thread's lane; block_first: the block's first body, in range) over the sources [j0, j1): the
// bodies' positions loaded, the tile loop (one block-uniform branch on eps2, a kernel parameter:
// no divergence; with ftz a denormal eps2 counts as 0), then the S lanes' sums added through
// shared memory (the tile's, free after the tile loop's last barrier) in the order s = 0, 1, ...,
// S - 1 (deterministic) into lane 0's acc[]. Every thread of the block must call it.
template <int P, int S, Family F>
__device__ __forceinline__ void block_sums(const float4* __restrict__ pos_in, const int j0, const int j1,
                                           const float eps2, const int block_first, const int first,
                                           const int i_end, const int T, float3 (&acc)[P]) {
    const int t = threadIdx.x;
    // The bodies' positions (the update reads them again: fewer live registers).
    float3 xi[P];
    int self[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
        const int i = first + k * T;
        const float4 b = i < i_end ? pos_in[i] : pad_body();
        xi[k] = make_float3(b.x, b.y, b.z);
        self[k] = i < i_end ? i : -1;
        acc[k] = make_float3(0.0f, 0.0f, 0.0f);
    }

    const float3 origin = make_float3(0.0f, 0.0f, 0.0f);
    if (eps2 > 0.0f) {
        if (F == Family::Uniform) {
            accumulate_uniform<P, S>(pos_in, j0, j1, eps2, xi, acc);
            // Every body's mass (the host checked that they are all equal).
            const float m = pos_in[block_first].w;
#pragma unroll
            for (int k = 0; k < P; ++k) {
                acc[k] = make_float3(acc[k].x * m, acc[k].y * m, acc[k].z * m);
            }
        } else if (F == Family::Scaled) {
            // The block's centre: its first body.
            const float4 cb = pos_in[block_first];
            const float3 c = make_float3(cb.x, cb.y, cb.z);
#pragma unroll
            for (int k = 0; k < P; ++k) {
                xi[k] = make_float3(xi[k].x - c.x, xi[k].y - c.y, xi[k].z - c.z);
            }
            accumulate<P, S, Loop::Scaled>(pos_in, j0, j1, eps2, c, xi, self, acc);
        } else {
            accumulate<P, S, Loop::Soft>(pos_in, j0, j1, eps2, origin, xi, self, acc);
        }
    } else {
        accumulate<P, S, Loop::Exact>(pos_in, j0, j1, eps2, origin, xi, self, acc);
    }

    if (S > 1) {
        // The tile loop ended with a barrier: the tile memory (B float4) holds one partial per
        // thread, for one k at a time.
#pragma unroll
        for (int k = 0; k < P; ++k) {
            if (k > 0) {
                __syncthreads();
            }
            nbody_tile[t] = make_float4(acc[k].x, acc[k].y, acc[k].z, 0.0f);
            __syncthreads();
            if (t < T) {
#pragma unroll
                for (int q = 1; q < S; ++q) {
                    const float4 p = nbody_tile[q * T + t];
                    acc[k].x += p.x;
                    acc[k].y += p.y;
                    acc[k].z += p.z;
                }
            }
        }
    }
}

// One leapfrog step (README.md, semantics) for the bodies [i_begin, i_end): a block of B threads
// covers T P bodies (T = B / S); thread t handles bodies i_begin + blockIdx.x T P + k T + t mod T,
// k < P, as split lane t / T. The S lanes' partial sums are added through shared memory (the
// tile's, free after the tile loop's last barrier) in the order s = 0, 1, ..., S - 1
// (deterministic) by lane 0 (`block_sums`), which then updates the body. F: the family's softened
// loop (mass-scaled, equal-mass or classic; eps2 == 0 takes the classic exact one).
template <int P, int S, Family F>
__device__ __forceinline__ void step(const float4* __restrict__ pos_in, float4* __restrict__ pos_out,
                                     float4* __restrict__ vel, const int n, const float dt_drift,
                                     const float kick, const float eps2, const float g, const int i_begin,
                                     const int i_end) {
    const int T = S == 1 ? blockDim.x : blockDim.x / S;
    const int t = threadIdx.x;
    const int li = S == 1 ? t : t % T;
    // In range: the grid covers [i_begin, i_end).
    const int block_first = i_begin + blockIdx.x * T * P;
    const int first = block_first + li;
    float3 acc[P];
    block_sums<P, S, F>(pos_in, 0, n, eps2, block_first, first, i_end, T, acc);
    if (S > 1 && t >= T) {
        return;
    }
    const float gk = g * kick;
#pragma unroll
    for (int k = 0; k < P; ++k) {
        const int i = first + k * T;
        if (i < i_end) {
            update(pos_in, pos_out, vel, i, acc[k], gk, dt_drift);
        }
    }
}

// Stream-K (README.md, "stream-K"): the work of a launch over bodies [i_begin, i_end) is cut
// into U = I * J units, unit (ib, q) = the ib-th block of bodies (T P of them, as `step` groups
// them) against the q-th chunk of 32 source bodies; CTA c of the G = gridDim.x persistent CTAs
// takes units [c U / G, (c + 1) U / G), so every CTA gets the same work within one unit, whatever
// N. It walks them as segments, one per block of bodies it meets, and writes each segment's
// acceleration sums (the S lanes already added) to partial[(c + ib) * T P + k T + l] for body
// k T + l of the block (c + ib is unique per segment: see README.md). No body is updated here:
// nbody_stepk_finish adds each body's segments in CTA order (deterministic) and updates it.
__host__ __device__ __forceinline__ long long chunks_of(const int n) {
    return (n + 31) / 32;
}

// First unit of CTA c: c U / G, in 64 bits: the host keeps G U below 2^63 (U can reach ~2^55).
__host__ __device__ __forceinline__ long long cta_start(const long long c, const long long units, const long long ctas) {
    return c * units / ctas;
}

template <int P, int S, Family F>
__device__ __forceinline__ void step_partial(const float4* __restrict__ pos_in, float4* __restrict__ partial,
                                             const int n, const float eps2, const int i_begin, const int i_end) {
    const int T = S == 1 ? blockDim.x : blockDim.x / S;
    const int t = threadIdx.x;
    const int li = S == 1 ? t : t % T;
    const int bpb = T * P;
    const long long chunks = chunks_of(n);
    const long long units = (static_cast<long long>(i_end - i_begin) + bpb - 1) / bpb * chunks;
    const long long c = blockIdx.x;
    long long u = cta_start(c, units, gridDim.x);
    const long long u_end = cta_start(c + 1, units, gridDim.x);
    while (u < u_end) {
        const long long ib = u / chunks;
        const long long q0 = u - ib * chunks;
        const long long q1 = min(chunks, q0 + (u_end - u));
        const int j0 = static_cast<int>(q0 * 32);
        const int j1 = static_cast<int>(min(static_cast<long long>(n), q1 * 32));
        const int block_first = i_begin + static_cast<int>(ib) * bpb;
        float3 acc[P];
        block_sums<P, S, F>(pos_in, j0, j1, eps2, block_first, block_first + li, i_end, T, acc);
        if (t < T) {
            float4* out = partial + (c + ib) * bpb;
#pragma unroll
            for (int k = 0; k < P; ++k) {
                out[k * T + li] = make_float4(acc[k].x, acc[k].y, acc[k].z, 0.0f);
            }
        }
        // The next segment's tiles reuse the shared memory the reduction read.
        __syncthreads();
        u += q1 - q0;
    }
}

// Potential tile loop: sum_j m_j / sqrt(r^2 + eps^2) over j != i (Soft: by index) or over
// r^2 != 0 (unsoftened). Per-tile fp32 partial sums are added with Kahan compensation.
// Diagnostics only: not tuned.
template <bool Soft>
__device__ __forceinline__ float potential_sum(const float4* __restrict__ pos, const int n, const float eps2,
                                               const int i, const float3 xi) {
    constexpr int U = 8;
    const int B = blockDim.x;
    const int t = threadIdx.x;
    float sum = 0.0f;
    float comp = 0.0f;
#pragma unroll 1
    for (int base = 0; base < n; base += B) {
        const int j = base + t;
        nbody_tile[t] = j < n ? pos[j] : pad_body();
        __syncthreads();
        const int used = min(B, (n - base + (U - 1)) & ~(U - 1));
        const int self = i - base;  // tile slot of body i (may be out of [0, used))
        float part = 0.0f;
#pragma unroll 1
        for (int s = 0; s < used; s += U) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const float4 b = nbody_tile[s + u];
                const float dx = b.x - xi.x;
                const float dy = b.y - xi.y;
                const float dz = b.z - xi.z;
                float r2 = Soft ? fmaf(dx, dx, eps2) : dx * dx;
                r2 = fmaf(dy, dy, r2);
                r2 = fmaf(dz, dz, r2);
                const float term = b.w * rsqrtf(r2);
                const bool skip = Soft ? (s + u == self) : !(r2 > 0.0f);
                part += skip ? 0.0f : term;
            }
        }
        // Kahan: sum += part. Fast math in NVRTC does not reassociate, so this is kept.
        const float y = part - comp;
        const float tsum = sum + y;
        comp = (tsum - sum) - y;
        sum = tsum;
        __syncthreads();
    }
    return sum;
}

// ---------------------------------------------------------------------------------------------
// fp64 (--precision f64): the same leapfrog step on double4 buffers, one body per thread.
// ---------------------------------------------------------------------------------------------

// The fp64 tile (same dynamic shared memory as nbody_tile: B * 32 bytes for these kernels).
extern __shared__ double4 nbody_tile_f64[];

__device__ __forceinline__ double4 pad_body_f64() {
    return make_double4(NBODY_PAD_COORD, NBODY_PAD_COORD, NBODY_PAD_COORD, 0.0);
}

// 1/sqrt(x) in double. NR: the fp32 MUFU.RSQ estimate (relative error e < 2^-22) refined by one
// Newton step y <- y (3 - x y^2) / 2, which leaves 1.5 e^2 < 2^-44 (~6e-14): 4 fp64 operations
// and 2 conversions instead of the library rsqrt (full double precision, the _lib variant).
// Valid where x is a normal float (1.2e-38 <= x <= 3.4e38: |r| from 1e-19 to 1e19); x = 0 gives
// NaN, which the unsoftened path turns into a zero term like the fp32 kernel (interact_f64).
template <bool NR>
__device__ __forceinline__ double rsqrt_f64(const double x) {
    if (!NR) {
        return rsqrt(x);
    }
    const double y = static_cast<double>(rsqrtf(static_cast<float>(x)));
    return y * fma(-0.5 * x, y * y, 1.5);
}

// One interaction in fp64; the unsoftened path caps m/r^3 at DBL_MAX (fmin returns the non-NaN
// operand), so the self term (dx = 0) adds exactly 0, as in the fp32 kernel.
template <bool Soft, bool NR>
__device__ __forceinline__ void interact_f64(const double4 b, const double3 xi, double3& acc, const double eps2) {
    const double dx = b.x - xi.x;
    const double dy = b.y - xi.y;
    const double dz = b.z - xi.z;
    double r2 = Soft ? fma(dx, dx, eps2) : dx * dx;
    r2 = fma(dy, dy, r2);
    r2 = fma(dz, dz, r2);
    const double inv = rsqrt_f64<NR>(r2);
    double s = b.w * (inv * inv * inv);
    if (!Soft) {
        s = fmin(s, 1.7976931348623157e308);
    }
    acc.x = fma(dx, s, acc.x);
    acc.y = fma(dy, s, acc.y);
    acc.z = fma(dz, s, acc.z);
}

// The fp64 tile loop (the fp32 one's shape, P = 1, 8 interactions per loop trip).
template <bool Soft, bool NR>
__device__ __forceinline__ double3 accumulate_f64(const double4* __restrict__ pos_in, const int n, const double eps2,
                                                  const double3 xi) {
    constexpr int U = 8;
    const int B = blockDim.x;
    const int t = threadIdx.x;
    double3 acc = make_double3(0.0, 0.0, 0.0);
    double4 next = t < n ? pos_in[t] : pad_body_f64();
#pragma unroll 1
    for (int base = 0; base < n; base += B) {
        nbody_tile_f64[t] = next;
        __syncthreads();
        const int j = base + B + t;
        next = j < n ? pos_in[j] : pad_body_f64();
        const int used = min(B, (n - base + (U - 1)) & ~(U - 1));
#pragma unroll 1
        for (int s = 0; s < used; s += U) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                interact_f64<Soft, NR>(nbody_tile_f64[s + u], xi, acc, eps2);
            }
        }
        __syncthreads();
    }
    return acc;
}

// One fp64 leapfrog step for bodies [i_begin, i_end), one per thread (README.md, fp64).
template <bool NR>
__device__ __forceinline__ void step_f64(const double4* __restrict__ pos_in, double4* __restrict__ pos_out,
                                         double4* __restrict__ vel, const int n, const double dt_drift,
                                         const double kick, const double eps2, const double g, const int i_begin,
                                         const int i_end) {
    const int i = i_begin + blockIdx.x * blockDim.x + threadIdx.x;
    const double4 b = i < i_end ? pos_in[i] : pad_body_f64();
    const double3 xi = make_double3(b.x, b.y, b.z);
    const double3 acc =
        eps2 > 0.0 ? accumulate_f64<true, NR>(pos_in, n, eps2, xi) : accumulate_f64<false, NR>(pos_in, n, eps2, xi);
    if (i < i_end) {
        const double gk = g * kick;
        double4 v = vel[i];
        v.x = fma(acc.x, gk, v.x);
        v.y = fma(acc.y, gk, v.y);
        v.z = fma(acc.z, gk, v.z);
        v.w = 0.0;
        vel[i] = v;
        pos_out[i] = make_double4(fma(v.x, dt_drift, xi.x), fma(v.y, dt_drift, xi.y), fma(v.z, dt_drift, xi.z), b.w);
    }
}

}  // namespace nbody

// Every entry point allows up to 1024 threads per block: ptxas keeps them at <= 64 registers.
// One macro for all step kernels: the same parameters (README.md, ABI), nbody::step<P, S, FAMILY>
// the body. A launch integrates bodies [i_begin, i_end) against all n (0 <= i_begin < i_end <= n):
// one launch per step, or several for a long step, so that the host can stop between them.
#define NBODY_STEP_KERNEL(NAME, P, S, FAMILY)                                                          \
    extern "C" __global__ void __launch_bounds__(1024)                                               \
        NAME(const float4* __restrict__ pos_in, float4* __restrict__ pos_out, float4* __restrict__ vel, \
             int n, float dt_drift, float kick, float eps2, float g, int i_begin, int i_end) {        \
        nbody::step<P, S, nbody::Family::FAMILY>(pos_in, pos_out, vel, n, dt_drift, kick, eps2, g, i_begin, i_end);  \
    }

// The product ships the kernels the launch rule picks on the GPU it was measured on, the plain
// twin of each stream-K pair it picks (what steps over body ranges run), and nbody_step_p1, the
// reference loop (README.md, "Which kernels ship"). The other shapes are exploration variants,
// built only with -DNBODY_ALL_VARIANTS (the PTX that kbench.cu sweeps).

// P bodies per thread (shared memory B * 16 bytes).
NBODY_STEP_KERNEL(nbody_step_p1, 1, 1, Classic)
NBODY_STEP_KERNEL(nbody_step_p2, 2, 1, Classic)
NBODY_STEP_KERNEL(nbody_step_p4, 4, 1, Classic)

// The j-split variants (one body per S threads, for small N; shared memory B * 16 bytes).
NBODY_STEP_KERNEL(nbody_step_s4, 1, 4, Classic)
NBODY_STEP_KERNEL(nbody_step_s8, 1, 8, Classic)

// Mass-scaled softened loop, P bodies per thread and S threads per body (nbody_step_mPxS; shared
// memory B * 20 bytes; README.md, "mass-scaled loop").
NBODY_STEP_KERNEL(nbody_step_m2x2, 2, 2, Scaled)
NBODY_STEP_KERNEL(nbody_step_m2x4, 2, 4, Scaled)
NBODY_STEP_KERNEL(nbody_step_m2x8, 2, 8, Scaled)
NBODY_STEP_KERNEL(nbody_step_m4x1, 4, 1, Scaled)

// Equal-mass softened loop, P bodies per thread and S threads per body (nbody_step_uPxS; shared
// memory B * 16 bytes; README.md, "Equal masses"): for states whose bodies all have one mass.
NBODY_STEP_KERNEL(nbody_step_u2x4, 2, 4, Uniform)
NBODY_STEP_KERNEL(nbody_step_u4x1, 4, 1, Uniform)

// Stream-K step kernels (README.md, "stream-K"): nbody_stepk_<variant> is the first half of a
// step of nbody_step_<variant> over [i_begin, i_end), with G persistent CTAs (the grid); it
// writes the segments' sums to `partial` ((G + I) T P float4, I = ceil(len / (T P)), T = B / S)
// and updates nothing. nbody_stepk_finish is the second half.
#define NBODY_STEPK_KERNEL(NAME, P, S, FAMILY)                                                          \
    extern "C" __global__ void __launch_bounds__(1024)                                                \
        NAME(const float4* __restrict__ pos_in, float4* __restrict__ partial, int n, float eps2,        \
             int i_begin, int i_end) {                                                                  \
        nbody::step_partial<P, S, nbody::Family::FAMILY>(pos_in, partial, n, eps2, i_begin, i_end);                    \
    }

NBODY_STEPK_KERNEL(nbody_stepk_p1, 1, 1, Classic)
NBODY_STEPK_KERNEL(nbody_stepk_p4, 4, 1, Classic)
NBODY_STEPK_KERNEL(nbody_stepk_s4, 1, 4, Classic)
NBODY_STEPK_KERNEL(nbody_stepk_s8, 1, 8, Classic)
NBODY_STEPK_KERNEL(nbody_stepk_m2x4, 2, 4, Scaled)
NBODY_STEPK_KERNEL(nbody_stepk_m2x8, 2, 8, Scaled)
NBODY_STEPK_KERNEL(nbody_stepk_m4x1, 4, 1, Scaled)
NBODY_STEPK_KERNEL(nbody_stepk_u2x4, 2, 4, Uniform)
NBODY_STEPK_KERNEL(nbody_stepk_u4x1, 4, 1, Uniform)

#ifdef NBODY_ALL_VARIANTS
// Exploration variants (never picked on the measured GPU): for kbench.cu's sweeps only.
NBODY_STEP_KERNEL(nbody_step_s2, 1, 2, Classic)
NBODY_STEP_KERNEL(nbody_step_m4x4, 4, 4, Scaled)
NBODY_STEPK_KERNEL(nbody_stepk_p2, 2, 1, Classic)
NBODY_STEPK_KERNEL(nbody_stepk_s2, 1, 2, Classic)
NBODY_STEPK_KERNEL(nbody_stepk_m2x2, 2, 2, Scaled)
NBODY_STEPK_KERNEL(nbody_stepk_m4x4, 4, 4, Scaled)
#endif

// The second half of a stream-K step: for each body i of [i_begin, i_end) (one per thread,
// grid ceil(len / B) of any valid B), the sum of its block's segments partial[(c + ib) bpb + l]
// over the CTAs c whose units meet block ib, in CTA order, then the leapfrog update. `bpb` = T P
// and `ctas` = G of the first half's launch. Reads pos_in[i], vel[i] and partial; writes
// pos_out[i] and vel[i].
extern "C" __global__ void __launch_bounds__(1024)
    nbody_stepk_finish(const float4* __restrict__ pos_in, float4* __restrict__ pos_out, float4* __restrict__ vel,
                       const float4* __restrict__ partial, int n, float dt_drift, float kick, float g,
                       int i_begin, int i_end, int bpb, int ctas) {
    const long long idx = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= i_end - i_begin) {
        return;
    }
    const long long chunks = nbody::chunks_of(n);
    const long long units = (static_cast<long long>(i_end - i_begin) + bpb - 1) / bpb * chunks;
    const long long ib = idx / bpb;
    const long long l = idx - ib * bpb;
    // The CTA that owns a unit u: the last c with cta_start(c) <= u (CTAs with no units share
    // their start with the next one, so the owner is the last of them).
    auto owner = [&](const long long u) {
        long long c = u * ctas / units;
        while (c + 1 < ctas && nbody::cta_start(c + 1, units, ctas) <= u) {
            ++c;
        }
        while (c > 0 && nbody::cta_start(c, units, ctas) > u) {
            --c;
        }
        return c;
    };
    const long long c0 = owner(ib * chunks);
    const long long c1 = owner(ib * chunks + chunks - 1);
    float3 a = make_float3(0.0f, 0.0f, 0.0f);
    for (long long c = c0; c <= c1; ++c) {
        // A CTA without units wrote nothing (only possible between c0 and c1 when U < G).
        if (nbody::cta_start(c, units, ctas) == nbody::cta_start(c + 1, units, ctas)) {
            continue;
        }
        const float4 p = partial[(c + ib) * bpb + l];
        a.x += p.x;
        a.y += p.y;
        a.z += p.z;
    }
    nbody::update(pos_in, pos_out, vel, i_begin + static_cast<int>(idx), a, g * kick, dt_drift);
}

// phi[i] = -sum_{j != i} m_j / sqrt(r_ij^2 + eps2); with eps2 == 0 the sum skips r^2 == 0.
// No G and no m_i: the host multiplies (in f64). One body per thread, grid = ceil(N / B).
extern "C" __global__ void __launch_bounds__(1024)
    nbody_potential(const float4* __restrict__ pos, float* __restrict__ phi, int n, float eps2) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float4 b = i < n ? pos[i] : nbody::pad_body();
    const float3 xi = make_float3(b.x, b.y, b.z);
    float sum;
    if (eps2 > 0.0f) {
        sum = nbody::potential_sum<true>(pos, n, eps2, i, xi);
    } else {
        sum = nbody::potential_sum<false>(pos, n, eps2, i, xi);
    }
    if (i < n) {
        phi[i] = -sum;
    }
}

// fp64 step kernels (README.md, fp64): nbody_step_f64 with the refined fp32 rsqrt estimate,
// nbody_step_f64_lib with the CUDA math library's double rsqrt (the reference variant).
#define NBODY_STEP_F64_KERNEL(NAME, NR)                                                                  \
    extern "C" __global__ void __launch_bounds__(256)                                                   \
        NAME(const double4* __restrict__ pos_in, double4* __restrict__ pos_out, double4* __restrict__ vel, \
             int n, double dt_drift, double kick, double eps2, double g, int i_begin, int i_end) {        \
        nbody::step_f64<NR>(pos_in, pos_out, vel, n, dt_drift, kick, eps2, g, i_begin, i_end);           \
    }

NBODY_STEP_F64_KERNEL(nbody_step_f64, true)
NBODY_STEP_F64_KERNEL(nbody_step_f64_lib, false)


// The fp64 path's conversion for GL (README.md, fp64): out[i] = (float4)pos[i] for i < n, each
// component rounded to nearest (cvt.rn; with -ftz a result below FLT_MIN flushes to 0). One
// element per thread, grid = ceil(n / B); no shared memory, reads pos[0..n), writes out[0..n).
extern "C" __global__ void __launch_bounds__(1024)
    nbody_to_float4(const double4* __restrict__ pos, float4* __restrict__ out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const double4 p = pos[i];
        out[i] = make_float4(__double2float_rn(p.x), __double2float_rn(p.y), __double2float_rn(p.z), __double2float_rn(p.w));
    }
}

// The density view (README.md, density view): the bodies' mass projected into a float image.
//
// nbody_density_splat: one body per thread, grid = ceil(n / B). The clip position is
// (row_x . p, row_y . p, row_w . p) with p = (x, y, z, 1): rows 0, 1 and 3 of the view-projection
// matrix. A body in front of the camera (w > 0) whose NDC x, y lie in [-1, 1) adds its mass to its
// pixel, accum[py * width + px] (row 0 at the bottom, as GL's textures), with atomicAdd: surfaces
// have no atomic operations, so the sum is made in linear memory. Reads pos[0..n), writes
// accum[0..width * height).
extern "C" __global__ void __launch_bounds__(1024)
    nbody_density_splat(const float4* __restrict__ pos, int n, float* __restrict__ accum, int width, int height,
                        float4 row_x, float4 row_y, float4 row_w) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    const float4 p = pos[i];
    const float w = row_w.x * p.x + row_w.y * p.y + row_w.z * p.z + row_w.w;
    if (!(w > 0.0f)) {
        return;
    }
    const float x = (row_x.x * p.x + row_x.y * p.y + row_x.z * p.z + row_x.w) / w;
    const float y = (row_y.x * p.x + row_y.y * p.y + row_y.z * p.z + row_y.w) / w;
    // Written so that NaN fails every test.
    if (!(x >= -1.0f && x < 1.0f && y >= -1.0f && y < 1.0f)) {
        return;
    }
    const int px = min(static_cast<int>((x * 0.5f + 0.5f) * width), width - 1);
    const int py = min(static_cast<int>((y * 0.5f + 0.5f) * height), height - 1);
    atomicAdd(&accum[py * width + px], p.w);
}

// nbody_density_store: the surface path's store, one pixel per thread, grid = ceil(width * height / B):
// accum[i] into the R32F image through the surface object (x in bytes: 4 per texel), then
// accum[i] = 0 for the next frame. Reads and writes accum[0..width * height), writes the
// surface's width x height texels.
extern "C" __global__ void __launch_bounds__(1024)
    nbody_density_store(float* __restrict__ accum, int width, int height, unsigned long long density) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= width * height) {
        return;
    }
    const int x = i % width;
    const int y = i / width;
    surf2Dwrite(accum[i], density, x * 4, y);
    accum[i] = 0.0f;
}

// A colour map for t in [0, 1]: black, deep blue, magenta, orange, near white.
__device__ __forceinline__ float3 density_colour(float t) {
    const float s = fminf(fmaxf(t, 0.0f), 1.0f) * 4.0f;
    float3 a;
    float3 b;
    if (s < 1.0f) {
        a = make_float3(0.0f, 0.0f, 0.02f);
        b = make_float3(0.10f, 0.12f, 0.55f);
    } else if (s < 2.0f) {
        a = make_float3(0.10f, 0.12f, 0.55f);
        b = make_float3(0.70f, 0.15f, 0.60f);
    } else if (s < 3.0f) {
        a = make_float3(0.70f, 0.15f, 0.60f);
        b = make_float3(1.0f, 0.55f, 0.10f);
    } else {
        a = make_float3(1.0f, 0.55f, 0.10f);
        b = make_float3(1.0f, 0.97f, 0.85f);
    }
    const float f = s - fminf(floorf(s), 3.0f);
    return make_float3(a.x + (b.x - a.x) * f, a.y + (b.y - a.y) * f, a.z + (b.z - a.z) * f);
}

// nbody_density_tonemap: one pixel per thread, grid = ceil(width * height / B). Reads the R32F image
// through a texture object (bilinear filtering, unnormalised coordinates, clamped): nine taps
// 1.5 texels apart, weighted 1-2-1 in x and y; the centre tap (at a texel centre) reads one texel
// and each other tap (on a texel boundary) the mean of two, so a 5 x 5-texel smoothing with
// weights 1/8, 1/8, 1/2, 1/8, 1/8 per axis. The smoothed mass times gain maps to t = log2(1 + v) / 12 (twelve
// octaves of density), coloured by density_colour and written as RGBA8 through the surface
// object (x in bytes: 4 per texel).
extern "C" __global__ void __launch_bounds__(1024)
    nbody_density_tonemap(unsigned long long density, int width, int height, float gain, unsigned long long image) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= width * height) {
        return;
    }
    const int x = i % width;
    const int y = i / width;
    const float u = x + 0.5f;
    const float v = y + 0.5f;
    float sum = 0.0f;
#pragma unroll
    for (int dy = -1; dy <= 1; ++dy) {
#pragma unroll
        for (int dx = -1; dx <= 1; ++dx) {
            const float wgt = (dx == 0 ? 2.0f : 1.0f) * (dy == 0 ? 2.0f : 1.0f);
            sum += wgt * tex2D<float>(density, u + 1.5f * dx, v + 1.5f * dy);
        }
    }
    const float t = log2f(1.0f + gain * sum * (1.0f / 16.0f)) * (1.0f / 12.0f);
    const float3 c = density_colour(t);
    const uchar4 out = make_uchar4(static_cast<unsigned char>(c.x * 255.0f + 0.5f), static_cast<unsigned char>(c.y * 255.0f + 0.5f),
                                   static_cast<unsigned char>(c.z * 255.0f + 0.5f), 255);
    surf2Dwrite(out, image, x * 4, y);
}

// =============================================================================================
// Tree code (README.md, "Tree code"): Barnes & Hut (1986) on the GPU, fp32. Per step:
//   nbody_tree_bounds   the bodies' bounding box (block reductions, then atomics on the header);
//   nbody_tree_keys     a 63-bit Morton key per body (21 bits per axis over the box's cube);
//   nbody_tree_sort_*   a stable LSD radix sort of (key, body index), 8 bits a pass, 8 passes;
//   nbody_tree_build    the sorted positions, and the binary radix tree of the sorted keys
//                       (Karras 2012, "Maximizing parallelism in the construction of BVHs,
//                       octrees, and k-d trees", HPG): internal node i < n - 1 splits a run of
//                       sorted bodies at its highest differing key bit (ties broken by index);
//   nbody_tree_groups   the walk's groups: the largest subtrees of at most 32 bodies;
//   nbody_tree_moments  each internal node's mass, centre of mass, traceless quadrupole, spread
//                       S = sum m |s|^2 and box, from the leaves up (the second thread to reach a
//                       node computes it);
//   nbody_tree_walk     one warp per group walks the tree with the group's box (Barnes 1990's group walk, as Bonsai's): up to 32 nodes are
//                       tested at once, one per lane; the accepted ones form the interaction list
//                       every lane then evaluates for its own body (monopole + quadrupole), the
//                       opened ones push their two children. Then the leapfrog update of each body
//                       at its own index: the buffers keep their order.
// Node ids: internal nodes 0 .. n - 2 (the root is 0), leaf k (sorted body k) is n - 1 + k; with
// n == 1 the root is leaf 0.
// The header (unsigned int[16], zeroed before a step, followed by the n - 1 arrival counters of
// nbody_tree_moments, zeroed with it): [0..2] ~order(min x, y, z), [3..5] order(max x, y, z) (the
// box, by atomicMax on order-preserving integers), [8..9] the step's interactions (u64), [10] the
// walk's stack overflow flag, [11] the walk's next group to take, [12] the deepest stack it used,
// [13] the number of groups.
// =============================================================================================

namespace nbody {
namespace tree {

constexpr int SORT_THREADS = 256;
constexpr int SORT_ITEMS = 8;
constexpr int SORT_TILE = SORT_THREADS * SORT_ITEMS;
constexpr int SCAN_THREADS = 1024;
// Digits of the radix sort: 8 bits a pass (the count and scatter blocks have one thread a digit).
constexpr int RADIX = 256;
static_assert(RADIX == SORT_THREADS, "one thread per digit");
constexpr int WALK_WARPS = 8;
// Per-warp stack of the walk, in global memory (16 KB a warp; the host allocates one per warp of
// its grid). A batch pops k <= 32 nodes and pushes at most 2k, so it runs only while size <=
// BATCH_MAX (after it size <= STACK - 98); above that the walk pops one node at a time, depth
// first, which adds at most one entry per level below the popped node (at most 96 levels: the
// 63-bit keys and the 32-bit indices of equal keys give distinct prefixes of at most 95 bits).
// Batched popping is breadth-like: the stack holds about the group's pending frontier, of the
// order of its interaction list (hundreds to thousands of nodes).
constexpr int STACK = 4096;
constexpr int BATCH_MAX = STACK - 98 - 32;
constexpr int HDR_INTERACTIONS = 8;
constexpr int HDR_OVERFLOW = 10;
constexpr int HDR_NEXT_GROUP = 11;
constexpr int HDR_MAX_STACK = 12;
constexpr int HDR_GROUPS = 13;
// Most bodies of a walk group (a warp's lanes).
constexpr int GROUP_MAX = 32;

// Float to unsigned with the same order (negative floats reversed), and back.
__device__ __forceinline__ unsigned int order_float(const float f) {
    const unsigned int u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float unorder_float(const unsigned int u) {
    return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}

// The 21 low bits of v spread to every third bit (bit k to bit 3k).
__device__ __forceinline__ unsigned long long spread_bits(unsigned long long v) {
    v &= 0x1fffffull;
    v = (v | (v << 32)) & 0x1f00000000ffffull;
    v = (v | (v << 16)) & 0x1f0000ff0000ffull;
    v = (v | (v << 8)) & 0x100f00f00f00f00full;
    v = (v | (v << 4)) & 0x10c30c30c30c30c3ull;
    v = (v | (v << 2)) & 0x1249249249249249ull;
    return v;
}

// Karras's delta: the length of the common prefix of sorted keys i and j (j out of range: -1;
// equal keys: 64 + the common prefix of the indices).
__device__ __forceinline__ int common_prefix(const unsigned long long* __restrict__ keys, const int n, const int i, const int j) {
    if (j < 0 || j >= n) {
        return -1;
    }
    const unsigned long long a = keys[i];
    const unsigned long long b = keys[j];
    return a != b ? __clzll(a ^ b) : 64 + __clz(static_cast<unsigned int>(i ^ j));
}

// A node's moments as the walk and the moments pass read them: com = (centre of mass, mass),
// quad = (Qxx, Qyy, Qzz, Qxy), quad2 = (Qxz, Qyz, S, side), box lo and hi.
struct Cell {
    float4 com;
    float4 quad;
    float4 quad2;
    float3 lo;
    float3 hi;
};

__device__ __forceinline__ Cell load_cell(const int node, const int n, const float4* __restrict__ sorted,
                                          const float4* com, const float4* quad, const float4* quad2,
                                          const float4* box_lo, const float4* box_hi) {
    Cell c;
    if (node >= n - 1) {
        c.com = sorted[node - (n - 1)];
        c.quad = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        c.quad2 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        c.lo = make_float3(c.com.x, c.com.y, c.com.z);
        c.hi = c.lo;
    } else {
        // Written by other threads of this launch: read through L2 (__ldcg), never a stale L1 line.
        c.com = __ldcg(&com[node]);
        c.quad = __ldcg(&quad[node]);
        c.quad2 = __ldcg(&quad2[node]);
        const float4 lo = __ldcg(&box_lo[node]);
        const float4 hi = __ldcg(&box_hi[node]);
        c.lo = make_float3(lo.x, lo.y, lo.z);
        c.hi = make_float3(hi.x, hi.y, hi.z);
    }
    return c;
}

// Adds child c's share to the parent's quadrupole and spread: its own Q and S shifted by
// s = c's centre of mass - the parent's (parallel-axis terms m (3 s s^T - |s|^2 I) and m |s|^2).
__device__ __forceinline__ void add_shifted(const Cell& c, const float3 p, float q[6], float& spread) {
    const float m = c.com.w;
    const float sx = c.com.x - p.x;
    const float sy = c.com.y - p.y;
    const float sz = c.com.z - p.z;
    const float s2 = sx * sx + sy * sy + sz * sz;
    q[0] += c.quad.x + m * (3.0f * sx * sx - s2);
    q[1] += c.quad.y + m * (3.0f * sy * sy - s2);
    q[2] += c.quad.z + m * (3.0f * sz * sz - s2);
    q[3] += c.quad.w + m * 3.0f * sx * sy;
    q[4] += c.quad2.x + m * 3.0f * sx * sz;
    q[5] += c.quad2.y + m * 3.0f * sy * sz;
    spread += c.quad2.z + m * s2;
}

// One body-cell term (the CPU tree's, sim/tree/walk.rs): with d = centre of mass - x_i and
// R^2 = |d|^2 + eps2, M d / R^3 - Q d / R^5 + (5/2) (d^T Q d - eps2 S) d / R^7. A leaf is a cell
// with Q = 0, S = 0: the direct sum's term. R^2 == 0 (eps2 == 0 and the body itself, or a body at
// the same point) adds nothing.
__device__ __forceinline__ void cell_term(const float4 c, const float4 q, const float4 r, const float3 xi,
                                          const float eps2, float3& a) {
    const float dx = c.x - xi.x;
    const float dy = c.y - xi.y;
    const float dz = c.z - xi.z;
    const float r2 = fmaf(dx, dx, fmaf(dy, dy, fmaf(dz, dz, eps2)));
    if (r2 > 0.0f) {
        const float inv = rsqrtf(r2);
        const float inv2 = inv * inv;
        const float inv3 = inv * inv2;
        const float inv5 = inv3 * inv2;
        const float qx = q.x * dx + q.w * dy + r.x * dz;
        const float qy = q.w * dx + q.y * dy + r.y * dz;
        const float qz = r.x * dx + r.y * dy + q.z * dz;
        const float dqd = dx * qx + dy * qy + dz * qz;
        const float radial = c.w * inv3 + 2.5f * (dqd - eps2 * r.z) * inv5 * inv2;
        a.x += radial * dx - qx * inv5;
        a.y += radial * dy - qy * inv5;
        a.z += radial * dz - qz * inv5;
    }
}

__device__ __forceinline__ float warp_min(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
    return v;
}
// The exclusive prefix sum of v over the block (blockDim.x a multiple of 32, at most 1024) and
// the block's total; every thread must call it. `warp_sums` is 32 words of shared memory, free
// again when it returns.
__device__ __forceinline__ unsigned int block_exclusive_scan(const unsigned int v, unsigned int* warp_sums,
                                                             unsigned int& total) {
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    const int warps = blockDim.x / 32;
    unsigned int incl = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned int up = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) {
            incl += up;
        }
    }
    if (lane == 31) {
        warp_sums[warp] = incl;
    }
    __syncthreads();
    if (warp == 0) {
        unsigned int w = lane < warps ? warp_sums[lane] : 0u;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned int up = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) {
                w += up;
            }
        }
        warp_sums[lane] = w;
    }
    __syncthreads();
    const unsigned int excl = incl - v + (warp > 0 ? warp_sums[warp - 1] : 0u);
    total = warp_sums[warps - 1];
    __syncthreads();
    return excl;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
    return v;
}

}  // namespace tree
}  // namespace nbody

// The box: block b of 256 threads reduces bodies b * 256 + t + k * gridDim.x * 256, then one
// atomicMax per bound into header[0..5]. Any grid; the header starts zeroed.
extern "C" __global__ void __launch_bounds__(256)
    nbody_tree_bounds(const float4* __restrict__ pos, int n, unsigned int* __restrict__ header) {
    using namespace nbody::tree;
    __shared__ float part[6][8];
    float v[6] = {NBODY_FLT_MAX, NBODY_FLT_MAX, NBODY_FLT_MAX, -NBODY_FLT_MAX, -NBODY_FLT_MAX, -NBODY_FLT_MAX};
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float4 p = pos[i];
        v[0] = fminf(v[0], p.x);
        v[1] = fminf(v[1], p.y);
        v[2] = fminf(v[2], p.z);
        v[3] = fmaxf(v[3], p.x);
        v[4] = fmaxf(v[4], p.y);
        v[5] = fmaxf(v[5], p.z);
    }
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int k = 0; k < 6; ++k) {
        v[k] = k < 3 ? warp_min(v[k]) : warp_max(v[k]);
        if (lane == 0) {
            part[k][warp] = v[k];
        }
    }
    __syncthreads();
    if (threadIdx.x < 6) {
        const int k = threadIdx.x;
        float r = part[k][0];
        for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
            r = k < 3 ? fminf(r, part[k][w]) : fmaxf(r, part[k][w]);
        }
        atomicMax(&header[k], k < 3 ? ~order_float(r) : order_float(r));
    }
}

// keys[i]: body i's 63-bit Morton key in the box's cube (side = the box's longest edge, 2^21
// cells a side, clamped), idx[i] = i. One body per thread.
extern "C" __global__ void __launch_bounds__(1024)
    nbody_tree_keys(const float4* __restrict__ pos, int n, const unsigned int* __restrict__ header,
                    unsigned long long* __restrict__ keys, unsigned int* __restrict__ idx) {
    using namespace nbody::tree;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    const float lx = unorder_float(~header[0]);
    const float ly = unorder_float(~header[1]);
    const float lz = unorder_float(~header[2]);
    const float side = fmaxf(fmaxf(unorder_float(header[3]) - lx, unorder_float(header[4]) - ly), unorder_float(header[5]) - lz);
    const float scale = side > 0.0f ? 2097152.0f / side : 0.0f;
    const float4 p = pos[i];
    // fmaxf/fminf return the non-NaN operand: a NaN coordinate lands in cell 0.
    const unsigned long long cx = static_cast<unsigned int>(fminf(fmaxf((p.x - lx) * scale, 0.0f), 2097151.0f));
    const unsigned long long cy = static_cast<unsigned int>(fminf(fmaxf((p.y - ly) * scale, 0.0f), 2097151.0f));
    const unsigned long long cz = static_cast<unsigned int>(fminf(fmaxf((p.z - lz) * scale, 0.0f), 2097151.0f));
    keys[i] = (spread_bits(cx) << 2) | (spread_bits(cy) << 1) | spread_bits(cz);
    idx[i] = i;
}

// Radix sort, pass 1 of 3: hist[d * tiles + t] = how many keys of tile t (2048 keys, 256
// threads) have digit d = (key >> shift) & 255. Grid = tiles.
extern "C" __global__ void __launch_bounds__(256)
    nbody_tree_sort_count(const unsigned long long* __restrict__ keys, int n, int shift, unsigned int* __restrict__ hist, int tiles) {
    using namespace nbody::tree;
    __shared__ unsigned int h[RADIX];
    h[threadIdx.x] = 0;
    __syncthreads();
    const int base = blockIdx.x * SORT_TILE;
    for (int r = 0; r < SORT_ITEMS; ++r) {
        const int i = base + r * SORT_THREADS + threadIdx.x;
        if (i < n) {
            atomicAdd(&h[static_cast<unsigned int>(keys[i] >> shift) & (RADIX - 1)], 1u);
        }
    }
    __syncthreads();
    hist[threadIdx.x * tiles + blockIdx.x] = h[threadIdx.x];
}

// Pass 2 of 3: each digit's run of hist, hist[d * tiles .. (d + 1) * tiles), replaced by its
// exclusive prefix sums, and the digit's total in totals[d]. Grid = 256 blocks (one a digit) of
// 1024 threads, each block scanning its run in chunks of 1024 with a carry.
extern "C" __global__ void __launch_bounds__(1024)
    nbody_tree_sort_scan(unsigned int* __restrict__ hist, int tiles, unsigned int* __restrict__ totals) {
    using namespace nbody::tree;
    __shared__ unsigned int warp_sums[32];
    unsigned int* run = hist + static_cast<long long>(blockIdx.x) * tiles;
    unsigned int carry = 0;
    for (int base = 0; base < tiles; base += SCAN_THREADS) {
        const int k = base + threadIdx.x;
        const unsigned int v = k < tiles ? run[k] : 0u;
        unsigned int total;
        const unsigned int excl = block_exclusive_scan(v, warp_sums, total);
        if (k < tiles) {
            run[k] = carry + excl;
        }
        carry += total;
    }
    if (threadIdx.x == 0) {
        totals[blockIdx.x] = carry;
    }
}

// Pass 3 of 3: each key of tile t (with its index) to its place, stably: the tile's offset for
// its digit (the keys of smaller digits, from totals, plus the scanned hist) plus the keys of
// that digit before it in the tile, counted per round of 256 keys with __match_any_sync (lanes
// of a warp with the same digit) and per-warp counts in shared memory. Grid = tiles, 256
// threads.
extern "C" __global__ void __launch_bounds__(256)
    nbody_tree_sort_scatter(const unsigned long long* __restrict__ keys_in, const unsigned int* __restrict__ idx_in,
                            unsigned long long* __restrict__ keys_out, unsigned int* __restrict__ idx_out, int n, int shift,
                            const unsigned int* __restrict__ hist, int tiles, const unsigned int* __restrict__ totals) {
    using namespace nbody::tree;
    __shared__ unsigned int base[RADIX];
    __shared__ unsigned int counts[SORT_THREADS / 32][RADIX];
    __shared__ unsigned int warp_sums[32];
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    // The keys of smaller digits (all tiles), then those of this digit in the tiles before.
    unsigned int all;
    const unsigned int before = block_exclusive_scan(totals[threadIdx.x], warp_sums, all);
    base[threadIdx.x] = before + hist[threadIdx.x * tiles + blockIdx.x];
    const int tile = blockIdx.x * SORT_TILE;
    for (int r = 0; r < SORT_ITEMS; ++r) {
        for (int w = 0; w < SORT_THREADS / 32; ++w) {
            counts[w][threadIdx.x] = 0;
        }
        __syncthreads();
        const int i = tile + r * SORT_THREADS + threadIdx.x;
        const bool valid = i < n;
        const unsigned long long key = valid ? keys_in[i] : 0ull;
        const unsigned int d = valid ? static_cast<unsigned int>(key >> shift) & (RADIX - 1) : RADIX;
        const unsigned int peers = __match_any_sync(0xffffffffu, d);
        const unsigned int rank = __popc(peers & ((1u << lane) - 1u));
        if (valid && lane == __ffs(peers) - 1) {
            counts[warp][d] = __popc(peers);
        }
        __syncthreads();
        if (valid) {
            unsigned int at = base[d] + rank;
            for (int w = 0; w < warp; ++w) {
                at += counts[w][d];
            }
            keys_out[at] = key;
            idx_out[at] = idx_in[i];
        }
        __syncthreads();
        unsigned int add = 0;
        for (int w = 0; w < SORT_THREADS / 32; ++w) {
            add += counts[w][threadIdx.x];
        }
        base[threadIdx.x] += add;
        __syncthreads();
    }
}

// sorted[i] = pos[idx[i]] for every i < n, and internal node i < n - 1 of the radix tree (Karras
// 2012, algorithm 2): its children child[i] = (left, right), their parent[] entries and its
// bodies range[i] = (first, last) (sorted indices, inclusive); parent[0] = -1. One thread per
// sorted body.
extern "C" __global__ void __launch_bounds__(1024)
    nbody_tree_build(const float4* __restrict__ pos, int n, const unsigned long long* __restrict__ keys,
                     const unsigned int* __restrict__ idx, float4* __restrict__ sorted, int2* __restrict__ child,
                     int* __restrict__ parent, int2* __restrict__ range) {
    using nbody::tree::common_prefix;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    sorted[i] = pos[idx[i]];
    if (i == 0) {
        parent[0] = -1;
    }
    if (i >= n - 1) {
        return;
    }
    const int d = common_prefix(keys, n, i, i + 1) > common_prefix(keys, n, i, i - 1) ? 1 : -1;
    const int dmin = common_prefix(keys, n, i, i - d);
    int lmax = 2;
    while (common_prefix(keys, n, i, i + lmax * d) > dmin) {
        lmax <<= 1;
    }
    int l = 0;
    for (int t = lmax >> 1; t >= 1; t >>= 1) {
        if (common_prefix(keys, n, i, i + (l + t) * d) > dmin) {
            l += t;
        }
    }
    const int j = i + l * d;
    const int dnode = common_prefix(keys, n, i, j);
    int s = 0;
    int t = l;
    do {
        t = (t + 1) >> 1;
        if (common_prefix(keys, n, i, i + (s + t) * d) > dnode) {
            s += t;
        }
    } while (t > 1);
    const int gamma = i + s * d + min(d, 0);
    const int left = min(i, j) == gamma ? n - 1 + gamma : gamma;
    const int right = max(i, j) == gamma + 1 ? n - 1 + gamma + 1 : gamma + 1;
    child[i] = make_int2(left, right);
    range[i] = make_int2(min(i, j), max(i, j));
    parent[left] = i;
    parent[right] = i;
}

// The walk's groups: the largest subtrees of at most 32 bodies (a node of <= 32 bodies whose
// parent has more; with n <= 32 the root), each a run of sorted bodies inside one key prefix's
// cell, so spatially compact (Bonsai's groups; 32 consecutive sorted bodies may straddle a jump
// of the Morton curve and span the whole system). groups[k] = (first, count), k < header[13].
// One thread per internal node (grid ceil(max(n - 1, 1) / B)).
extern "C" __global__ void __launch_bounds__(1024)
    nbody_tree_groups(int n, const int2* __restrict__ child, const int2* __restrict__ range, int2* __restrict__ groups,
                      unsigned int* __restrict__ header) {
    using namespace nbody::tree;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (n <= GROUP_MAX) {
        if (i == 0) {
            groups[0] = make_int2(0, n);
            header[HDR_GROUPS] = 1u;
        }
        return;
    }
    if (i >= n - 1) {
        return;
    }
    const int2 ch = child[i];
    const int kids[2] = {ch.x, ch.y};
#pragma unroll
    for (int k = 0; k < 2; ++k) {
        const int c = kids[k];
        int2 run;
        if (c >= n - 1) {
            run = make_int2(c - (n - 1), 1);
        } else {
            const int2 r = range[c];
            run = make_int2(r.x, r.y - r.x + 1);
        }
        const int2 own = range[i];
        if (own.y - own.x + 1 > GROUP_MAX && run.y <= GROUP_MAX) {
            groups[atomicAdd(&header[HDR_GROUPS], 1u)] = run;
        }
    }
}

// The moments, from the leaves up: thread k starts at leaf k's parent; at each node the first
// thread to arrive (counters[node], zeroed before the step) stops, the second combines the two
// children (both written and fenced by then) and goes on to the parent. One thread per body.
extern "C" __global__ void __launch_bounds__(256)
    nbody_tree_moments(int n, const float4* __restrict__ sorted, const int2* __restrict__ child,
                       const int* __restrict__ parent, unsigned int* counters, float4* com, float4* quad,
                       float4* quad2, float4* box_lo, float4* box_hi) {
    using namespace nbody::tree;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n || n < 2) {
        return;
    }
    int node = parent[n - 1 + k];
    while (node >= 0) {
        __threadfence();
        if (atomicAdd(&counters[node], 1u) == 0u) {
            return;
        }
        __threadfence();
        const int2 ch = child[node];
        const Cell a = load_cell(ch.x, n, sorted, com, quad, quad2, box_lo, box_hi);
        const Cell b = load_cell(ch.y, n, sorted, com, quad, quad2, box_lo, box_hi);
        const float m = a.com.w + b.com.w;
        float3 c;
        if (m != 0.0f) {
            const float wa = a.com.w / m;
            const float wb = b.com.w / m;
            c = make_float3(wa * a.com.x + wb * b.com.x, wa * a.com.y + wb * b.com.y, wa * a.com.z + wb * b.com.z);
        } else {
            c = make_float3(0.5f * (a.com.x + b.com.x), 0.5f * (a.com.y + b.com.y), 0.5f * (a.com.z + b.com.z));
        }
        float q[6] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        float spread = 0.0f;
        add_shifted(a, c, q, spread);
        add_shifted(b, c, q, spread);
        const float3 lo = make_float3(fminf(a.lo.x, b.lo.x), fminf(a.lo.y, b.lo.y), fminf(a.lo.z, b.lo.z));
        const float3 hi = make_float3(fmaxf(a.hi.x, b.hi.x), fmaxf(a.hi.y, b.hi.y), fmaxf(a.hi.z, b.hi.z));
        const float side = fmaxf(fmaxf(hi.x - lo.x, hi.y - lo.y), hi.z - lo.z);
        com[node] = make_float4(c.x, c.y, c.z, m);
        quad[node] = make_float4(q[0], q[1], q[2], q[3]);
        quad2[node] = make_float4(q[4], q[5], spread, side);
        box_lo[node] = make_float4(lo.x, lo.y, lo.z, 0.0f);
        box_hi[node] = make_float4(hi.x, hi.y, hi.z, 0.0f);
        node = parent[node];
    }
}

namespace nbody {
namespace tree {

// The tree as the walk reads it (nbody_tree_walk's parameters).
struct TreeView {
    const float4* __restrict__ sorted;
    const unsigned int* __restrict__ idx;
    const int2* __restrict__ child;
    const float4* __restrict__ com;
    const float4* __restrict__ quad;
    const float4* __restrict__ quad2;
    const float4* __restrict__ box_lo;
    const float4* __restrict__ box_hi;
    int n;
};

// The walk of the group of sorted bodies [first, first + bodies) (bodies <= 32) by one warp with
// its stack and its interaction-list slots `list` (shared memory). Returns each lane's
// acceleration sum (without G) for body first + lane (lanes past the group: meaningless); adds to `count` the terms (per body), raises `deepest` to the largest
// stack size and sets `overflow` when the stack overflowed.
__device__ __forceinline__ float3 walk_group(const TreeView& t, const int first, const int bodies, const int lane, int* __restrict__ stack,
                                             float4 (*list)[3], const float eps2, const float theta,
                                             unsigned long long& count, int& deepest, bool& overflow) {
    const int n = t.n;
    const float4 self = t.sorted[lane < bodies ? first + lane : first];
    const float3 xi = make_float3(self.x, self.y, self.z);
    const float3 glo = make_float3(warp_min(xi.x), warp_min(xi.y), warp_min(xi.z));
    const float3 ghi = make_float3(warp_max(xi.x), warp_max(xi.y), warp_max(xi.z));
    const float theta2 = theta * theta;
    const unsigned int lower = (1u << lane) - 1u;
    if (lane == 0) {
        stack[0] = 0;
    }
    __syncwarp();
    int size = 1;
    float3 a = make_float3(0.0f, 0.0f, 0.0f);
    while (size > 0) {
        const int k = size <= BATCH_MAX ? min(32, size) : 1;
        const int node = lane < k ? stack[size - k + lane] : -1;
        size -= k;
        __syncwarp();
        bool open = false;
        float4 c = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        float4 q = c;
        float4 r = c;
        int2 ch = make_int2(0, 0);
        if (node >= n - 1) {
            c = t.sorted[node - (n - 1)];
        } else if (node >= 0) {
            c = t.com[node];
            r = t.quad2[node];
            const float4 lo = t.box_lo[node];
            const float4 hi = t.box_hi[node];
            const bool meets = lo.x <= ghi.x && lo.y <= ghi.y && lo.z <= ghi.z && hi.x >= glo.x && hi.y >= glo.y && hi.z >= glo.z;
            const float dx = fmaxf(fmaxf(glo.x - c.x, c.x - ghi.x), 0.0f);
            const float dy = fmaxf(fmaxf(glo.y - c.y, c.y - ghi.y), 0.0f);
            const float dz = fmaxf(fmaxf(glo.z - c.z, c.z - ghi.z), 0.0f);
            open = meets || r.w * r.w >= theta2 * (dx * dx + dy * dy + dz * dz);
            if (open) {
                ch = t.child[node];
            } else {
                q = t.quad[node];
            }
        }
        const unsigned int opened = __ballot_sync(0xffffffffu, open);
        const unsigned int accepted = __ballot_sync(0xffffffffu, node >= 0 && !open);
        const int pushes = 2 * __popc(opened);
        if (size + pushes > STACK) {
            overflow = true;
            break;
        }
        if (open) {
            const int at = size + 2 * __popc(opened & lower);
            stack[at] = ch.x;
            stack[at + 1] = ch.y;
        }
        size += pushes;
        deepest = max(deepest, size);
        const int terms = __popc(accepted);
        count += terms;
        if (node >= 0 && !open) {
            const int at = __popc(accepted & lower);
            list[at][0] = c;
            list[at][1] = q;
            list[at][2] = r;
        }
        __syncwarp();
        for (int j = 0; j < terms; ++j) {
            cell_term(list[j][0], list[j][1], list[j][2], xi, eps2, a);
        }
        __syncwarp();
    }
    return a;
}

}  // namespace tree
}  // namespace nbody

// The walk and the leapfrog: persistent warps (any grid of 256-thread blocks; warp w of block b
// owns stacks[(b * 8 + w) * 4096 ..], so stacks holds gridDim.x * 8 * 4096 ints) take the groups
// of nbody_tree_groups in turn, k = atomicAdd(header[11], 1), until none is left. A node is
// opened when its box meets the group's box or side >= theta * (distance from its centre of mass
// to the group's box); leaves are never opened. Each body's acceleration sum a updates it at index
// idx[i]: vel += a g kick, pos_out = pos_in + vel dt_drift (as nbody_step_*). Adds the
// interactions to the header; sets its overflow word if a stack overflowed (the group's sums are
// then incomplete).
extern "C" __global__ void __launch_bounds__(256)
    nbody_tree_walk(const float4* __restrict__ pos_in, float4* __restrict__ pos_out, float4* __restrict__ vel, int n,
                    float dt_drift, float kick, float eps2, float g, float theta, const float4* __restrict__ sorted,
                    const unsigned int* __restrict__ idx, const int2* __restrict__ child, const float4* __restrict__ com,
                    const float4* __restrict__ quad, const float4* __restrict__ quad2, const float4* __restrict__ box_lo,
                    const float4* __restrict__ box_hi, unsigned int* __restrict__ header, int* __restrict__ stacks,
                    const int2* __restrict__ groups) {
    using namespace nbody::tree;
    // Each warp's interaction list of one batch: the accepted nodes' com, quad, quad2.
    __shared__ float4 lists[WALK_WARPS][32][3];
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    int* stack = stacks + static_cast<long long>(blockIdx.x * WALK_WARPS + warp) * STACK;
    const TreeView t{sorted, idx, child, com, quad, quad2, box_lo, box_hi, n};
    const int count_of_groups = static_cast<int>(header[HDR_GROUPS]);
    unsigned long long count = 0;
    int deepest = 0;
    bool overflow = false;
    for (;;) {
        int group = 0;
        if (lane == 0) {
            group = static_cast<int>(atomicAdd(&header[HDR_NEXT_GROUP], 1u));
        }
        group = __shfl_sync(0xffffffffu, group, 0);
        if (group >= count_of_groups) {
            break;
        }
        const int2 run = groups[group];
        unsigned long long terms = 0;
        const float3 a = walk_group(t, run.x, run.y, lane, stack, lists[warp], eps2, theta, terms, deepest, overflow);
        count += terms * static_cast<unsigned long long>(run.y);
        const int b = run.x + lane;
        if (lane < run.y) {
            nbody::update(pos_in, pos_out, vel, static_cast<int>(idx[b]), a, g * kick, dt_drift);
        }
    }
    if (lane == 0) {
        atomicAdd(reinterpret_cast<unsigned long long*>(header + HDR_INTERACTIONS), count);
        atomicMax(&header[HDR_MAX_STACK], static_cast<unsigned int>(deepest));
        if (overflow) {
            atomicOr(&header[HDR_OVERFLOW], 1u);
        }
    }
}
