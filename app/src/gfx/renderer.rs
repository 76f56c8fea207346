//! The body renderer: the two position VBOs, a point-sprite program, a GL timer query around the
//! draw, and the offscreen target of headless runs.
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
//! 16384 sprites at 1280×800) they add directly into the target. `NBODY_TONEMAP=on` or `off`
//! overrides the choice (desktop GL only).
//!
//! Trails (`--trails`, the overlay's box, key `t`): the renderer keeps the positions of the last
//! [`TRAIL_FRAMES`] frames that moved (GPU copies of the front VBO, `glCopyBufferSubData`, taken
//! after each draw) and draws them before the bodies, the older the fainter. They live in world
//! space, so orbiting the camera does not smear them.

use std::collections::VecDeque;

use anyhow::anyhow;
use glam::Vec3;

use super::camera::OrbitCamera;
use super::gl::Gl;
use super::GlInfo;
use super::buffers::{copy_buffer, copy_vbos, create_empty_vbos, create_vbos, delete_vbos, PositionVbos};
use crate::sim::Bodies;

const VERT_SRC: &str = include_str!("../../../shaders/bodies.vert");
const FRAG_SRC: &str = include_str!("../../../shaders/bodies.frag");
const TONEMAP_VERT_SRC: &str = include_str!("../../../shaders/tonemap.vert");
const TONEMAP_FRAG_SRC: &str = include_str!("../../../shaders/tonemap.frag");
/// The background colour behind the bodies (linear RGB).
const BACKGROUND: [f32; 3] = [0.0, 0.0, 0.015];

/// Where a frame is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderTarget {
    /// The default framebuffer (windowed runs), `width` × `height` physical pixels.
    Default {
        /// Width in physical pixels.
        width: u32,
        /// Height in physical pixels.
        height: u32,
    },
    /// An offscreen framebuffer (headless runs).
    Offscreen(OffscreenTarget),
}

impl RenderTarget {
    /// Size in physical pixels.
    pub fn size(&self) -> [u32; 2] {
        match self {
            Self::Default { width, height } => [*width, *height],
            Self::Offscreen(t) => [t.width, t.height],
        }
    }

    /// Bind it as the draw and read framebuffer.
    pub fn bind(&self, gl: Gl<'_>) {
        let fbo = match self {
            Self::Default { .. } => None,
            Self::Offscreen(t) => Some(t.fbo),
        };
        gl.bind_framebuffer(glow::FRAMEBUFFER, fbo);
    }
}

/// An FBO with an RGBA8 colour and a 24-bit depth renderbuffer, for headless rendering.
///
/// Delete it with [`OffscreenTarget::destroy`] before the context goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffscreenTarget {
    /// The framebuffer object.
    pub fbo: glow::NativeFramebuffer,
    color: glow::NativeRenderbuffer,
    depth: glow::NativeRenderbuffer,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

impl OffscreenTarget {
    /// Make a `width` × `height` FBO.
    ///
    /// # Errors
    /// A zero or too large size, or an incomplete framebuffer.
    pub fn new(gl: Gl<'_>, width: u32, height: u32) -> anyhow::Result<Self> {
        let g = gl;
        let gl = &g;
        let max = gl.max_renderbuffer_size().max(0) as u32;
        if width == 0 || height == 0 || width > max || height > max {
            anyhow::bail!("framebuffer size {width}×{height} is outside 1..={max} pixels");
        }
        let (w, h) = (width as i32, height as i32);
        let fbo = gl.create_framebuffer().map_err(|e| anyhow!("glGenFramebuffers: {e}"))?;
        let target = match (gl.create_renderbuffer(), gl.create_renderbuffer()) {
            (Ok(color), Ok(depth)) => Self { fbo, color, depth, width, height },
            (a, b) => {
                gl.delete_framebuffer(fbo);
                for rb in [a, b].into_iter().flatten() {
                    gl.delete_renderbuffer(rb);
                }
                anyhow::bail!("glGenRenderbuffers failed");
            }
        };
        gl.bind_renderbuffer(glow::RENDERBUFFER, Some(target.color));
        gl.renderbuffer_storage(glow::RENDERBUFFER, glow::RGBA8, w, h);
        gl.bind_renderbuffer(glow::RENDERBUFFER, Some(target.depth));
        gl.renderbuffer_storage(glow::RENDERBUFFER, glow::DEPTH_COMPONENT24, w, h);
        gl.bind_renderbuffer(glow::RENDERBUFFER, None);
        gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
        gl.framebuffer_renderbuffer(glow::FRAMEBUFFER, glow::COLOR_ATTACHMENT0, glow::RENDERBUFFER, Some(target.color));
        gl.framebuffer_renderbuffer(glow::FRAMEBUFFER, glow::DEPTH_ATTACHMENT, glow::RENDERBUFFER, Some(target.depth));
        let status = gl.check_framebuffer_status(glow::FRAMEBUFFER);
        if status != glow::FRAMEBUFFER_COMPLETE {
            target.destroy(*gl);
            anyhow::bail!("offscreen framebuffer {width}×{height} incomplete: status 0x{status:04X}");
        }
        Ok(target)
    }

    /// Delete the FBO and its renderbuffers.
    pub fn destroy(self, gl: Gl<'_>) {
        gl.delete_framebuffer(self.fbo);
        gl.delete_renderbuffer(self.color);
        gl.delete_renderbuffer(self.depth);
    }
}

/// What the renderer needs from the frame loop to draw one frame.
#[derive(Debug, Clone, Copy)]
pub struct DrawParams<'a> {
    /// The camera.
    pub camera: &'a OrbitCamera,
    /// Index of the VBO holding the newest positions (`backend.front()`).
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

/// A finished body draw: its start on the GL clock (a `GL_TIMESTAMP` query put right before
/// it) and its GL time (`GL_TIME_ELAPSED`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimedDraw {
    /// GL time (ns) when the commands before the draw were done: the draw's earliest start.
    pub start_gl_ns: i64,
    /// GL time of the draw, ms; `None` where the driver gave a bogus interval (llvmpipe's first).
    pub ms: Option<f64>,
}

/// GL timer queries (`GL_TIME_ELAPSED`) in a small ring, read without stalling; with
/// timestamps on ([`Renderer::set_timestamps`], desktop GL), a `GL_TIMESTAMP` query before each.
#[derive(Debug)]
struct GpuTimer {
    free: Vec<glow::NativeQuery>,
    in_flight: VecDeque<(glow::NativeQuery, Option<glow::NativeQuery>)>,
    active: Option<(glow::NativeQuery, Option<glow::NativeQuery>)>,
    /// Queries for the `GL_TIMESTAMP`s (made when timestamps are turned on).
    free_stamps: Vec<glow::NativeQuery>,
    stamps: bool,
    /// Draws read since the last [`Renderer::take_timed_draws`] (timestamps on only).
    finished: Vec<TimedDraw>,
    is_gles: bool,
    last_ms: Option<f64>,
}

impl GpuTimer {
    fn new(gl: &Gl<'_>, info: &GlInfo) -> Self {
        let mut free = Vec::new();
        if info.timer_query {
            for _ in 0..4 {
                match gl.create_query() {
                    Ok(q) => free.push(q),
                    Err(e) => tracing::debug!(error = %e, "glGenQueries failed; no GL draw times"),
                }
            }
        }
        let is_gles = info.is_gles;
        Self { free, in_flight: VecDeque::new(), active: None, free_stamps: Vec::new(), stamps: false, finished: Vec::new(), is_gles, last_ms: None }
    }

    /// Timestamps on (desktop GL with timer queries only; `false` when this GL cannot).
    fn set_stamps(&mut self, gl: &Gl<'_>, on: bool) -> bool {
        let has_queries = !self.free.is_empty() || !self.in_flight.is_empty();
        let can = !self.is_gles && has_queries;
        self.stamps = on && can;
        let stamps_made = self.free_stamps.len() + self.in_flight.iter().filter(|(_, t)| t.is_some()).count();
        if self.stamps && stamps_made == 0 {
            for _ in 0..4 {
                if let Ok(q) = gl.create_query() {
                    self.free_stamps.push(q);
                }
            }
        }
        if !self.stamps {
            self.finished.clear();
        }
        self.stamps
    }

    fn begin(&mut self, gl: &Gl<'_>) {
        // Only built with queries when GlInfo::timer_query says GL_TIME_ELAPSED works.
        if let Some(q) = self.free.pop() {
            let stamp = if self.stamps { self.free_stamps.pop() } else { None };
            if let Some(t) = stamp {
                gl.query_counter(t, glow::TIMESTAMP);
            }
            gl.begin_query(glow::TIME_ELAPSED, q);
            self.active = Some((q, stamp));
        }
    }

    fn end(&mut self, gl: &Gl<'_>) {
        if let Some(q) = self.active.take() {
            gl.end_query(glow::TIME_ELAPSED);
            self.in_flight.push_back(q);
        }
    }

    /// Read finished queries, oldest first; with `wait`, block on all of them (headless).
    fn poll(&mut self, gl: &Gl<'_>, wait: bool) {
        if self.is_gles && !self.in_flight.is_empty() && gl.gpu_disjoint() {
            // Results of the queries in flight are meaningless; recycle them unread.
            self.free.extend(self.in_flight.drain(..).map(|(q, _)| q));
            return;
        }
        while let Some(&(q, stamp)) = self.in_flight.front() {
            let ready = |query: glow::NativeQuery| gl.get_query_parameter_u32(query, glow::QUERY_RESULT_AVAILABLE) != 0;
            let available = wait || (ready(q) && stamp.is_none_or(ready));
            if !available {
                break;
            }
            // Waits for the results when `wait`; else both are available.
            let ns = gl.get_query_parameter_u64(q, glow::QUERY_RESULT);
            let ms = ns as f64 * 1e-6;
            // Some drivers (llvmpipe) report a bogus first interval; a draw never takes 10 s.
            if ms < 1e4 {
                self.last_ms = Some(ms);
            }
            if let Some(t) = stamp {
                let start = gl.get_query_parameter_u64(t, glow::QUERY_RESULT);
                if self.stamps {
                    self.finished.push(TimedDraw { start_gl_ns: start as i64, ms: (ms < 1e4).then_some(ms) });
                }
                self.free_stamps.push(t);
            }
            self.in_flight.pop_front();
            self.free.push(q);
        }
    }

    fn destroy(&mut self, gl: &Gl<'_>) {
        let pairs = self.in_flight.drain(..).chain(self.active.take());
        let all: Vec<glow::NativeQuery> = pairs.flat_map(|(q, t)| std::iter::once(q).chain(t)).chain(self.free.drain(..)).chain(self.free_stamps.drain(..)).collect();
        for q in all {
            gl.delete_query(q);
        }
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

/// Compile one shader stage with the `#version` line for this context.
fn compile(gl: &Gl<'_>, is_gles: bool, kind: u32, src: &str, name: &str) -> anyhow::Result<glow::NativeShader> {
    let header = if is_gles { "#version 300 es\nprecision highp float;\n" } else { "#version 330 core\n" };
    let full = format!("{header}#line 1\n{src}");
    let sh = gl.create_shader(kind).map_err(|e| anyhow!("glCreateShader: {e}"))?;
    gl.shader_source(sh, &full);
    gl.compile_shader(sh);
    if !gl.get_shader_compile_status(sh) {
        let log = gl.get_shader_info_log(sh);
        gl.delete_shader(sh);
        anyhow::bail!("compiling shaders/{name}: {log}");
    }
    Ok(sh)
}

/// Compile and link the body program.
fn build_program(gl: &Gl<'_>, is_gles: bool) -> anyhow::Result<glow::NativeProgram> {
    link_program(gl, is_gles, (VERT_SRC, "bodies.vert"), (FRAG_SRC, "bodies.frag"))
}

/// Compile and link a program from a vertex and a fragment shader (source, file name).
fn link_program(gl: &Gl<'_>, is_gles: bool, vert: (&str, &str), frag: (&str, &str)) -> anyhow::Result<glow::NativeProgram> {
    let vs = compile(gl, is_gles, glow::VERTEX_SHADER, vert.0, vert.1)?;
    let fs = match compile(gl, is_gles, glow::FRAGMENT_SHADER, frag.0, frag.1) {
        Ok(fs) => fs,
        Err(e) => {
            gl.delete_shader(vs);
            return Err(e);
        }
    };
    let p = match gl.create_program() {
        Ok(p) => p,
        Err(e) => {
            gl.delete_shader(vs);
            gl.delete_shader(fs);
            anyhow::bail!("glCreateProgram: {e}");
        }
    };
    gl.attach_shader(p, vs);
    gl.attach_shader(p, fs);
    gl.link_program(p);
    gl.detach_shader(p, vs);
    gl.detach_shader(p, fs);
    gl.delete_shader(vs);
    gl.delete_shader(fs);
    if !gl.get_program_link_status(p) {
        let log = gl.get_program_info_log(p);
        gl.delete_program(p);
        anyhow::bail!("linking shaders/{} + {}: {log}", vert.1, frag.1);
    }
    Ok(p)
}

/// True for GL renderers that rasterize on the CPU (Mesa's llvmpipe and softpipe, SwiftShader),
/// where the float light buffer costs more than it shows.
fn software_rasterizer(renderer: &str) -> bool {
    let r = renderer.to_ascii_lowercase();
    ["llvmpipe", "softpipe", "swiftshader", "software rasterizer"].iter().any(|s| r.contains(s))
}

/// Whether to sum the light in a float buffer and tone-map it: `NBODY_TONEMAP=on` or `off`
/// decides; else on for desktop GL that is not a software rasterizer.
fn tonemap_wanted(is_gles: bool, renderer: &str) -> bool {
    match std::env::var("NBODY_TONEMAP").ok().as_deref().map(str::trim) {
        Some("on") => !is_gles,
        Some("off") => false,
        _ => !is_gles && !software_rasterizer(renderer),
    }
}

/// The half-float light buffer: an FBO with an `RGBA16F` texture of the target's size.
#[derive(Debug)]
struct LightBuffer {
    fbo: glow::NativeFramebuffer,
    tex: glow::NativeTexture,
    size: [u32; 2],
}

/// The tone-mapping pass: its program, an empty VAO (the triangle comes from `gl_VertexID`) and
/// the light buffer.
#[derive(Debug)]
struct Tonemap {
    program: glow::NativeProgram,
    vao: glow::NativeVertexArray,
    u_light: Option<glow::NativeUniformLocation>,
    u_background: Option<glow::NativeUniformLocation>,
    light: Option<LightBuffer>,
}

impl Tonemap {
    fn new(gl: &Gl<'_>) -> anyhow::Result<Tonemap> {
        let program = link_program(gl, false, (TONEMAP_VERT_SRC, "tonemap.vert"), (TONEMAP_FRAG_SRC, "tonemap.frag"))?;
        let vao = match gl.create_vertex_array() {
            Ok(v) => v,
            Err(e) => {
                gl.delete_program(program);
                anyhow::bail!("glGenVertexArrays: {e}");
            }
        };
        let (u_light, u_background) = (gl.get_uniform_location(program, "u_light"), gl.get_uniform_location(program, "u_background"));
        Ok(Tonemap { program, vao, u_light, u_background, light: None })
    }

    /// The light buffer for a `size` target: kept, or (re)made. `None` when GL cannot make a
    /// complete one (the caller then draws without tone mapping).
    fn light(&mut self, gl: &Gl<'_>, size: [u32; 2]) -> Option<glow::NativeFramebuffer> {
        if let Some(l) = self.light.as_ref().filter(|l| l.size == size) {
            return Some(l.fbo);
        }
        if let Some(l) = self.light.take() {
            gl.delete_framebuffer(l.fbo);
            gl.delete_texture(l.tex);
        }
        let tex = gl.create_texture().ok()?;
        gl.bind_texture(glow::TEXTURE_2D, Some(tex));
        gl.tex_image_2d_empty(glow::TEXTURE_2D, glow::RGBA16F, size[0] as i32, size[1] as i32, glow::RGBA, glow::HALF_FLOAT);
        gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MIN_FILTER, glow::NEAREST as i32);
        gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MAG_FILTER, glow::NEAREST as i32);
        gl.bind_texture(glow::TEXTURE_2D, None);
        let Ok(fbo) = gl.create_framebuffer() else {
            gl.delete_texture(tex);
            return None;
        };
        gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
        gl.framebuffer_texture_2d(glow::FRAMEBUFFER, glow::COLOR_ATTACHMENT0, glow::TEXTURE_2D, Some(tex), 0);
        if gl.check_framebuffer_status(glow::FRAMEBUFFER) != glow::FRAMEBUFFER_COMPLETE {
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
            gl.delete_framebuffer(fbo);
            gl.delete_texture(tex);
            return None;
        }
        self.light = Some(LightBuffer { fbo, tex, size });
        Some(fbo)
    }

    /// Map the light buffer into the bound target (`w` × `h`): one full-screen triangle.
    fn resolve(&self, gl: &Gl<'_>) {
        let Some(l) = &self.light else { return };
        gl.disable(glow::BLEND);
        gl.use_program(Some(self.program));
        gl.active_texture(glow::TEXTURE0);
        gl.bind_texture(glow::TEXTURE_2D, Some(l.tex));
        gl.uniform_1_i32(self.u_light.as_ref(), 0);
        gl.uniform_3_f32(self.u_background.as_ref(), BACKGROUND[0], BACKGROUND[1], BACKGROUND[2]);
        gl.bind_vertex_array(Some(self.vao));
        // SAFETY: the VAO enables no vertex attribute array (its positions come from
        // gl_VertexID), so the draw reads no vertex buffer.
        unsafe { gl.draw_arrays(glow::TRIANGLES, 0, 3) };
        gl.bind_vertex_array(None);
        gl.bind_texture(glow::TEXTURE_2D, None);
        gl.use_program(None);
    }

    fn destroy(&mut self, gl: &Gl<'_>) {
        if let Some(l) = self.light.take() {
            gl.delete_framebuffer(l.fbo);
            gl.delete_texture(l.tex);
        }
        gl.delete_vertex_array(self.vao);
        gl.delete_program(self.program);
    }
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
            is_gles,
            speed_ref: 1.0,
            world_size: 0.01,
            bounds: (Vec3::ZERO, 1.0),
            max_point_px,
            sprite_cap: 64.0,
            snapshot: None,
            tonemap: tonemap_wanted(is_gles, &info.renderer).then(|| Tonemap::new(gl)).and_then(|t| {
                t.map_err(|e| tracing::warn!("no tone mapping (the light adds into the target directly): {e:#}")).ok()
            }),
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
        let mut r: Vec<f32> =
            bodies.pos.iter().map(|p| (Vec3::new(p[0], p[1], p[2]) - center).length()).filter(|r| r.is_finite()).collect();
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
    /// external backend's imported buffers, `SimBackend::draw_buffers` of the backends). The
    /// attribute arrays are set up from the buffers at every draw, so any pair works.
    pub fn draw_from(&mut self, gl: Gl<'_>, target: &RenderTarget, p: &DrawParams<'_>, wait_timer: bool, source: Option<PositionVbos>) {
        let vbos = source.unwrap_or(self.vbos);
        let g = gl;
        let gl = &g;
        let [w, h] = target.size();
        if w == 0 || h == 0 || self.destroyed {
            return;
        }
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
        let back = 1 - front;
        let aspect = w as f32 / h as f32;
        // Shift the image in clip space so the camera target sits in the middle of the part of
        // the target the overlay leaves free (x' = x + ox·w moves NDC x by ox).
        let left = p.scene_left.clamp(0.0, w as f32 * 0.75);
        let ox = left / w as f32;
        let view_proj = glam::Mat4::from_translation(Vec3::new(ox, 0.0, 0.0)) * p.camera.view_proj(aspect);
        let speed_scale = if p.time_span > 0.0 { 1.0 / (p.time_span * 2.0 * self.speed_ref) } else { 0.0 };
        let intensity = (4000.0 / vbos.n.max(1) as f32).clamp(0.15, 1.0);
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
        if light.is_some() {
            target.bind(*gl);
            gl.viewport(0, 0, w as i32, h as i32);
            if let Some(t) = &self.tonemap {
                t.resolve(gl);
            }
        }
        self.timer.end(gl);
        self.timer.poll(gl, wait_timer);
        self.update_trail(gl, vbos.buffers[front], vbos.n, p.advanced);
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
