//! Seeded, reproducible initial conditions.
//!
//! Every generator draws from `rand_pcg::Pcg64` seeded with the run's `u64` seed, in f64, and
//! rounds to the f32 [`Bodies`] at the end, so a (name, N, seed, G) quadruple always gives the same
//! bits. The generated systems are built for G = 1 (N-body units) and their velocities scaled by
//! `sqrt(G)` for another G, which keeps every orbit's shape (only the time unit changes).

use std::f64::consts::PI;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use super::file_io::{check_regular, never, ReadLimits, SourceError};
use super::state_csv::{read_state_with, StateFileError};
use super::tipsy::{has_tipsy_extension, looks_like_tipsy, read_tipsy_with, TipsyError};
use super::Bodies;

/// The names [`InitialCondition::parse`] accepts besides a `.csv` or tipsy path.
pub const NAMES: [&str; 4] = ["plummer", "galaxies", "ball", "figure-eight"];

/// Period of the figure-eight choreography for the initial conditions of
/// [`InitialCondition::FigureEight`] (G = 1, unit masses), from Simó (2002) and Chenciner &
/// Montgomery (2000): T ≈ 6.32591398.
pub const FIGURE_EIGHT_PERIOD: f64 = 6.325_913_985;

/// An initial condition of the simulation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitialCondition {
    /// Plummer (1911) sphere in N-body (Hénon) units: total mass 1, G = 1, total energy −1/4,
    /// virial radius 1, in virial equilibrium; sampled as Aarseth, Hénon & Wielen (1974), with
    /// the radii truncated at 99.9 % of the mass; centre of mass and momentum removed.
    Plummer,
    /// Two colliding disk galaxies of mass ½ each: a heavy central body (60 % of the galaxy's
    /// mass) and a disk of light bodies (radii 0.1–1, surface density ∝ 1/r) on circular orbits,
    /// the two disks tilted against each other and falling together on a parabolic orbit with
    /// pericentre ≈ 0.43 from a separation of 5.2. N is split as evenly as possible between the two.
    Galaxies,
    /// Uniform ball of radius 1 and total mass 1, cold except for a slow solid-body rotation
    /// about z with T_rot/|W| = 0.05.
    UniformBall,
    /// Figure-eight three-body choreography (Chenciner & Montgomery 2000) with Simó's initial
    /// conditions: x₁ = −x₂ = (0.97000436, −0.24308753, 0), x₃ = 0,
    /// v₃ = (−0.93240737, −0.86473146, 0), v₁ = v₂ = −v₃/2, unit masses; period
    /// [`FIGURE_EIGHT_PERIOD`] for G = 1. Always 3 bodies.
    FigureEight,
    /// A state file read with [`read_state_with`]; fixes N itself.
    Csv(PathBuf),
    /// A tipsy snapshot read with [`read_tipsy_with`] (either byte order); fixes N itself.
    Tipsy(PathBuf),
}

/// Why an initial condition could not be made.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The name is neither a known initial condition, nor a `.csv` path, nor an existing file.
    #[error(
        "unknown initial condition `{0}` (and not a file); valid: plummer, galaxies, ball, figure-eight, \
         the path of a CSV file (header x,y,z,vx,vy,vz,mass) or of a tipsy snapshot (.tipsy, .std, .bin)"
    )]
    UnknownName(String),
    /// A generated initial condition was asked for N = 0 bodies.
    #[error("the `{0}` initial condition needs at least 1 body, got N = 0; ask for 1 or more bodies")]
    NoBodies(String),
    /// G is not a finite positive number, so velocities cannot be scaled by sqrt(G).
    #[error("gravitational constant G = {0} must be finite and > 0 for generated initial conditions")]
    BadG(f32),
    /// The CSV state file could not be read.
    #[error(transparent)]
    State(#[from] StateFileError),
    /// The tipsy snapshot could not be read.
    #[error(transparent)]
    Tipsy(#[from] TipsyError),
    /// The path names a device, a pipe or a socket, not a state file.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// `--init` names nothing that can be read; the cause follows.
    #[error("--init {init}")]
    Named {
        /// What `--init` said.
        init: String,
        /// Why it cannot be read.
        #[source]
        source: Box<InitError>,
    },
    /// A generated initial condition failed; the cause follows.
    #[error("generating the `{name}` initial condition")]
    Generating {
        /// The initial condition's name.
        name: String,
        /// Why it failed.
        #[source]
        source: Box<InitError>,
    },
    /// The initial condition holds no bodies (an empty state file).
    #[error("the initial condition `{0}` has no bodies")]
    Empty(String),
}

impl InitError {
    /// True when a file's read was stopped by its "stop requested" callback (an interrupt):
    /// [`SourceError::Interrupted`] in any format, here or in the cause it wraps.
    pub fn is_interrupted(&self) -> bool {
        match self {
            InitError::Named { source, .. } | InitError::Generating { source, .. } => source.is_interrupted(),
            e => matches!(
                e,
                InitError::State(StateFileError::Source(SourceError::Interrupted { .. }))
                    | InitError::Tipsy(TipsyError::Source(SourceError::Interrupted { .. }))
            ),
        }
    }
}

impl InitialCondition {
    /// Parse a name (`plummer`, `galaxies`, `ball`, `figure-eight`), a path ending in `.csv`
    /// or in `.tipsy`, `.std`, `.bin` (any case; it need not exist yet, reading it reports that),
    /// or the path of an existing regular file with another name: a tipsy snapshot when it starts
    /// with a valid tipsy header that matches its size (only the header is read), else CSV.
    /// Surrounding whitespace is ignored.
    ///
    /// # Errors
    /// [`InitError::UnknownName`], listing the valid names; [`InitError::Source`] for a device,
    /// pipe or socket (named by its type, without opening it).
    pub fn parse(s: &str) -> Result<Self, InitError> {
        let t = s.trim();
        let path = std::path::Path::new(t);
        match t {
            "plummer" => Ok(Self::Plummer),
            "galaxies" => Ok(Self::Galaxies),
            "ball" => Ok(Self::UniformBall),
            "figure-eight" => Ok(Self::FigureEight),
            _ if t.len() > 4 && t.to_ascii_lowercase().ends_with(".csv") => Ok(Self::Csv(PathBuf::from(t))),
            _ if has_tipsy_extension(path) => Ok(Self::Tipsy(PathBuf::from(t))),
            // A directory is no initial condition's name and no file of bodies.
            _ if path.is_dir() => Err(InitError::UnknownName(t.to_owned())),
            _ => match check_regular(path) {
                Ok(_) if looks_like_tipsy(path) => Ok(Self::Tipsy(PathBuf::from(t))),
                Ok(_) => Ok(Self::Csv(PathBuf::from(t))),
                Err(Ok(special)) => Err(InitError::Source(special)),
                Err(Err(_)) => Err(InitError::UnknownName(t.to_owned())),
            },
        }
    }

    /// The name as [`InitialCondition::parse`] accepts it (the path for file input).
    pub fn name(&self) -> String {
        match self {
            Self::Plummer => NAMES[0].to_owned(),
            Self::Galaxies => NAMES[1].to_owned(),
            Self::UniformBall => NAMES[2].to_owned(),
            Self::FigureEight => NAMES[3].to_owned(),
            Self::Csv(path) | Self::Tipsy(path) => path.display().to_string(),
        }
    }

    /// Generate the bodies: `n` bodies for Plummer, galaxies and ball (figure-eight always has 3,
    /// file input as many as the file), from `seed`, with velocities for gravitational constant `g`.
    ///
    /// A file is read within this machine's limits ([`ReadLimits::this_machine`]), without an
    /// interrupt ([`InitialCondition::generate_with`] takes both).
    ///
    /// # Errors
    /// [`InitError::NoBodies`] for `n = 0` with a generated condition that uses `n`;
    /// [`InitError::BadG`] when `g` is not finite and > 0; [`InitError::State`] for CSV input,
    /// [`InitError::Tipsy`] for tipsy input.
    pub fn generate(&self, n: usize, seed: u64, g: f32) -> Result<Bodies, InitError> {
        self.generate_with(n, seed, g, &ReadLimits::this_machine(&never))
    }

    /// [`InitialCondition::generate`], reading a file within `limits` (bodies, and the "stop
    /// requested" callback that ends the read on an interrupt).
    ///
    /// # Errors
    /// As [`InitialCondition::generate`]; a file read stopped by `limits.stop` is
    /// [`SourceError::Interrupted`] (in [`InitError::State`] or [`InitError::Tipsy`]).
    pub fn generate_with(&self, n: usize, seed: u64, g: f32, limits: &ReadLimits) -> Result<Bodies, InitError> {
        let make: fn(usize, &mut Pcg64) -> System = match self {
            Self::Csv(path) => return Ok(read_state_with(path, limits)?),
            Self::Tipsy(path) => return Ok(read_tipsy_with(path, limits)?),
            Self::FigureEight => |_, _| figure_eight(),
            Self::Plummer => plummer,
            Self::Galaxies => galaxies,
            Self::UniformBall => uniform_ball,
        };
        if n == 0 && *self != Self::FigureEight {
            return Err(InitError::NoBodies(self.name()));
        }
        if !(g.is_finite() && g > 0.0) {
            return Err(InitError::BadG(g));
        }
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut sys = make(n, &mut rng);
        sys.shift_to_centre_of_mass();
        Ok(sys.into_bodies(f64::from(g).sqrt()))
    }
}

impl FromStr for InitialCondition {
    type Err = InitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for InitialCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A system in f64 under construction (G = 1).
#[derive(Debug, Default)]
struct System {
    pos: Vec<[f64; 3]>,
    vel: Vec<[f64; 3]>,
    mass: Vec<f64>,
}

impl System {
    fn push(&mut self, x: [f64; 3], v: [f64; 3], m: f64) {
        self.pos.push(x);
        self.vel.push(v);
        self.mass.push(m);
    }

    /// Shift to the centre-of-mass frame (position and velocity).
    fn shift_to_centre_of_mass(&mut self) {
        let total: f64 = self.mass.iter().sum();
        if total <= 0.0 {
            return;
        }
        let mut cx = [0.0; 3];
        let mut cv = [0.0; 3];
        for ((x, v), &m) in self.pos.iter().zip(&self.vel).zip(&self.mass) {
            for k in 0..3 {
                cx[k] += m * x[k];
                cv[k] += m * v[k];
            }
        }
        for (x, v) in self.pos.iter_mut().zip(&mut self.vel) {
            for k in 0..3 {
                x[k] -= cx[k] / total;
                v[k] -= cv[k] / total;
            }
        }
    }

    /// Round to f32 bodies, scaling velocities by `vscale`.
    fn into_bodies(self, vscale: f64) -> Bodies {
        let pos = self.pos.iter().zip(&self.mass).map(|(x, &m)| [x[0] as f32, x[1] as f32, x[2] as f32, m as f32]).collect();
        let vel = self.vel.iter().map(|v| [(v[0] * vscale) as f32, (v[1] * vscale) as f32, (v[2] * vscale) as f32, 0.0]).collect();
        Bodies { pos, vel }
    }
}

/// A uniformly distributed direction (unit vector).
fn isotropic(rng: &mut Pcg64) -> [f64; 3] {
    let z: f64 = rng.random_range(-1.0..=1.0);
    let phi: f64 = rng.random_range(0.0..2.0 * PI);
    let s = (1.0 - z * z).max(0.0).sqrt();
    [s * phi.cos(), s * phi.sin(), z]
}

fn scale(v: [f64; 3], s: f64) -> [f64; 3] {
    v.map(|c| c * s)
}

/// Plummer sphere, Aarseth, Hénon & Wielen (1974), Astron. Astrophys. 37, 183.
///
/// Sampled with scale length b = 1 (G = M = 1), then scaled to Hénon units: lengths by 3π/16,
/// velocities by sqrt(16/(3π)).
fn plummer(n: usize, rng: &mut Pcg64) -> System {
    let mut sys = System::default();
    let m = 1.0 / n as f64;
    let r_scale = 3.0 * PI / 16.0;
    let v_scale = 1.0 / r_scale.sqrt();
    for _ in 0..n {
        // Cumulative mass M(r) = r³ / (1 + r²)^{3/2}; invert for X ∈ [0, 0.999).
        let x1: f64 = rng.random_range(0.0..0.999);
        let r = 1.0 / (x1.powf(-2.0 / 3.0) - 1.0).sqrt();
        // Speed q·v_esc with q drawn from g(q) = q² (1 − q²)^{7/2} by von Neumann rejection
        // (max of g is < 0.1).
        let q = loop {
            let q: f64 = rng.random();
            let y: f64 = rng.random_range(0.0..0.1);
            if y < q * q * (1.0 - q * q).powf(3.5) {
                break q;
            }
        };
        let v = q * 2f64.sqrt() * (1.0 + r * r).powf(-0.25);
        let x = scale(isotropic(rng), r * r_scale);
        let u = scale(isotropic(rng), v * v_scale);
        sys.push(x, u, m);
    }
    sys
}

/// Rotate `v` about the x axis by `angle` (radians).
fn rot_x(v: [f64; 3], angle: f64) -> [f64; 3] {
    let (s, c) = angle.sin_cos();
    [v[0], c * v[1] - s * v[2], s * v[1] + c * v[2]]
}

/// One disk galaxy of `n ≥ 1` bodies and total mass `mass`, centred at the origin, tilted by
/// `tilt` about x, rotating with `sense` (±1) about its axis.
fn disk_galaxy(sys: &mut System, n: usize, mass: f64, tilt: f64, sense: f64, offset: ([f64; 3], [f64; 3]), rng: &mut Pcg64) {
    const CENTRAL_FRACTION: f64 = 0.6;
    const R_IN: f64 = 0.1;
    const R_OUT: f64 = 1.0;
    const THICKNESS: f64 = 0.02;
    let (x0, v0) = offset;
    let n_disk = n - 1;
    let m_central = if n_disk == 0 { mass } else { CENTRAL_FRACTION * mass };
    let m_disk = mass - m_central;
    sys.push(x0, v0, m_central);
    for _ in 0..n_disk {
        // Σ ∝ 1/r: radius uniform in [R_IN, R_OUT], enclosed disk mass linear in r.
        let r: f64 = rng.random_range(R_IN..R_OUT);
        let phi: f64 = rng.random_range(0.0..2.0 * PI);
        let z: f64 = rng.random_range(-THICKNESS..THICKNESS);
        let enclosed = m_central + m_disk * (r - R_IN) / (R_OUT - R_IN);
        // Circular speed from the enclosed mass (spherical approximation of the disk's pull).
        let vc = (enclosed / r).sqrt();
        let (s, c) = phi.sin_cos();
        let x = rot_x([r * c, r * s, z], tilt);
        let v = rot_x([-sense * vc * s, sense * vc * c, 0.0], tilt);
        sys.push([x0[0] + x[0], x0[1] + x[1], x0[2] + x[2]], [v0[0] + v[0], v0[1] + v[1], v0[2] + v[2]], m_disk / n_disk as f64);
    }
}

/// Two disk galaxies of mass ½ each on a parabolic collision course (G = 1).
fn galaxies(n: usize, rng: &mut Pcg64) -> System {
    let mut sys = System::default();
    let n_a = n - n / 2;
    let n_b = n / 2;
    // Centres at ∓(2.5, 0.75, 0): separation d = |(5, 1.5, 0)| ≈ 5.2 (the disks, radius 1, start
    // well apart and meet within a few time units), relative speed of a parabolic orbit
    // v = sqrt(2 G M / d) along −x. Impact parameter b = 1.5 gives the pericentre
    // q = (b v)² / (2 G M) = b² / d ≈ 0.43 of the point-mass orbit.
    let d = (5.0f64 * 5.0 + 1.5 * 1.5).sqrt();
    let v_rel = (2.0 * 1.0 / d).sqrt();
    if n_b == 0 {
        disk_galaxy(&mut sys, n_a, 1.0, 0.0, 1.0, ([0.0; 3], [0.0; 3]), rng);
        return sys;
    }
    disk_galaxy(&mut sys, n_a, 0.5, 0.0, 1.0, ([-2.5, -0.75, 0.0], [0.5 * v_rel, 0.0, 0.0]), rng);
    disk_galaxy(&mut sys, n_b, 0.5, PI / 3.0, -1.0, ([2.5, 0.75, 0.0], [-0.5 * v_rel, 0.0, 0.0]), rng);
    sys
}

/// Uniform ball of radius 1 and mass 1, solid-body rotation ω = sqrt(0.15 G M / R³) about z,
/// which makes T_rot/|W| = (I ω²/2) / (3 G M²/(5 R)) = 0.05 for the continuum.
fn uniform_ball(n: usize, rng: &mut Pcg64) -> System {
    let mut sys = System::default();
    let m = 1.0 / n as f64;
    let omega = 0.15f64.sqrt();
    for _ in 0..n {
        let u: f64 = rng.random();
        let x = scale(isotropic(rng), u.cbrt());
        sys.push(x, [-omega * x[1], omega * x[0], 0.0], m);
    }
    sys
}

/// Simó's initial conditions of the figure-eight choreography (G = 1, unit masses).
fn figure_eight() -> System {
    let mut sys = System::default();
    let x1 = [0.970_004_36, -0.243_087_53, 0.0];
    let v3 = [-0.932_407_37, -0.864_731_46, 0.0];
    let v1 = [-0.5 * v3[0], -0.5 * v3[1], 0.0];
    sys.push(x1, v1, 1.0);
    sys.push([-x1[0], -x1[1], 0.0], v1, 1.0);
    sys.push([0.0; 3], v3, 1.0);
    sys
}

/// Generate the initial bodies for `--init name` (or a CSV or tipsy path); a file is read within
/// this machine's limits, without an interrupt.
///
/// # Errors
/// Unknown name, N = 0, bad G, a device or pipe, or an unreadable CSV or tipsy file.
pub fn initial_bodies(init: &str, n: usize, seed: u64, g: f32) -> Result<Bodies, InitError> {
    initial_bodies_with(init, n, seed, g, &never)
}

/// [`initial_bodies`], with a "stop requested" callback (the app's interrupt flag) that a file's
/// read asks every few thousand lines or records: an interrupt then ends the read at once with
/// [`SourceError::Interrupted`] instead of after the whole file (an [`InitError`] whose
/// [`InitError::is_interrupted`] is true).
///
/// # Errors
/// As [`initial_bodies`], and the read stopped by `stop`.
pub fn initial_bodies_with(init: &str, n: usize, seed: u64, g: f32, stop: &dyn Fn() -> bool) -> Result<Bodies, InitError> {
    let ic = InitialCondition::parse(init).map_err(|e| InitError::Named { init: init.to_owned(), source: Box::new(e) })?;
    let bodies = match &ic {
        // A file's errors name the file already.
        InitialCondition::Csv(_) | InitialCondition::Tipsy(_) => ic.generate_with(n, seed, g, &ReadLimits::this_machine(stop))?,
        _ => ic.generate(n, seed, g).map_err(|e| InitError::Generating { name: ic.name(), source: Box::new(e) })?,
    };
    if bodies.is_empty() {
        return Err(InitError::Empty(ic.name().to_string()));
    }
    Ok(bodies)
}
