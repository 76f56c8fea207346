//! The physics and initial-condition options the demo, `bench` and `scale` share.

use std::path::PathBuf;

use clap::Args;

use super::values::{parse_f32, parse_whole_u32, parse_whole_u64, StepsPerFrame};
use kernels::launch_rule::{ForcedKernel, STEP_KERNEL_NAMES};

/// Physics and initial-condition options shared by the demo, `bench` and `scale`.
#[derive(Debug, Clone, Args)]
pub struct SimArgs {
    /// Seed of the initial-condition generator.
    #[arg(long, default_value_t = 1, value_parser = parse_whole_u64, allow_negative_numbers = true, help_heading = "Scene", hide_short_help = true)]
    pub seed: u64,
    /// plummer, galaxies, ball, figure-eight, or a state file [default: galaxies].
    ///
    /// The initial condition. A state file is CSV with the header `x,y,z,vx,vy,vz,mass`, or a tipsy snapshot (`.tipsy`,
    /// `.std`, `.bin`; the format of NVIDIA's nbody sample, either byte order). `bench` and
    /// `scale` default to the Plummer sphere, so their numbers compare.
    #[arg(long, help_heading = "Scene")]
    pub init: Option<String>,
    /// Gravitational constant G (N-body units).
    #[arg(long = "gravitational-constant", default_value_t = 1.0, value_parser = parse_f32, allow_negative_numbers = true, help_heading = "Simulation", hide_short_help = true)]
    pub gravitational_constant: f32,
    /// Leapfrog time step dt (simulation time units).
    #[arg(long, default_value_t = 0.001, value_parser = parse_f32, allow_negative_numbers = true, help_heading = "Simulation")]
    pub dt: f32,
    /// Plummer softening length ε (length units; 0: exact gravity).
    #[arg(long, value_name = "EPS", default_value_t = 0.01, value_parser = parse_f32, allow_negative_numbers = true, help_heading = "Simulation")]
    pub softening: f32,
    /// Leapfrog steps per frame: a number, or auto [default: auto in a window, else 1].
    ///
    /// `auto` runs as many steps as fit the frame interval (the display's refresh with vsync,
    /// else `--target-fps`), measured as it runs. Headless runs default to 1 (reproducible
    /// output); `bench` and `scale` need a number.
    #[arg(long = "steps-per-frame", value_name = "N|auto", help_heading = "Simulation")]
    pub steps_per_frame: Option<StepsPerFrame>,
    /// CUDA threads per block of the step kernel (a multiple of 32 up to 1024; 0: automatic).
    ///
    /// 0 lets the launch rule choose the block size, the bodies per thread and the threads per
    /// body from N and the SM count.
    #[arg(long = "block-size", default_value_t = 0, value_parser = parse_whole_u32, allow_negative_numbers = true, help_heading = "Simulation", hide_short_help = true)]
    pub block_size: u32,
    /// Load this PTX file instead of the embedded kernels.
    #[arg(long, help_heading = "Simulation", hide_short_help = true)]
    pub kernel: Option<PathBuf>,
    /// Run this fp32 step kernel instead of the launch rule's choice [default: automatic].
    ///
    /// For tuning and comparisons; `nbody_stepk_*` are the stream-K pairs.
    #[arg(long = "step-kernel", value_name = "NAME", value_parser = step_kernel_parser(), help_heading = "Simulation", hide_short_help = true)]
    pub step_kernel: Option<ForcedKernel>,
}

/// `--step-kernel`: one of [`STEP_KERNEL_NAMES`] (clap lists them in `--help` and refuses any
/// other), as a [`ForcedKernel`].
fn step_kernel_parser() -> impl clap::builder::TypedValueParser<Value = ForcedKernel> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(STEP_KERNEL_NAMES).try_map(|s: String| ForcedKernel::parse(&s))
}

/// `--init`'s help where the Plummer sphere is the default and a file must match `--bodies`
/// (`bench`, `scale`): applied to their flattened [`SimArgs`] with `mut_arg`.
pub(super) fn plummer_init_help(a: clap::Arg) -> clap::Arg {
    a.help("plummer, galaxies, ball, or a state file; figure-eight with --bodies 3 only [default: plummer]").long_help(
        "plummer, galaxies, ball, or a state file; figure-eight with --bodies 3 only [default: plummer].\n\n\
         The initial condition, the Plummer sphere unless asked otherwise, so the numbers of different runs compare. A \
         state file is CSV with the header `x,y,z,vx,vy,vz,mass`, or a tipsy snapshot (`.tipsy`, `.std`, `.bin`; the \
         format of NVIDIA's nbody sample, either byte order). A file or figure-eight fixes N: --bodies must then be \
         its count.",
    )
}

/// `--steps-per-frame`'s help where every frame runs the same fixed count (`bench`, `scale`):
/// applied to their flattened [`SimArgs`] with `mut_arg`.
pub(super) fn fixed_steps_help(a: clap::Arg) -> clap::Arg {
    a.value_name("N").help("Leapfrog steps per measured frame, a whole number ≥ 1 [default: 1]").long_help(
        "Leapfrog steps per measured frame, a whole number ≥ 1 [default: 1].\n\n\
         Every row is measured at the same count, so `auto` (the demo's pace) is refused; the demo's paced count is \
         measured by `nbody-interop --headless --steps-per-frame auto --target-fps 60`.",
    )
}

impl SimArgs {
    /// `--init`, or `default` when it was not given.
    pub fn init_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.init.as_deref().unwrap_or(default)
    }

    /// The fixed step count of a run that needs one (`bench`): 1 when not given.
    ///
    /// # Errors
    /// `auto` (the bench compares modes at the same count), or 0.
    pub fn fixed_steps_per_frame(&self) -> anyhow::Result<u32> {
        match self.steps_per_frame {
            None => Ok(1),
            Some(StepsPerFrame::Fixed(0)) => anyhow::bail!("--steps-per-frame must be at least 1"),
            Some(StepsPerFrame::Fixed(n)) => Ok(n),
            Some(StepsPerFrame::Auto) => anyhow::bail!(
                "--steps-per-frame auto: the bench measures every mode at the same fixed count of steps per frame; give a \
                 number (the demo's auto pace is measured by `--headless --steps-per-frame auto --target-fps 60`)"
            ),
        }
    }
}
