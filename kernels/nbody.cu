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
