//! [`SimBackend`] for the CUDA backend: what the scene asks of any backend, answered from the
//! integrator, the storage and the device.

use std::sync::Arc;

use anyhow::Context as _;
use interop::Context;

use super::storage::map::MapStorage;
use super::{check_register_flags, CudaBackend};
use crate::backend::{
    BackendInfo, CudaSide, DevicePanel, InteropFacts, InteropSettings, LongSteps, NominalRate, PositionVbos, RateBasis, Readout, SettingsChange,
    Shown, Sides, SimBackend, SimTimings, State,
};
use crate::cuda::density::{DensityView, StreamSpans};
use crate::cuda::gpu_stepper::StepProgress;
use crate::cuda::settings::{DensityPath, InteropMode, Precision};
use crate::gfx::gl::Gl;
use crate::gfx::target::RenderTarget;
use kernels::launch_rule::validate_block_size;
use sim::{diagnostics, PhysParams};

impl SimBackend for CudaBackend {
    fn describe(&self) -> BackendInfo {
        let mode = match (self.opts.settings.interop, self.opts.separate_maps) {
            (InteropMode::Map, false) => "map",
            (InteropMode::Map, true) => "map-separate",
            (InteropMode::Copy, _) => "copy",
            (InteropMode::External, _) => "external",
        };
        let solver = CudaBackend::solver(self);
        let label = match solver {
            sim::tree::Solver::Tree { theta } => format!("CUDA {mode} {} tree θ={theta} · {}", self.gpu.precision().name(), self.info.name),
            _ => format!("CUDA {mode} {} · {}", self.gpu.precision().name(), self.info.name),
        };
        let i = &self.info;
        let f64_fraction = (self.gpu.precision() == Precision::F64).then_some(crate::cuda::gpu_stepper_f64::F64_RATE_FRACTION);
        let rate = NominalRate {
            per_s: crate::cuda::gpu_stepper_f64::nominal_rate_for(i, self.gpu.precision()),
            basis: RateBasis::Gpu { name: i.name.clone(), sms: i.multiprocessors, clock_mhz: i.clock_khz / 1000, f64_fraction },
        };
        BackendInfo { label, n: self.n, solver, rate }
    }

    fn set_solver(&mut self, solver: sim::tree::Solver) -> anyhow::Result<()> {
        CudaBackend::set_solver(self, solver)
    }

    fn simulate(&mut self, gl: Gl<'_>, vbos: &PositionVbos, steps: u32) -> anyhow::Result<SimTimings> {
        self.frame(gl, vbos, steps)
    }

    fn shown(&self) -> Shown {
        let front = match &self.storage {
            Some(s) => s.front(self.gpu.as_ref()),
            None => self.gpu.front(),
        };
        Shown { front, buffers: self.storage.as_ref().and_then(|s| s.draw_buffers(self.n)) }
    }

    fn before_draw(&mut self, gl: Gl<'_>) {
        if let Some(s) = &mut self.storage {
            s.before_draw(gl);
        }
    }

    fn after_draw(&mut self, gl: Gl<'_>) {
        if let Some(s) = &mut self.storage {
            s.after_draw(gl);
        }
    }

    fn release_gl(&mut self, gl: Gl<'_>) {
        self.release_density(gl);
        if let Some(s) = &mut self.storage {
            s.release_gl(gl, &self.stream);
        }
    }

    fn set_params(&mut self, gl: Gl<'_>, params: PhysParams) {
        if let Err(e) = self.leave_mapped_step() {
            tracing::warn!("ending the step-mode frame: {e:#}");
        }
        if params != self.gpu.params() {
            // The step in progress was made with the old parameters: it starts again with the new.
            if let Err(e) = self.gpu.abandon_step(&self.stream) {
                tracing::warn!("abandoning the step in progress before the parameter change: {e:#}");
            }
        }
        if params.dt != self.gpu.params().dt && !self.gpu.synchronized() {
            // The half-step velocities belong to the old dt: finish the step with it first.
            if let Err(e) = self.finish_half_step(gl) {
                tracing::warn!("finishing the leapfrog step before the dt change failed: {e:#}");
            }
        }
        self.gpu.set_params(params);
    }

    fn state(&mut self, gl: Gl<'_>, _vbos: &PositionVbos, with: Readout) -> anyhow::Result<State> {
        let with_phi = with == Readout::WithDiagnostics;
        let (bodies, phi) = self.read_state(gl, with_phi)?;
        let diagnostics = if with_phi {
            let phi = phi.context("potential not computed")?;
            Some(diagnostics::from_parts(&bodies.pos, &bodies.vel, &phi, f64::from(self.gpu.params().g)))
        } else {
            None
        };
        Ok(State { bodies, diagnostics })
    }

    fn sides(&mut self) -> Sides<'_> {
        Sides::Both(self)
    }
}

impl LongSteps for CudaBackend {
    fn synchronized(&self) -> bool {
        self.gpu.synchronized()
    }

    fn set_interrupt(&mut self, requested: fn() -> bool) {
        let rate = crate::cuda::gpu_stepper_f64::nominal_rate_for(&self.info, self.gpu.precision());
        self.gpu.set_interrupt(Some(crate::cuda::integrator::Interrupt { requested, rate }));
    }

    fn set_in_parts(&mut self, on: bool) {
        self.gpu.set_in_parts(on);
    }

    fn step_in_progress(&self) -> Option<StepProgress> {
        self.gpu.step_in_progress()
    }

    fn abandon_step(&mut self) -> anyhow::Result<()> {
        self.gpu.abandon_step(&self.stream)?;
        Ok(())
    }
}

impl CudaSide for CudaBackend {
    fn draw_density(&mut self, gl: Gl<'_>, target: &RenderTarget, view_proj: glam::Mat4, path: DensityPath) -> anyhow::Result<()> {
        self.density_frame(gl, target, view_proj, path)
    }

    fn density_ms(&mut self) -> Option<f64> {
        self.density.as_mut().and_then(DensityView::last_ms)
    }

    fn drop_density(&mut self, gl: Gl<'_>) {
        if let Some(sw) = self.stepwise.as_mut() {
            sw.density = None;
        }
        self.release_density(gl);
    }

    fn take_density_spans(&mut self) -> Option<StreamSpans> {
        let v = self.density.as_mut()?;
        v.take_spans(&self.clock).unwrap_or_else(|e| {
            tracing::warn!("the density view's spans for the timeline: {e:#}");
            None
        })
    }

    fn settings(&self) -> Option<InteropSettings> {
        Some(self.opts.settings)
    }

    fn apply_settings(&mut self, _gl: Gl<'_>, vbos: &PositionVbos, s: InteropSettings) -> anyhow::Result<SettingsChange> {
        let old = self.opts.settings;
        if s == old {
            return Ok(SettingsChange::Applied);
        }
        validate_block_size(s.block_size)?;
        if self.gpu.precision() == Precision::F64 {
            crate::cuda::gpu_stepper_f64::f64_block(s.block_size)?;
        }
        // Before a rebuild too: a refused registration must not fall back to the CPU backend.
        check_register_flags(s.interop, s.register_flags)?;
        // A step in progress needs the same kernel and buffers to the end: abandon it (before a
        // rebuild too, which reads the state of before it).
        self.gpu.abandon_step(&self.stream)?;
        if s.interop != old.interop || s.stream != old.stream || s.stream_priority != old.stream_priority {
            // A new storage, table (semantics) or stream: a new backend from the current state.
            return Ok(SettingsChange::Rebuild);
        }
        // Nothing may stay mapped while the registration is re-made (step mode ends with it).
        self.leave_mapped_step()?;
        if s.register_flags != old.register_flags && self.storage.as_mut().is_some_and(|st| st.as_map().is_some()) {
            self.storage = None; // unregister before registering again
            self.storage = Some(Box::new(MapStorage::register(&self.ctx, vbos, self.n, s.register_flags)?));
        }
        // External storage: register and map flags do not apply (nothing is registered or mapped).
        self.gpu.set_block(s.block_size)?;
        self.opts.settings = s;
        Ok(SettingsChange::Applied)
    }

    fn device_panel(&self) -> Option<DevicePanel> {
        let s = &self.opts.settings;
        let interop = match &self.storage {
            Some(st) => st.interop_facts(&self.opts.settings),
            None => InteropFacts::Flags { register: s.register_flags, map: s.map_flags },
        };
        let auto = if s.block_size == 0 { " (auto)" } else { "" };
        let k = self.gpu.kernel_facts(auto);
        Some(DevicePanel {
            device: self.info.clone(),
            driver_version: self.ctx.api().driver_version(),
            semantics: self.ctx.api().semantics(),
            context: (self.ctx.kind(), self.opts.ctx_sched),
            stream: (s.stream, self.stream.priority().unwrap_or(0)),
            interop,
            slices: k.slices,
            precision: self.gpu.precision(),
            kernel: k.kernel,
            gl: (self.gl_info.vendor.clone(), self.gl_info.renderer.clone()),
            kernel_attributes: k.attributes,
        })
    }

    fn entry_points(&self) -> Vec<interop::driver::EntryReport> {
        self.ctx.api().report().to_vec()
    }

    fn cuda_context(&self) -> Option<Arc<Context>> {
        Some(self.ctx.clone())
    }

    fn step_mode_unavailable(&self) -> Option<String> {
        self.step_support().err()
    }

    fn set_step_mode(&mut self, on: bool) -> anyhow::Result<()> {
        self.set_stepwise(on)
    }

    fn next_step(&mut self, gl: Gl<'_>, _vbos: &PositionVbos, steps: u32) -> anyhow::Result<crate::backend::step::WorkflowStep> {
        self.step_once(gl, steps)
    }

    fn step_view(&self) -> Option<crate::backend::step::StepView> {
        self.stepwise_view()
    }
}
