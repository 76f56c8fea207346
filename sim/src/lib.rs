//! Simulation: body state, physical parameters, the leapfrog convention shared by every backend,
//! initial conditions, state files and diagnostics.
//!
//! # Integrator (shared by the CUDA kernel and both CPU backends)
//! Symplectic leapfrog in kick-drift-kick form. Consecutive KDK steps share their half kicks, so a
//! run of steps is computed as one force evaluation per step:
//!
//! ```text
//! a_n       = a(x_n)                        (one all-pairs force evaluation)
//! v        += a_n * kick                    (kick = dt/2 on the first step after a sync, else dt)
//! x_{n+1}   = x_n + v * dt                  (drift)
//! ```
//! After such a run the velocities lag the positions by half a step. [`Bodies`] handed out by a
//! backend are always *synchronised*: the backend finishes with a half kick `v += a(x_n) * dt/2`
//! (a force evaluation with drift 0) before it returns velocities. This is exactly KDK.
//!
//! Acceleration with Plummer softening ε (GPU Gems 3, ch. 31, eq. 3):
//! `a_i = G Σ_j m_j (x_j − x_i) / (|x_j − x_i|² + ε²)^{3/2}`; with ε = 0 the term j = i is skipped
//! (it is 0/0 otherwise).

pub mod cpu;
pub mod diagnostics;
pub mod file_io;

pub mod init;
pub mod partial;
pub mod state_csv;
pub mod tipsy;
pub mod tree;

use serde::Serialize;

/// Body state of N bodies in the kernel's layout.
///
/// `pos[i] = [x, y, z, mass]`, `vel[i] = [vx, vy, vz, 0]` (f32, `[N][4]`, user units; G sets the
/// unit system). Velocities are synchronised with the positions (see the module docs).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bodies {
    /// Positions and masses, `[N][4]`: x, y, z, mass.
    pub pos: Vec<[f32; 4]>,
    /// Velocities, `[N][4]`: vx, vy, vz, 0.
    pub vel: Vec<[f32; 4]>,
}

impl Bodies {
    /// Number of bodies N.
    pub fn len(&self) -> usize {
        self.pos.len()
    }
    /// True when there are no bodies.
    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }
    /// True when every position, mass and velocity is finite (no NaN, no ±∞): the state has not
    /// diverged.
    pub fn is_finite(&self) -> bool {
        self.pos.iter().chain(&self.vel).all(|v| v.iter().all(|x| x.is_finite()))
    }
}

/// Write a state file: a tipsy snapshot when `path` ends in `.tipsy`, `.std` or `.bin`
/// ([`tipsy::write_tipsy`], little-endian, `time` and `softening` in the header and records), else
/// CSV ([`state_csv::write_state`]). Either reads back with `--init` to the same positions,
/// masses and velocities, bit for bit (the unused fourth velocity component is 0 either way).
/// The file appears whole or not at all ([`file_io::OutputFile`]): an interrupted or failed write
/// leaves what was at `path` before.
///
/// # Errors
/// The file cannot be created or written (the message names it, the cause and the remedy), or
/// too many bodies for a tipsy header.
pub fn write_state_file(path: &std::path::Path, bodies: &Bodies, time: f64, softening: f32) -> Result<(), WriteStateError> {
    if tipsy::has_tipsy_extension(path) {
        tipsy::write_tipsy(path, bodies, time, softening)?;
    } else {
        state_csv::write_state(path, bodies)?;
    }
    Ok(())
}

/// Why [`write_state_file`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum WriteStateError {
    /// The tipsy snapshot could not be written.
    #[error(transparent)]
    Tipsy(#[from] tipsy::TipsyError),
    /// The CSV state file could not be written.
    #[error(transparent)]
    Csv(#[from] state_csv::StateFileError),
}

/// Physical parameters of a step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PhysParams {
    /// Gravitational constant G (1 in N-body units).
    pub g: f32,
    /// Time step dt (time units).
    pub dt: f32,
    /// Softening length ε (length units); 0 means exact Newtonian gravity.
    pub softening: f32,
}

impl Default for PhysParams {
    fn default() -> Self {
        Self { g: 1.0, dt: 0.001, softening: 0.01 }
    }
}

/// Conserved quantities of a state, computed in float64.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Diagnostics {
    /// Kinetic energy Σ ½ m v².
    pub kinetic: f64,
    /// Potential energy −G Σ_{i<j} m_i m_j / sqrt(r² + ε²).
    pub potential: f64,
    /// Total energy (kinetic + potential).
    pub total: f64,
    /// Linear momentum Σ m v.
    pub momentum: [f64; 3],
    /// Angular momentum Σ m x × v (about the origin).
    pub angular_momentum: [f64; 3],
}

/// Leapfrog bookkeeping shared by every backend: which kick the next step needs (see the module
/// docs: dt/2 on the first step after a synchronisation, then dt; a half kick with drift 0
/// synchronises).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leapfrog {
    /// Velocities are at the same time as the positions.
    pub synchronized: bool,
}

impl Leapfrog {
    /// `(dt_drift, kick)` of the next step, and marks the state unsynchronised.
    pub fn next_step(&mut self, dt: f32) -> (f32, f32) {
        let kick = if self.synchronized { 0.5 * dt } else { dt };
        self.synchronized = false;
        (dt, kick)
    }
    /// `(dt_drift, kick)` of the synchronising half kick, if one is needed; marks the state synchronised.
    pub fn sync_step(&mut self, dt: f32) -> Option<(f32, f32)> {
        if self.synchronized {
            None
        } else {
            self.synchronized = true;
            Some((0.0, 0.5 * dt))
        }
    }
}

/// Work counted for one frame: `N² × steps` pairwise interactions.
pub fn interactions(n: usize, steps: u32) -> f64 {
    (n as f64) * (n as f64) * f64::from(steps)
}

/// Flops per interaction by the convention of GPU Gems 3 ch. 31 and NVIDIA's nbody sample.
pub const FLOPS_PER_INTERACTION: f64 = 20.0;
