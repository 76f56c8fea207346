//! The body renderer: the two position VBOs and a point-sprite program, drawn into a
//! [`super::target::RenderTarget`] with a GL timer query around the draw
//! ([`super::gpu_timer`]); the programs come from `gfx::shaders`, the light buffer and tone
//! map from `gfx::tonemap`.
//!
//! Colour encodes speed: the position buffer holds no velocities, so the vertex shader reads both
//! VBOs (the front one at attribute 0, the other one, which holds the positions before the last
//! simulate call, at attribute 1) and divides the displacement by the time the last simulate call
//! spanned (`dt · steps`). A reference speed, the RMS speed of the initial condition, maps it to
//! the palette. When paused or on the first frame both buffers hold the same positions and every
//! body is drawn in the "slow" colour.
//!
//! Light: the sprites add up. On desktop GL they are summed in a half-float (`GL_RGBA16F`) buffer
//! and a tone-mapping pass (`shaders/tonemap.frag`) maps the brightest channel L to 1 − e^(−L)
//! and scales the colour with it, so a dense core keeps its bodies' colour instead of clipping to
//! white. On GLES, where that buffer cannot be made, and on software rasterizers (Mesa's
//! llvmpipe blends float buffers about ten times slower than RGBA8: 53 ms instead of 4 for
//! 16384 sprites at 1280×800) they add directly into the target (the choice:
//! `gfx::tonemap`).
//!
//! Trails (`--trails`, the overlay's box, key `t`): the renderer keeps the positions of the last
//! [`TRAIL_FRAMES`] frames that moved (GPU copies of the front VBO, `glCopyBufferSubData`, taken
//! after each draw) and draws them before the bodies, the older the fainter. They live in world
//! space, so orbiting the camera does not smear them.

use glam::Vec3;

use super::buffers::{copy_buffer, copy_vbos, create_empty_vbos, create_vbos, delete_vbos, PositionVbos};
use super::camera::OrbitCamera;
use super::gl::Gl;
use super::gpu_timer::{DrawClock, DrawTime, GpuTimer, TimedDraw};
use super::shaders::build_program;
use super::target::{RenderTarget, BACKGROUND};
use super::tonemap::{tonemap_wanted, Tonemap};
use super::GlInfo;
use sim::Bodies;

/// What the renderer needs from the frame loop to draw one frame.
#[derive(Debug, Clone, Copy)]
pub struct DrawParams<'a> {
    /// The camera.
    pub camera: &'a OrbitCamera,
    /// Index of the VBO holding the newest positions (`backend.shown().front`).
    pub front: usize,
    /// Simulation time between the two VBOs' contents (`dt · steps` of the last simulate call);
    /// 0 when nothing moved (paused).
    pub time_span: f32,
    /// Physical pixels per logical point (window scale factor; 1 headless).
    pub pixels_per_point: f32,
    /// Left edge (physical pixels) of the part of the target not covered by the overlay; the
    /// camera target is centred in `scene_left..width`.
    pub scene_left: f32,
    /// The bodies moved since the last draw (this frame stepped): the trail takes a new point.
    pub advanced: bool,
}

impl DrawParams<'_> {
    /// The camera's view-projection for a `size` target (pixels), shifted in clip space so the
    /// camera target sits in the middle of the part of the target the overlay leaves free
    /// (x' = x + ox·w moves NDC x by ox).
    pub fn view_proj(&self, size: [u32; 2]) -> glam::Mat4 {
        let (w, h) = (size[0].max(1) as f32, size[1].max(1) as f32);
        let ox = self.scene_left.clamp(0.0, w * 0.75) / w;
        glam::Mat4::from_translation(Vec3::new(ox, 0.0, 0.0)) * self.camera.view_proj(w / h)
    }
}

/// Frames of positions `--trails` draws behind the bodies (even: they are kept in pairs).
pub const TRAIL_FRAMES: usize = 12;
/// Brightness of the newest trail point relative to a body.
const TRAIL_GAIN: f32 = 0.5;

/// The positions of the last frames for the trails: slot `k` is `pairs[k / 2].buffers[k % 2]`.
#[derive(Debug)]
struct Trail {
    pairs: Vec<PositionVbos>,
    /// The slot the next copy goes to.
    next: usize,
    /// Slots holding a frame.
    filled: usize,
}

impl Trail {
    fn slot(&self, k: usize) -> glow::NativeBuffer {
        self.pairs[k / 2].buffers[k % 2]
    }

    /// The slot `age` frames back (1: the newest).
    fn aged(&self, age: usize) -> glow::NativeBuffer {
        self.slot((self.next + TRAIL_FRAMES - age) % TRAIL_FRAMES)
    }

    fn delete(&mut self, gl: &Gl<'_>) {
        for p in self.pairs.drain(..) {
            delete_vbos(gl, &p);
        }
        self.filled = 0;
    }
}

/// Draws the bodies from the two position VBOs as point sprites.
///
/// Teardown: the owner drops the simulation backend (which may hold CUDA registrations of the
/// VBOs) *before* calling [`Renderer::destroy`], which deletes the VBOs, the VAO, the program and
/// the timer queries; then the egui painter is destroyed; then the GL context goes.
#[derive(Debug)]
pub struct Renderer {
    program: glow::NativeProgram,
    vao: glow::NativeVertexArray,
    vbos: PositionVbos,
    u_view_proj: Option<glow::NativeUniformLocation>,
    u_px_per_unit: Option<glow::NativeUniformLocation>,
    u_world_size: Option<glow::NativeUniformLocation>,
    u_min_px: Option<glow::NativeUniformLocation>,
    u_max_px: Option<glow::NativeUniformLocation>,
    u_speed_scale: Option<glow::NativeUniformLocation>,
    u_intensity: Option<glow::NativeUniformLocation>,
    timer: GpuTimer,
    /// Host time of issuing the last body draw's GL calls (ms): the draw's time where GL has no
    /// timer query ([`Renderer::draw_time`]).
    draw_host_ms: Option<f64>,
    is_gles: bool,
    /// Reference speed (RMS speed of the initial condition) for the palette.
    speed_ref: f32,
    /// Sprite radius in world units.
    world_size: f32,
    /// Centre and radius of the initial cloud (for framing the camera).
    bounds: (Vec3, f32),
    max_point_px: f32,
    /// Cap on the sprite diameter in points (`--max-sprite-px`).
    sprite_cap: f32,
    /// GL-owned copies of both VBOs and the front index at the copy (step mode): what is drawn
    /// while CUDA has the VBOs mapped and GL may not touch them. Made on first use.
    snapshot: Option<(PositionVbos, usize)>,
    /// The tone-mapping pass (desktop GL), with the half-float buffer the light is summed in
    /// (made at the first draw and remade for a new target size).
    tonemap: Option<Tonemap>,
    /// Draw trails ([`Renderer::set_trails`]).
    trails: bool,
    /// The trail's history buffers, made on first use and dropped when trails go off.
    trail: Option<Trail>,
    destroyed: bool,
}

impl Renderer {
    /// Compile the program and create the two position VBOs from `bodies`.
    ///
    /// # Errors
    /// A shader that does not compile or link (with the GL log), or a failed GL allocation.
    pub fn new(gl: Gl<'_>, info: &GlInfo, bodies: &Bodies) -> anyhow::Result<Self> {
        let g = gl;
        let gl = &g;
        let is_gles = info.is_gles;
        let program = build_program(gl, is_gles)?;
        let loc = |name: &str| gl.get_uniform_location(program, name);
        let uniforms = [
            loc("u_view_proj"),
            loc("u_px_per_unit"),
            loc("u_world_size"),
            loc("u_min_px"),
            loc("u_max_px"),
            loc("u_speed_scale"),
            loc("u_intensity"),
        ];
        let vao = match gl.create_vertex_array() {
            Ok(v) => v,
            Err(e) => {
                gl.delete_program(program);
                anyhow::bail!("glGenVertexArrays: {e}");
            }
        };
        let max_point_px = gl.aliased_point_size_range()[1].max(1.0);
        let [u_view_proj, u_px_per_unit, u_world_size, u_min_px, u_max_px, u_speed_scale, u_intensity] = uniforms;
        let vbos = match create_vbos(gl, bodies) {
            Ok(v) => v,
            Err(e) => {
                gl.delete_program(program);
                gl.delete_vertex_array(vao);
                return Err(e);
            }
        };
        let mut r = Self {
            program,
            vao,
            vbos,
            u_view_proj,
            u_px_per_unit,
            u_world_size,
            u_min_px,
            u_max_px,
            u_speed_scale,
            u_intensity,
            timer: GpuTimer::new(gl, info),
            draw_host_ms: None,
            is_gles,
            speed_ref: 1.0,
            world_size: 0.01,
            bounds: (Vec3::ZERO, 1.0),
            max_point_px,
            sprite_cap: 64.0,
            snapshot: None,
            tonemap: tonemap_wanted(is_gles, &info.renderer)
                .then(|| Tonemap::new(gl))
                .and_then(|t| t.map_err(|e| tracing::warn!("no tone mapping (the light adds into the target directly): {e:#}")).ok()),
            trails: false,
            trail: None,
            destroyed: false,
        };
        r.measure(bodies);
        Ok(r)
    }

    /// Scale facts of a body set: reference speed, sprite size, and bounds.
    fn measure(&mut self, bodies: &Bodies) {
        let n = bodies.len().max(1);
        let (mut c, mut m) = (glam::DVec3::ZERO, 0.0f64);
        for p in &bodies.pos {
            let w = f64::from(p[3].max(0.0));
            c += w * glam::DVec3::new(f64::from(p[0]), f64::from(p[1]), f64::from(p[2]));
            m += w;
        }
        let center = if m > 0.0 { (c / m).as_vec3() } else { Vec3::ZERO };
        let mut r: Vec<f32> = bodies.pos.iter().map(|p| (Vec3::new(p[0], p[1], p[2]) - center).length()).filter(|r| r.is_finite()).collect();
        r.sort_by(f32::total_cmp);
        let radius = r.get(r.len() * 9 / 10).copied().unwrap_or(1.0).max(1e-3);
        let v2: f64 = bodies.vel.iter().map(|v| f64::from(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])).sum::<f64>() / n as f64;
        let v_rms = v2.sqrt() as f32;
        self.speed_ref = if v_rms.is_finite() && v_rms > 0.0 { v_rms } else { 1.0 };
        // Sprite radius: 0.6 × the median nearest-neighbour distance of up to 256 sample bodies,
        // so dense and sparse systems (a Plummer core, two disks far apart) both look resolved.
        let nn = median_nn_distance(&bodies.pos, 256);
        self.world_size = if nn.is_finite() && nn > 0.0 { (0.6 * nn).min(radius * 0.05) } else { radius * 0.01 };
        self.bounds = (center, radius);
    }

    /// Caps the sprite diameter at `px` points (at least 1; `--max-sprite-px`).
    pub fn set_sprite_cap(&mut self, px: f32) {
        self.sprite_cap = if px.is_finite() { px.max(1.0) } else { 64.0 };
    }

    /// Draw the last [`TRAIL_FRAMES`] frames' positions behind the bodies (`--trails`). Turning
    /// them off frees the history buffers at the next draw.
    pub fn set_trails(&mut self, on: bool) {
        self.trails = on;
    }

    /// True when trails are drawn.
    pub fn trails(&self) -> bool {
        self.trails
    }

    /// Centre and radius (90th percentile) of the body set the VBOs were made from.
    pub fn bounds(&self) -> (Vec3, f32) {
        self.bounds
    }

    /// The two position VBOs.
    pub fn vbos(&self) -> &PositionVbos {
        &self.vbos
    }

    /// Replace the VBOs with new ones made from `bodies` (a reset).
    ///
    /// The caller must have dropped the backend bound to the old VBOs first (it may hold CUDA
    /// registrations of them).
    ///
    /// # Errors
    /// A failed GL allocation; the old VBOs are deleted either way.
    pub fn recreate_vbos(&mut self, gl: Gl<'_>, bodies: &Bodies) -> anyhow::Result<()> {
        let g = gl;
        let gl = &g;
        delete_vbos(gl, &self.vbos);
        self.vbos = PositionVbos { buffers: self.vbos.buffers, n: 0 };
        if let Some((s, _)) = self.snapshot.take() {
            delete_vbos(gl, &s);
        }
        if let Some(mut t) = self.trail.take() {
            t.delete(gl);
        }
        self.vbos = create_vbos(gl, bodies)?;
        self.measure(bodies);
        Ok(())
    }

    /// Copies both VBOs into GL-owned snapshot buffers (`glCopyBufferSubData`) and remembers
    /// `front`: step mode takes it right before CUDA maps the VBOs, so that the view keeps the
    /// last image while GL may not touch them ([`Renderer::snapshot`]).
    ///
    /// # Errors
    /// The snapshot buffers cannot be made.
    pub fn take_snapshot(&mut self, gl: Gl<'_>, front: usize) -> anyhow::Result<()> {
        let snap = match self.snapshot {
            Some((s, _)) if s.n == self.vbos.n => s,
            other => {
                if let Some((s, _)) = other {
                    delete_vbos(&gl, &s);
                }
                create_empty_vbos(&gl, self.vbos.n)?
            }
        };
        copy_vbos(&gl, &self.vbos, &snap);
        self.snapshot = Some((snap, front.min(1)));
        Ok(())
    }

    /// The snapshot taken by [`Renderer::take_snapshot`] and its front index.
    pub fn snapshot(&self) -> Option<(PositionVbos, usize)> {
        self.snapshot
    }

    /// GL time of the newest finished body draw (ms), `None` without timer queries.
    pub fn draw_ms(&self) -> Option<f64> {
        self.timer.last_ms
    }

    /// The body draw's time as this GL can give it: the GL timer query's where there is one,
    /// else the host time of issuing the draw calls (what the CPU spent in them; the GL's work
    /// may run after).
    pub fn draw_time(&self) -> DrawTime {
        if self.timer.available() {
            DrawTime { clock: DrawClock::GlTimer, ms: self.timer.last_ms }
        } else {
            DrawTime { clock: DrawClock::HostCalls, ms: self.draw_host_ms }
        }
    }

    /// Puts a `GL_TIMESTAMP` query before each body draw (the timeline), or stops. Returns
    /// whether they are on: desktop GL with timer queries only.
    pub fn set_timestamps(&mut self, gl: Gl<'_>, on: bool) -> bool {
        self.timer.set_stamps(&gl, on)
    }

    /// The draws whose queries were read since the last call (timestamps on), oldest first.
    pub fn take_timed_draws(&mut self) -> Vec<TimedDraw> {
        std::mem::take(&mut self.timer.finished)
    }

    /// Clear `target` and draw the bodies of `vbos.buffers[p.front]` into it, timed by a GL
    /// timer query. `wait_timer`: read the query at once (headless) instead of a later frame.
    pub fn draw(&mut self, gl: Gl<'_>, target: &RenderTarget, p: &DrawParams<'_>, wait_timer: bool) {
        self.draw_from(gl, target, p, wait_timer, None);
    }

    /// [`Renderer::draw`] from `source` instead of the renderer's own VBOs when given (the
    /// external backend's imported buffers, `Shown::buffers` of the backends). The
    /// attribute arrays are set up from the buffers at every draw, so any pair works.
    pub fn draw_from(&mut self, gl: Gl<'_>, target: &RenderTarget, p: &DrawParams<'_>, wait_timer: bool, source: Option<PositionVbos>) {
        let vbos = source.unwrap_or(self.vbos);
        let g = gl;
        let gl = &g;
        let [w, h] = target.size();
        if w == 0 || h == 0 || self.destroyed {
            return;
        }
        let t_host = std::time::Instant::now();
        // The light goes into the half-float buffer when there is one, else into the target. A
        // buffer GL cannot make turns tone mapping off for the run (said once).
        let light = self.tonemap.as_mut().and_then(|t| t.light(gl, [w, h]));
        if light.is_none() {
            if let Some(mut t) = self.tonemap.take() {
                tracing::warn!("no complete half-float light buffer ({w}×{h}): tone mapping off");
                t.destroy(gl);
            }
        }
        match light {
            Some(fbo) => gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo)),
            None => target.bind(*gl),
        }
        let front = p.front.min(1);
        self.timer.begin(gl);
        gl.viewport(0, 0, w as i32, h as i32);
        gl.disable(glow::SCISSOR_TEST);
        if light.is_some() {
            gl.clear_color(0.0, 0.0, 0.0, 0.0);
        } else {
            gl.clear_color(BACKGROUND[0], BACKGROUND[1], BACKGROUND[2], 1.0);
        }
        gl.clear(glow::COLOR_BUFFER_BIT | glow::DEPTH_BUFFER_BIT);
        if vbos.n > 0 {
            self.draw_bodies(gl, vbos, p, [w, h], front);
        }
        if light.is_some() {
            target.bind(*gl);
            gl.viewport(0, 0, w as i32, h as i32);
            if let Some(t) = &self.tonemap {
                t.resolve(gl);
            }
        }
        self.timer.end(gl);
        self.draw_host_ms = Some(t_host.elapsed().as_secs_f64() * 1e3);
        self.timer.poll(gl, wait_timer);
        self.update_trail(gl, vbos.buffers[front], vbos.n, p.advanced);
    }

    /// Draws the `vbos.n` (> 0) bodies of `vbos.buffers[front]` (their trail first, when on) into
    /// the bound framebuffer of `size` pixels, additively blended, coloured by the speed against
    /// the other buffer.
    fn draw_bodies(&self, gl: &Gl<'_>, vbos: PositionVbos, p: &DrawParams<'_>, [w, h]: [u32; 2], front: usize) {
        let back = 1 - front;
        let view_proj = p.view_proj([w, h]);
        let speed_scale = if p.time_span > 0.0 { 1.0 / (p.time_span * 2.0 * self.speed_ref) } else { 0.0 };
        let intensity = (4000.0 / vbos.n.max(1) as f32).clamp(0.15, 1.0);
        gl.disable(glow::DEPTH_TEST);
        gl.disable(glow::CULL_FACE);
        gl.enable(glow::BLEND);
        gl.blend_equation(glow::FUNC_ADD);
        gl.blend_func(glow::ONE, glow::ONE);
        if !self.is_gles {
            gl.enable(glow::PROGRAM_POINT_SIZE);
        }
        gl.use_program(Some(self.program));
        gl.uniform_matrix_4_f32_slice(self.u_view_proj.as_ref(), false, &view_proj.to_cols_array());
        gl.uniform_1_f32(self.u_px_per_unit.as_ref(), p.camera.px_per_unit(h as f32));
        gl.uniform_1_f32(self.u_world_size.as_ref(), self.world_size);
        let max_px = self.max_point_px.min(self.sprite_cap * p.pixels_per_point);
        gl.uniform_1_f32(self.u_min_px.as_ref(), (1.5 * p.pixels_per_point).min(max_px));
        gl.uniform_1_f32(self.u_max_px.as_ref(), max_px);
        gl.uniform_1_f32(self.u_speed_scale.as_ref(), speed_scale);
        gl.bind_vertex_array(Some(self.vao));
        let n = vbos.n;
        let draw = |newer: glow::NativeBuffer, older: glow::NativeBuffer, intensity: f32| {
            gl.uniform_1_f32(self.u_intensity.as_ref(), intensity);
            gl.bind_buffer(glow::ARRAY_BUFFER, Some(newer));
            gl.enable_vertex_attrib_array(0);
            gl.vertex_attrib_pointer_f32(0, 4, glow::FLOAT, false, 16, 0);
            gl.bind_buffer(glow::ARRAY_BUFFER, Some(older));
            gl.enable_vertex_attrib_array(1);
            gl.vertex_attrib_pointer_f32(1, 4, glow::FLOAT, false, 16, 0);
            gl.bind_buffer(glow::ARRAY_BUFFER, None);
            // SAFETY: the VAO enables exactly attributes 0 and 1, each a float4 (16-byte
            // stride, offset 0) in a buffer of at least 16·n bytes (`create_vbos`, the trail's
            // `create_empty_vbos` of the same n, or the external backend's
            // `glBufferStorageMemEXT` of 16·n bytes: PositionVbos' invariant), and we draw
            // vertices 0..n.
            unsafe { gl.draw_arrays(glow::POINTS, 0, n as i32) };
        };
        // The trail, oldest first, each point fainter with age; its colour is the speed
        // between it and the point before it.
        let trail = self.trail.as_ref().filter(|t| self.trails && t.pairs.first().is_some_and(|p| p.n == n));
        if let Some(t) = trail {
            for age in (1..=t.filled).rev() {
                let older = if age < t.filled { t.aged(age + 1) } else { t.aged(age) };
                let fade = 1.0 - age as f32 / (TRAIL_FRAMES + 1) as f32;
                draw(t.aged(age), older, intensity * TRAIL_GAIN * fade);
            }
        }
        draw(vbos.buffers[front], vbos.buffers[back], intensity);
        gl.bind_vertex_array(None);
        gl.use_program(None);
        gl.disable(glow::BLEND);
    }

    /// After a draw: with trails on and bodies that moved, copy the drawn positions into the
    /// trail's next slot (making the history on first use, or for a new N); with trails off,
    /// free the history.
    fn update_trail(&mut self, gl: &Gl<'_>, front: glow::NativeBuffer, n: usize, advanced: bool) {
        if !self.trails || n == 0 {
            if let Some(mut t) = self.trail.take() {
                t.delete(gl);
            }
            return;
        }
        if !advanced {
            return;
        }
        if self.trail.as_ref().is_some_and(|t| t.pairs.first().is_none_or(|p| p.n != n)) {
            if let Some(mut t) = self.trail.take() {
                t.delete(gl);
            }
        }
        if self.trail.is_none() {
            let mut t = Trail { pairs: Vec::with_capacity(TRAIL_FRAMES / 2), next: 0, filled: 0 };
            for _ in 0..TRAIL_FRAMES / 2 {
                match create_empty_vbos(gl, n) {
                    Ok(p) => t.pairs.push(p),
                    Err(e) => {
                        tracing::warn!("trails off: their history buffers cannot be made: {e:#}");
                        t.delete(gl);
                        self.trails = false;
                        return;
                    }
                }
            }
            self.trail = Some(t);
        }
        if let Some(t) = self.trail.as_mut() {
            copy_buffer(gl, front, t.slot(t.next), n);
            t.next = (t.next + 1) % TRAIL_FRAMES;
            t.filled = (t.filled + 1).min(TRAIL_FRAMES);
        }
    }

    /// Delete the VBOs, the VAO, the program and the timer queries. Call after the backend has
    /// been dropped and before the egui painter is destroyed and the context goes.
    pub fn destroy(&mut self, gl: Gl<'_>) {
        let g = gl;
        let gl = &g;
        if self.destroyed {
            return;
        }
        self.destroyed = true;
        if let Some((s, _)) = self.snapshot.take() {
            delete_vbos(gl, &s);
        }
        if let Some(mut t) = self.trail.take() {
            t.delete(gl);
        }
        if let Some(mut t) = self.tonemap.take() {
            t.destroy(gl);
        }
        self.timer.destroy(gl);
        delete_vbos(gl, &self.vbos);
        self.vbos.n = 0;
        gl.delete_vertex_array(self.vao);
        gl.delete_program(self.program);
    }
}

impl Drop for Renderer {
    fn drop(&mut self) {
        if !self.destroyed {
            tracing::warn!("Renderer dropped without destroy(): its GL objects leak until the context goes");
        }
    }
}

/// Median distance from up to `samples` evenly spaced bodies to their nearest neighbour
/// (O(samples · N)); infinite for fewer than 2 bodies.
fn median_nn_distance(pos: &[[f32; 4]], samples: usize) -> f32 {
    let n = pos.len();
    if n < 2 {
        return f32::INFINITY;
    }
    let step = (n / samples.max(1)).max(1);
    let mut d: Vec<f32> = (0..n)
        .step_by(step)
        .map(|i| {
            let p = Vec3::new(pos[i][0], pos[i][1], pos[i][2]);
            pos.iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, q)| p.distance_squared(Vec3::new(q[0], q[1], q[2])))
                .filter(|d2| *d2 > 0.0)
                .fold(f32::INFINITY, f32::min)
                .sqrt()
        })
        .filter(|d| d.is_finite())
        .collect();
    if d.is_empty() {
        return f32::INFINITY;
    }
    d.sort_by(f32::total_cmp);
    d[d.len() / 2]
}

/// Make the two position VBOs, both filled with `bodies.pos` (`[N][4]` f32, 16·N bytes each).
/// Frame the camera on the renderer's body set.
pub fn framing_camera(r: &Renderer) -> OrbitCamera {
    let (c, radius) = r.bounds();
    OrbitCamera::framing(c, radius)
}
