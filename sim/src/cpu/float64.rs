//! [`CpuF64`]: the float64 CPU backend, the reference of the tests.

use super::{accelerations_range, for_chunks, Sources, CHUNK};
use crate::{Bodies, Leapfrog, PhysParams};

/// Float64 CPU backend: the reference of the tests (same integrator as [`super::CpuF32`] and the kernel),
/// parallel over bodies `i` with rayon.
///
/// Holds positions `[N][3]`, velocities `[N][3]` and masses `[N]` in f64, converted from the f32
/// [`Bodies`] it starts from.
#[derive(Debug, Clone)]
pub struct CpuF64 {
    pos: Vec<[f64; 3]>,
    vel: Vec<[f64; 3]>,
    mass: Vec<f64>,
    params: PhysParams,
    leap: Leapfrog,
    src: Sources<f64>,
}

impl CpuF64 {
    /// A backend holding `bodies` converted to f64 (taken as synchronised), stepping with `params`
    /// (converted to f64 for every step).
    ///
    /// Velocities missing from `bodies.vel` (a shorter vector) are taken as 0.
    pub fn new(bodies: &Bodies, params: PhysParams) -> Self {
        let pos = bodies.pos.iter().map(|p| [p[0], p[1], p[2]].map(f64::from)).collect();
        let mass = bodies.pos.iter().map(|p| f64::from(p[3])).collect();
        let mut vel: Vec<[f64; 3]> = bodies.vel.iter().map(|v| [v[0], v[1], v[2]].map(f64::from)).collect();
        vel.resize(bodies.pos.len(), [0.0; 3]);
        Self { pos, vel, mass, params, leap: Leapfrog { synchronized: true }, src: Sources::default() }
    }

    /// A backend from float64 state: positions `[N][3]`, velocities `[N][3]`, masses `[N]`.
    /// The shortest of the three sets N.
    pub fn from_f64(pos: &[[f64; 3]], vel: &[[f64; 3]], mass: &[f64], params: PhysParams) -> Self {
        let n = pos.len().min(vel.len()).min(mass.len());
        Self {
            pos: pos[..n].to_vec(),
            vel: vel[..n].to_vec(),
            mass: mass[..n].to_vec(),
            params,
            leap: Leapfrog { synchronized: true },
            src: Sources::default(),
        }
    }

    /// Advance `steps` leapfrog steps (one force evaluation each).
    pub fn step(&mut self, steps: u32) {
        for _ in 0..steps {
            // Halving an f32 is exact, so the f64 kick is the same as halving in f64.
            let (drift, kick) = self.leap.next_step(self.params.dt);
            self.kick_drift(f64::from(kick), f64::from(drift));
        }
    }

    /// Apply the closing half kick `v += a(x) * dt/2` if the velocities lag the positions.
    pub fn synchronize(&mut self) {
        if let Some((drift, kick)) = self.leap.sync_step(self.params.dt) {
            self.kick_drift(f64::from(kick), f64::from(drift));
        }
    }

    /// True when the velocities are synchronised with the positions.
    pub fn is_synchronized(&self) -> bool {
        self.leap.synchronized
    }

    /// Current positions rounded to f32, `[N][4]` (x, y, z, mass).
    pub fn positions(&self) -> Vec<[f32; 4]> {
        self.pos.iter().zip(&self.mass).map(|(p, &m)| [p[0] as f32, p[1] as f32, p[2] as f32, m as f32]).collect()
    }

    /// Current positions in f64, `[N][3]`.
    pub fn pos_f64(&self) -> &[[f64; 3]] {
        &self.pos
    }

    /// Current velocities in f64, `[N][3]`; half a step behind the positions unless
    /// [`CpuF64::is_synchronized`].
    pub fn vel_f64(&self) -> &[[f64; 3]] {
        &self.vel
    }

    /// Masses in f64, `[N]`.
    pub fn masses(&self) -> &[f64] {
        &self.mass
    }

    /// The state with synchronised velocities, rounded to f32 (applies the half kick if needed).
    pub fn bodies(&mut self) -> Bodies {
        self.synchronize();
        let pos = self.positions();
        let vel = self.vel.iter().map(|v| [v[0] as f32, v[1] as f32, v[2] as f32, 0.0]).collect();
        Bodies { pos, vel }
    }

    /// The physical parameters in use.
    pub fn params(&self) -> PhysParams {
        self.params
    }

    /// Use `params` for the following steps; synchronises first when they differ from the current
    /// ones (see [`super::CpuF32::set_params`]).
    pub fn set_params(&mut self, params: PhysParams) {
        if params != self.params {
            self.synchronize();
            self.params = params;
        }
    }

    /// Number of bodies N.
    pub fn len(&self) -> usize {
        self.pos.len()
    }

    /// True when there are no bodies.
    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }

    fn kick_drift(&mut self, kick: f64, drift: f64) {
        self.src.load(self.pos.iter().zip(&self.mass).map(|(p, &m)| [p[0], p[1], p[2], m]));
        let (src, g, eps) = (&self.src, f64::from(self.params.g), f64::from(self.params.softening));
        for_chunks(&mut self.pos, &mut self.vel, |c, pos, vel| {
            let mut acc = [[0.0f64; 3]; CHUNK];
            let acc = &mut acc[..pos.len()];
            accelerations_range(src, g, eps * eps, c * CHUNK, acc);
            for ((p, v), a) in pos.iter_mut().zip(vel.iter_mut()).zip(acc.iter()) {
                for k in 0..3 {
                    v[k] += a[k] * kick;
                    p[k] += v[k] * drift;
                }
            }
        });
    }
}
