//! Conserved quantities (energy, linear and angular momentum) in float64.
//!
//! [`diagnostics`] does the O(N²) potential on the CPU (rayon over bodies `i`); [`from_parts`]
//! finishes the job from per-body potentials φ computed elsewhere (the CUDA `nbody_potential`
//! kernel), so only O(N) work is left on the host.

use rayon::prelude::*;

use super::{Bodies, Diagnostics, PhysParams};

/// Energy and momenta of `bodies` in float64.
///
/// Kinetic `Σ ½ m v²`; potential `−G Σ_{i<j} m_i m_j / sqrt(r² + ε²)` with `G = params.g` and
/// `ε = params.softening` (the softened potential whose gradient the integrator uses, so the total
/// is the quantity the leapfrog conserves); pairs with `r² + ε² = 0` (coincident bodies with
/// ε = 0) are skipped. Momentum `Σ m v`, angular momentum `Σ m x × v` about the origin.
/// The velocities must be synchronised (as every [`Bodies`] handed out by a backend is).
/// Bodies beyond `min(pos.len(), vel.len())` are ignored. The pair sum is parallel over `i`.
pub fn diagnostics(bodies: &Bodies, params: PhysParams) -> Diagnostics {
    let n = bodies.pos.len().min(bodies.vel.len());
    let pos: Vec<[f64; 4]> = bodies.pos[..n].iter().map(|p| p.map(f64::from)).collect();
    let eps2 = f64::from(params.softening) * f64::from(params.softening);
    let pair_sum: f64 = (0..n)
        .into_par_iter()
        .map(|i| {
            let pi = pos[i];
            let mut s = 0.0;
            for pj in &pos[i + 1..] {
                let (dx, dy, dz) = (pj[0] - pi[0], pj[1] - pi[1], pj[2] - pi[2]);
                let r2 = dx * dx + dy * dy + dz * dz + eps2;
                if r2 > 0.0 {
                    s += pj[3] / r2.sqrt();
                }
            }
            pi[3] * s
        })
        .sum();
    let potential = -f64::from(params.g) * pair_sum;
    with_potential(&bodies.pos[..n], &bodies.vel[..n], potential)
}

/// Diagnostics from per-body potentials computed on the GPU.
///
/// `pos` `[N][4]` (x, y, z, mass) and `vel` `[N][4]` (vx, vy, vz, ·) are the synchronised state;
/// `phi[i] = −Σ_{j≠i} m_j / sqrt(r_ij² + ε²)` (without G, as the `nbody_potential` kernel writes
/// it, `[N]` f32). The potential energy is `½ G Σ_i m_i φ_i` (each pair counted twice in Σ_i).
/// Only the first `min(pos.len(), vel.len(), phi.len())` bodies are used.
pub fn from_parts(pos: &[[f32; 4]], vel: &[[f32; 4]], phi: &[f32], g: f64) -> Diagnostics {
    let n = pos.len().min(vel.len()).min(phi.len());
    let sum: f64 = pos[..n].iter().zip(&phi[..n]).map(|(p, &f)| f64::from(p[3]) * f64::from(f)).sum();
    with_potential(&pos[..n], &vel[..n], 0.5 * g * sum)
}

/// Per-body potentials `φ_i = −Σ_{j≠i} m_j / sqrt(r_ij² + ε²)` (without G) in float64: the CPU
/// reference of the `nbody_potential` kernel.
///
/// `pos` is `[N][4]` (x, y, z, mass); returns `[N]`. Pairs with `r² + ε² = 0` are skipped.
pub fn potentials_f64(pos: &[[f32; 4]], eps: f64) -> Vec<f64> {
    let p: Vec<[f64; 4]> = pos.iter().map(|q| q.map(f64::from)).collect();
    let eps2 = eps * eps;
    (0..p.len())
        .into_par_iter()
        .map(|i| {
            let pi = p[i];
            let mut s = 0.0;
            for (j, pj) in p.iter().enumerate() {
                let (dx, dy, dz) = (pj[0] - pi[0], pj[1] - pi[1], pj[2] - pi[2]);
                let r2 = dx * dx + dy * dy + dz * dz + eps2;
                if j != i && r2 > 0.0 {
                    s += pj[3] / r2.sqrt();
                }
            }
            -s
        })
        .collect()
}

/// The O(N) part: kinetic energy and momenta, combined with a given potential energy.
fn with_potential(pos: &[[f32; 4]], vel: &[[f32; 4]], potential: f64) -> Diagnostics {
    let mut kinetic = 0.0;
    let mut momentum = [0.0; 3];
    let mut angular_momentum = [0.0; 3];
    for (p, v) in pos.iter().zip(vel) {
        let m = f64::from(p[3]);
        let x = [p[0], p[1], p[2]].map(f64::from);
        let v = [v[0], v[1], v[2]].map(f64::from);
        kinetic += 0.5 * m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        for k in 0..3 {
            momentum[k] += m * v[k];
        }
        angular_momentum[0] += m * (x[1] * v[2] - x[2] * v[1]);
        angular_momentum[1] += m * (x[2] * v[0] - x[0] * v[2]);
        angular_momentum[2] += m * (x[0] * v[1] - x[1] * v[0]);
    }
    Diagnostics { kinetic, potential, total: kinetic + potential, momentum, angular_momentum }
}
