//! [`Gl`]: the few GL calls the app makes, as safe methods. This is where the app's GL `unsafe`
//! lives.
//!
//! glow marks every GL call `unsafe` because GL has rules the compiler cannot see. The rules that
//! matter for memory safety, and how this wrapper keeps them:
//!
//! 1. **A current context.** GL calls need the context current on the calling thread. A [`Gl`]
//!    is the proof: it is handed out only by a [`CurrentContext`], which the owners of a context
//!    ([`super::context::HeadlessContext`], [`super::window::WindowContext`]) make right where they
//!    make their context current, on the one thread that draws, and keep current until they drop
//!    (the headless owner releases it only while a `Send` closure runs, which can hold no `Gl`:
//!    [`super::context::HeadlessContext::without_current`]).
//!    A `CurrentContext` is not `Send`, so the proof cannot travel to another thread. Functions
//!    that need a current context take a `Gl` instead of assuming one.
//! 2. **Client memory.** Calls that read or write client memory get it from Rust slices whose
//!    length glow passes on (`glBufferData`, `glBufferSubData`, uniforms), or check the size
//!    here (`glReadPixels`: pack state reset, slice length checked). Queries that write through
//!    a pointer are offered only for parameters with a known result size.
//! 3. **Strings.** `glGetString` is only asked for names that always return a string.
//! 4. **Draws** read vertex buffers on the GPU: [`Gl::draw_arrays`] stays `unsafe`, its caller
//!    shows that the enabled attribute arrays cover the vertices drawn.
//!
//! Everything else (object names of another context, wrong enums, bad sizes) is a GL *error*,
//! not undefined behaviour.

use std::marker::PhantomData;
use std::sync::Arc;

use glow::HasContext as _;

/// A GL context made current on this thread by its owner: the owned form of the proof [`Gl`]
/// borrows from. Every clone keeps the context itself alive (`keep`: the EGL/glutin objects), so
/// no clone can outlive it; `Rc` makes it neither `Send` nor `Sync`.
#[derive(Clone)]
pub struct CurrentContext {
    gl: Arc<glow::Context>,
    _keep: std::rc::Rc<dyn std::any::Any>,
}

impl std::fmt::Debug for CurrentContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CurrentContext")
    }
}

impl CurrentContext {
    /// Wrap the function table of a context that was just made current; `keep` owns the
    /// context (and its surface and display), which then lives as long as any clone.
    ///
    /// # Safety
    /// `gl`'s context must be current on this thread, owned by `keep`, and never released from
    /// this thread (made not current) while this value or a clone lives, except for a span in
    /// which no [`Gl`] can be used and after which it is current again (the `Send` closure of
    /// [`super::context::HeadlessContext::without_current`]).
    pub unsafe fn assume_current(gl: Arc<glow::Context>, keep: std::rc::Rc<dyn std::any::Any>) -> Self {
        CurrentContext { gl, _keep: keep }
    }

    /// The proof for GL calls, borrowed from this value.
    pub fn gl(&self) -> Gl<'_> {
        Gl { gl: &self.gl, _not_send: PhantomData }
    }

    /// The function table, shared (egui's painter keeps one).
    pub fn shared(&self) -> Arc<glow::Context> {
        Arc::clone(&self.gl)
    }
}

/// A GL context known to be current on this thread (see the module docs): made by
/// [`CurrentContext::gl`], or by the `unsafe` [`Gl::new`].
#[derive(Clone, Copy)]
pub struct Gl<'a> {
    gl: &'a glow::Context,
    /// Not `Send` or `Sync`: the proof holds on the thread it was made on only.
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for Gl<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gl")
    }
}

/// Safe forwarding methods for calls that only take enums, numbers, object names or slices
/// whose length glow passes to GL.
macro_rules! forward {
    ($( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)?; )*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, $($arg: $ty),*) $(-> $ret)? {
                // SAFETY: rule 1 of the module docs (the context is current: `Gl::new`'s contract);
                // the arguments are enums, numbers, object names or slices whose length glow
                // passes on, so a wrong value is a GL error, never a stray memory access.
                unsafe { self.gl.$name($($arg),*) }
            }
        )*
    };
}

impl<'a> Gl<'a> {
    /// Wrap `gl`.
    ///
    /// # Safety
    /// `gl`'s context must be current on this thread for as long as the wrapper is used.
    pub unsafe fn new(gl: &'a glow::Context) -> Self {
        Self { gl, _not_send: PhantomData }
    }

    /// The wrapped glow context.
    pub fn raw(&self) -> &'a glow::Context {
        self.gl
    }

    forward! {
        /// glViewport.
        fn viewport(x: i32, y: i32, width: i32, height: i32);
        /// glEnable.
        fn enable(cap: u32);
        /// glDisable.
        fn disable(cap: u32);
        /// glClearColor.
        fn clear_color(r: f32, g: f32, b: f32, a: f32);
        /// glClear.
        fn clear(mask: u32);
        /// glScissor.
        fn scissor(x: i32, y: i32, width: i32, height: i32);
        /// glBlendEquation.
        fn blend_equation(mode: u32);
        /// glBlendFunc.
        fn blend_func(src: u32, dst: u32);
        /// glFinish.
        fn finish();
        /// glFlush.
        fn flush();
        /// glGetError.
        fn get_error() -> u32;
        /// glReadBuffer.
        fn read_buffer(src: u32);
        /// glGenBuffers (one).
        fn create_buffer() -> Result<glow::NativeBuffer, String>;
        /// glBindBuffer.
        fn bind_buffer(target: u32, buffer: Option<glow::NativeBuffer>);
        /// glBufferData from a slice (size = its length).
        fn buffer_data_u8_slice(target: u32, data: &[u8], usage: u32);
        /// glBufferData of `size` bytes with no data (contents undefined).
        fn buffer_data_size(target: u32, size: i32, usage: u32);
        /// glBufferSubData from a slice (size = its length; GL checks offset + size).
        fn buffer_sub_data_u8_slice(target: u32, offset: i32, data: &[u8]);
        /// glDeleteBuffers (one).
        fn delete_buffer(buffer: glow::NativeBuffer);
        /// glGenVertexArrays (one).
        fn create_vertex_array() -> Result<glow::NativeVertexArray, String>;
        /// glBindVertexArray.
        fn bind_vertex_array(vao: Option<glow::NativeVertexArray>);
        /// glDeleteVertexArrays (one).
        fn delete_vertex_array(vao: glow::NativeVertexArray);
        /// glEnableVertexAttribArray.
        fn enable_vertex_attrib_array(index: u32);
        /// glVertexAttribPointer with a byte offset into the bound GL_ARRAY_BUFFER.
        fn vertex_attrib_pointer_f32(index: u32, size: i32, data_type: u32, normalized: bool, stride: i32, offset: i32);
        /// glCreateShader.
        fn create_shader(kind: u32) -> Result<glow::NativeShader, String>;
        /// glShaderSource (one string, with its length).
        fn shader_source(shader: glow::NativeShader, source: &str);
        /// glCompileShader.
        fn compile_shader(shader: glow::NativeShader);
        /// GL_COMPILE_STATUS of a shader.
        fn get_shader_compile_status(shader: glow::NativeShader) -> bool;
        /// The info log of a shader.
        fn get_shader_info_log(shader: glow::NativeShader) -> String;
        /// glDeleteShader.
        fn delete_shader(shader: glow::NativeShader);
        /// glCreateProgram.
        fn create_program() -> Result<glow::NativeProgram, String>;
        /// glAttachShader.
        fn attach_shader(program: glow::NativeProgram, shader: glow::NativeShader);
        /// glDetachShader.
        fn detach_shader(program: glow::NativeProgram, shader: glow::NativeShader);
        /// glLinkProgram.
        fn link_program(program: glow::NativeProgram);
        /// GL_LINK_STATUS of a program.
        fn get_program_link_status(program: glow::NativeProgram) -> bool;
        /// The info log of a program.
        fn get_program_info_log(program: glow::NativeProgram) -> String;
        /// glDeleteProgram.
        fn delete_program(program: glow::NativeProgram);
        /// glUseProgram.
        fn use_program(program: Option<glow::NativeProgram>);
        /// glGetUniformLocation.
        fn get_uniform_location(program: glow::NativeProgram, name: &str) -> Option<glow::NativeUniformLocation>;
        /// glUniform1f.
        fn uniform_1_f32(location: Option<&glow::NativeUniformLocation>, x: f32);
        /// glUniformMatrix4fv (count = slice length / 16).
        fn uniform_matrix_4_f32_slice(location: Option<&glow::NativeUniformLocation>, transpose: bool, v: &[f32]);
        /// glGenFramebuffers (one).
        fn create_framebuffer() -> Result<glow::NativeFramebuffer, String>;
        /// glBindFramebuffer.
        fn bind_framebuffer(target: u32, fbo: Option<glow::NativeFramebuffer>);
        /// glCheckFramebufferStatus.
        fn check_framebuffer_status(target: u32) -> u32;
        /// glDeleteFramebuffers (one).
        fn delete_framebuffer(fbo: glow::NativeFramebuffer);
        /// glGenRenderbuffers (one).
        fn create_renderbuffer() -> Result<glow::NativeRenderbuffer, String>;
        /// glBindRenderbuffer.
        fn bind_renderbuffer(target: u32, rb: Option<glow::NativeRenderbuffer>);
        /// glRenderbufferStorage.
        fn renderbuffer_storage(target: u32, internal_format: u32, width: i32, height: i32);
        /// glFramebufferRenderbuffer.
        fn framebuffer_renderbuffer(target: u32, attachment: u32, rb_target: u32, rb: Option<glow::NativeRenderbuffer>);
        /// glDeleteRenderbuffers (one).
        fn delete_renderbuffer(rb: glow::NativeRenderbuffer);
        /// glGenQueries (one).
        fn create_query() -> Result<glow::NativeQuery, String>;
        /// glBeginQuery.
        fn begin_query(target: u32, query: glow::NativeQuery);
        /// glEndQuery.
        fn end_query(target: u32);
        /// glDeleteQueries (one).
        fn delete_query(query: glow::NativeQuery);
        /// glQueryCounter (`target` GL_TIMESTAMP: the GL time when the commands before it are done).
        fn query_counter(query: glow::NativeQuery, target: u32);
        /// glFenceSync (GL 3.2, GLES 3.0).
        fn fence_sync(condition: u32, flags: u32) -> Result<glow::NativeFence, String>;
        /// glClientWaitSync; `timeout` in ns.
        fn client_wait_sync(fence: glow::NativeFence, flags: u32, timeout: i32) -> u32;
        /// glDeleteSync.
        fn delete_sync(fence: glow::NativeFence);
        /// glCopyBufferSubData (GL checks both ranges against the buffers' sizes).
        fn copy_buffer_sub_data(src_target: u32, dst_target: u32, src_offset: i32, dst_offset: i32, size: i32);
        /// glGetBufferSubData into a slice (size = its length; GL checks offset + size).
        fn get_buffer_sub_data(target: u32, offset: i32, dst_data: &mut [u8]);
        /// glGenTextures (one).
        fn create_texture() -> Result<glow::NativeTexture, String>;
        /// glBindTexture.
        fn bind_texture(target: u32, texture: Option<glow::NativeTexture>);
        /// glActiveTexture.
        fn active_texture(unit: u32);
        /// glTexParameteri.
        fn tex_parameter_i32(target: u32, parameter: u32, value: i32);
        /// glFramebufferTexture2D.
        fn framebuffer_texture_2d(target: u32, attachment: u32, texture_target: u32, texture: Option<glow::NativeTexture>, level: i32);
        /// glDeleteTextures (one).
        fn delete_texture(texture: glow::NativeTexture);
        /// glUniform1i.
        fn uniform_1_i32(location: Option<&glow::NativeUniformLocation>, x: i32);
        /// glUniform3f.
        fn uniform_3_f32(location: Option<&glow::NativeUniformLocation>, x: f32, y: f32, z: f32);
    }

    /// glCopyTexSubImage2D of the `width` × `height` region at (0, 0) of the read framebuffer
    /// into level 0 of the texture bound to `GL_TEXTURE_2D`, at (0, 0).
    pub fn copy_read_framebuffer_to_texture(&self, width: i32, height: i32) {
        // SAFETY: rule 1 (current context); numbers only, and no client memory: a region outside
        // the framebuffer or the texture is a GL error (GL checks it against both).
        unsafe { self.gl.copy_tex_sub_image_2d(glow::TEXTURE_2D, 0, 0, 0, 0, 0, width, height) }
    }

    /// glTexImage2D with no client data: allocates a `width` × `height` level 0 of the bound
    /// texture, contents undefined.
    pub fn tex_image_2d_empty(&self, target: u32, internal_format: u32, width: i32, height: i32, format: u32, ty: u32) {
        // SAFETY: rule 1 (current context); no client memory is read (no data pointer, and the
        // pixel-unpack buffer binding is not used by this renderer).
        unsafe { self.gl.tex_image_2d(target, 0, internal_format as i32, width, height, 0, format, ty, glow::PixelUnpackData::Slice(None)) }
    }

    /// glGetQueryObjectuiv. Needs the query-object entry points (`GlInfo::timer_query`);
    /// glow panics when they did not resolve.
    pub fn get_query_parameter_u32(&self, query: glow::NativeQuery, pname: u32) -> u32 {
        // SAFETY: rule 1 (current context); the result is one GLuint written into glow's local.
        unsafe { self.gl.get_query_parameter_u32(query, pname) }
    }

    /// glGetQueryObjectui64v. Needs the query-object entry points, like
    /// [`Gl::get_query_parameter_u32`].
    pub fn get_query_parameter_u64(&self, query: glow::NativeQuery, pname: u32) -> u64 {
        // SAFETY: rule 1 (current context); the result is one GLuint64 written into glow's local.
        unsafe { self.gl.get_query_parameter_u64(query, pname) }
    }

    /// `GL_TIMESTAMP` (GL 3.3 / ARB_timer_query): the GL server's time now, ns, "after all
    /// previous commands have reached the GL server but have not yet necessarily executed"
    /// (`glGet`, OpenGL 4.6 core profile). Desktop GL with timer queries only.
    pub fn timestamp_ns(&self) -> i64 {
        // SAFETY: rule 1; GL_TIMESTAMP is a single 64-bit integer, the one GLint64 glow's local holds.
        unsafe { self.gl.get_parameter_i64(glow::TIMESTAMP) }
    }

    /// GL_MAX_RENDERBUFFER_SIZE.
    pub fn max_renderbuffer_size(&self) -> i32 {
        // SAFETY: rule 1; GL_MAX_RENDERBUFFER_SIZE is a single integer (GL 3.3, GLES 3.0), the
        // one GLint glow's local holds.
        unsafe { self.gl.get_parameter_i32(glow::MAX_RENDERBUFFER_SIZE) }
    }

    /// `GL_GPU_DISJOINT_EXT` (EXT_disjoint_timer_query): timer results since the last read are
    /// invalid. Only ask with that extension.
    pub fn gpu_disjoint(&self) -> bool {
        const GPU_DISJOINT_EXT: u32 = 0x8FBB;
        // SAFETY: rule 1; GL_GPU_DISJOINT_EXT is a single boolean-as-integer.
        unsafe { self.gl.get_parameter_i32(GPU_DISJOINT_EXT) != 0 }
    }

    /// GL_ALIASED_POINT_SIZE_RANGE: smallest and largest point size (pixels).
    pub fn aliased_point_size_range(&self) -> [f32; 2] {
        let mut range = [1.0f32, 64.0];
        // SAFETY: rule 1; GL_ALIASED_POINT_SIZE_RANGE writes exactly two floats, the slice's length.
        unsafe { self.gl.get_parameter_f32_slice(glow::ALIASED_POINT_SIZE_RANGE, &mut range) };
        range
    }

    /// GL_VENDOR, GL_RENDERER and GL_VERSION.
    pub fn strings(&self) -> (String, String, String) {
        let get = |name: u32| {
            // SAFETY: rule 1 and rule 3: `name` is one of GL_VENDOR, GL_RENDERER, GL_VERSION
            // (the calls below), which always give a static string.
            unsafe { self.gl.get_parameter_string(name) }
        };
        (get(glow::VENDOR), get(glow::RENDERER), get(glow::VERSION))
    }

    /// glReadPixels of `width` × `height` RGBA8 pixels at (0, 0) of the read framebuffer into
    /// `out` (rows bottom first, tightly packed).
    ///
    /// # Errors
    /// `out` is shorter than `width · height · 4` bytes.
    pub fn read_pixels_rgba(&self, width: u32, height: u32, out: &mut [u8]) -> anyhow::Result<()> {
        let need = width as usize * height as usize * 4;
        if out.len() < need || i32::try_from(width).is_err() || i32::try_from(height).is_err() {
            anyhow::bail!("glReadPixels of {width}×{height} RGBA8 needs {need} bytes, got {}", out.len());
        }
        self.bind_buffer(glow::PIXEL_PACK_BUFFER, None);
        self.tightly_packed_rows();
        // SAFETY: rule 1 and rule 2: no pixel-pack buffer is bound and the pack state above makes
        // GL write exactly width·height·4 bytes from the start of `out`, which is at least that
        // long (checked above).
        unsafe {
            self.gl.read_pixels(0, 0, width as i32, height as i32, glow::RGBA, glow::UNSIGNED_BYTE, glow::PixelPackData::Slice(Some(out)));
        }
        Ok(())
    }

    /// glReadPixels of `width` × `height` 8-bit pixels in `format` (`GL_RGBA`, or `GL_BGRA` on
    /// desktop GL) at (0, 0) of the read framebuffer into the pixel-pack buffer `pbo` (bound
    /// here, and unbound after), from its start (4 bytes a pixel, rows bottom first, tightly
    /// packed). Asynchronous: the copy runs on the GPU; a fence after it says when it is done.
    ///
    /// # Errors
    /// `width` or `height` does not fit GL's integers, or `pbo` could not be bound. A pack buffer shorter than
    /// `width · height · 4` bytes is a GL error (`GL_INVALID_OPERATION`), not a memory access.
    pub fn read_pixels_to_pack_buffer(&self, pbo: glow::NativeBuffer, width: u32, height: u32, format: u32) -> anyhow::Result<()> {
        let (Ok(w), Ok(h)) = (i32::try_from(width), i32::try_from(height)) else {
            anyhow::bail!("glReadPixels of {width}×{height}: the size does not fit GL's integers");
        };
        self.bind_pack_buffer(pbo)?;
        self.tightly_packed_rows();
        // SAFETY: rule 1. `pbo` is bound to GL_PIXEL_PACK_BUFFER (checked by
        // `bind_pack_buffer`), so the last argument is a byte offset into that buffer, never a
        // client pointer; GL checks offset + size against the buffer's size and answers
        // GL_INVALID_OPERATION when it does not fit.
        unsafe { self.gl.read_pixels(0, 0, w, h, format, glow::UNSIGNED_BYTE, glow::PixelPackData::BufferOffset(0)) };
        self.bind_buffer(glow::PIXEL_PACK_BUFFER, None);
        Ok(())
    }

    /// Bind `pbo` to GL_PIXEL_PACK_BUFFER and check that it is bound (a name GL does not know
    /// leaves the old binding, possibly none, with only a GL error).
    ///
    /// # Errors
    /// The binding is not `pbo` afterwards.
    fn bind_pack_buffer(&self, pbo: glow::NativeBuffer) -> anyhow::Result<()> {
        self.bind_buffer(glow::PIXEL_PACK_BUFFER, Some(pbo));
        // SAFETY: rule 1; GL_PIXEL_PACK_BUFFER_BINDING is a single integer, the one GLint glow's
        // local holds.
        let bound = unsafe { self.gl.get_parameter_i32(glow::PIXEL_PACK_BUFFER_BINDING) };
        if u32::try_from(bound).ok() != Some(pbo.0.get()) {
            anyhow::bail!("glBindBuffer(GL_PIXEL_PACK_BUFFER, {}) did not bind it (bound: {bound})", pbo.0.get());
        }
        Ok(())
    }

    /// Map the first `len` bytes of the pixel-pack buffer `pbo` for reading
    /// (glMapBufferRange with `GL_MAP_READ_BIT`; GL 3.0, GLES 3.0), hand them to `read`, then
    /// unmap (glUnmapBuffer, also when `read` panics). The slice is only lent to `read`.
    ///
    /// # Safety
    /// `read` must make no GL call: glDeleteBuffers or glBufferData on `pbo` (both safe through
    /// [`Gl`]) would unmap it and free the store under the slice.
    ///
    /// # Errors
    /// `len` does not fit GL's integers, `pbo` could not be bound, or the map failed (the
    /// buffer shorter than `len`, or out of memory): glMapBufferRange returned null. (glow does not return
    /// glUnmapBuffer's answer, so a store lost while mapped goes unseen: a frame of undefined
    /// pixels, never a memory access.)
    pub unsafe fn with_mapped_pack_buffer<R>(&self, pbo: glow::NativeBuffer, len: usize, read: impl FnOnce(&[u8]) -> R) -> anyhow::Result<R> {
        /// Unmaps the bound pixel-pack buffer and unbinds it when dropped.
        struct Unmap<'g>(&'g glow::Context);
        impl Drop for Unmap<'_> {
            fn drop(&mut self) {
                // SAFETY: rule 1 (the Gl this guard was made from proves the context current);
                // the buffer bound to GL_PIXEL_PACK_BUFFER was mapped when the guard was made.
                unsafe {
                    self.0.unmap_buffer(glow::PIXEL_PACK_BUFFER);
                    self.0.bind_buffer(glow::PIXEL_PACK_BUFFER, None);
                }
            }
        }
        let Ok(glen) = i32::try_from(len) else {
            anyhow::bail!("glMapBufferRange of {len} bytes: the size does not fit GL's integers");
        };
        let target = glow::PIXEL_PACK_BUFFER;
        self.bind_pack_buffer(pbo)?;
        // SAFETY: rule 1; the call maps bytes 0..len of the bound buffer for reading and returns
        // null on any error (checked below), so no pointer is used unless GL gave one.
        let ptr = unsafe { self.gl.map_buffer_range(target, 0, glen, glow::MAP_READ_BIT) };
        if ptr.is_null() {
            // SAFETY: rule 1; reads and clears the error flag only.
            let error = unsafe { self.gl.get_error() };
            self.bind_buffer(target, None);
            anyhow::bail!("glMapBufferRange of {len} bytes for reading failed (GL error 0x{error:04X})");
        }
        let _unmap = Unmap(self.gl);
        // SAFETY: a non-null glMapBufferRange result points to `len` readable bytes of the
        // buffer's store, valid until the unmap (`_unmap`, after `read` returns or unwinds); GL
        // does not write a buffer mapped for reading only, and `read` makes no GL call that could
        // unmap or free it (this function's contract).
        Ok(read(unsafe { std::slice::from_raw_parts(ptr, len) }))
    }

    /// The pack state glReadPixels writes by: rows tightly packed (alignment 1, no row length,
    /// no skipped pixels or rows), so a read writes exactly width · height · bytes per pixel.
    fn tightly_packed_rows(&self) {
        for (pname, value) in [(glow::PACK_ALIGNMENT, 1), (glow::PACK_ROW_LENGTH, 0), (glow::PACK_SKIP_PIXELS, 0), (glow::PACK_SKIP_ROWS, 0)] {
            // SAFETY: rule 1; pixel-store state only.
            unsafe { self.gl.pixel_store_i32(pname, value) };
        }
    }

    /// glDrawArrays.
    ///
    /// # Safety
    /// Every enabled vertex attribute array must be backed by a buffer that holds at least
    /// `first + count` vertices of its stride (GL reads them without bounds checks).
    pub unsafe fn draw_arrays(&self, mode: u32, first: i32, count: i32) {
        // SAFETY: rule 1; the caller keeps this function's contract on the attribute arrays.
        unsafe { self.gl.draw_arrays(mode, first, count) }
    }
}
