//! `GL_EXT_semaphore` + `GL_EXT_semaphore_fd`: GL's side of GPU-side ordering with CUDA. A
//! semaphore exported by Vulkan ([`super::vulkan`]) is imported into GL here
//! (`glGenSemaphoresEXT` → `glImportSemaphoreFdEXT(sem, GL_HANDLE_TYPE_OPAQUE_FD_EXT, fd)`, GL owns
//! `fd` after a successful import); `glSignalSemaphoreEXT` then signals it once the GL commands
//! issued before it have completed, and `glWaitSemaphoreEXT` makes later GL commands wait for it
//! (Khronos registry, `EXT_external_objects.txt`, `EXT_external_objects_fd.txt`). Both name the
//! buffer objects whose memory the other API reads or writes (the "buffer barriers"), so that GL
//! makes its writes visible to, or sees the writes of, the other API. The table is loaded like
//! [`super::memory_object`]'s.
//!
//! Safety: every call needs the GL context that loaded the table current on the calling thread
//! (rule 1 of [`super::gl`]); the methods take the proof of it, a [`Gl`]. GL validates names and
//! enums (a wrong one is a GL error).

use std::ffi::{c_void, CStr};
use std::os::fd::{AsRawFd as _, IntoRawFd as _, OwnedFd};

use super::gl::Gl;
use super::memory_object::{check_extensions, clear_gl_errors, gl_error, gl_table, HANDLE_TYPE_OPAQUE_FD_EXT};

/// The extensions the table needs, as listed by `glGetStringi(GL_EXTENSIONS, i)`.
pub const EXTENSIONS: [&str; 2] = ["GL_EXT_semaphore", "GL_EXT_semaphore_fd"];

gl_table! {
    /// The loaded entry points of `GL_EXT_semaphore(_fd)` for one GL context.
    SemaphoreFns;
    /// `void glGenSemaphoresEXT(GLsizei n, GLuint *semaphores)`.
    gen_semaphores = c"glGenSemaphoresEXT": fn(n: i32, semaphores: *mut u32);
    /// `void glDeleteSemaphoresEXT(GLsizei n, const GLuint *semaphores)`.
    delete_semaphores = c"glDeleteSemaphoresEXT": fn(n: i32, semaphores: *const u32);
    /// `GLboolean glIsSemaphoreEXT(GLuint semaphore)`.
    is_semaphore = c"glIsSemaphoreEXT": fn(semaphore: u32) -> u8;
    /// `void glImportSemaphoreFdEXT(GLuint semaphore, GLenum handleType, GLint fd)`.
    import_semaphore_fd = c"glImportSemaphoreFdEXT": fn(semaphore: u32, handle_type: u32, fd: i32);
    /// `void glWaitSemaphoreEXT(GLuint semaphore, GLuint numBufferBarriers, const GLuint *buffers,
    /// GLuint numTextureBarriers, const GLuint *textures, const GLenum *srcLayouts)`.
    wait_semaphore = c"glWaitSemaphoreEXT": fn(semaphore: u32, num_buffer_barriers: u32, buffers: *const u32, num_texture_barriers: u32, textures: *const u32, src_layouts: *const u32);
    /// `void glSignalSemaphoreEXT(GLuint semaphore, GLuint numBufferBarriers, const GLuint *buffers,
    /// GLuint numTextureBarriers, const GLuint *textures, const GLenum *dstLayouts)`.
    signal_semaphore = c"glSignalSemaphoreEXT": fn(semaphore: u32, num_buffer_barriers: u32, buffers: *const u32, num_texture_barriers: u32, textures: *const u32, dst_layouts: *const u32);
}

impl SemaphoreFns {
    /// Loads the table for the context of `gl` (current) with its `loader`.
    ///
    /// # Errors
    /// A message naming the missing extensions and `GL_RENDERER`, or the entry point that did
    /// not resolve.
    pub fn load(gl: Gl<'_>, loader: impl FnMut(&CStr) -> *const c_void) -> Result<Self, String> {
        let renderer = check_extensions(gl, &EXTENSIONS)?;
        Self::resolve(loader).map_err(|e| format!("{e} on {renderer} (it lists {})", EXTENSIONS.join(" and ")))
    }

    /// A new GL semaphore with the payload of `fd` (`glGenSemaphoresEXT`, `glImportSemaphoreFdEXT`
    /// with `GL_HANDLE_TYPE_OPAQUE_FD_EXT`). GL owns the fd on success; on failure it is closed.
    ///
    /// # Errors
    /// GL gave no name, or raised an error on the import (the semaphore is deleted then).
    pub fn import_fd(&self, gl: Gl<'_>, fd: OwnedFd) -> Result<u32, String> {
        clear_gl_errors(gl);
        let mut sem = 0u32;
        // SAFETY: module docs (current context); GL writes exactly one name (n = 1).
        unsafe { (self.gen_semaphores)(1, &mut sem) };
        match gl_error(gl) {
            None if sem != 0 => {}
            e => return Err(format!("glGenSemaphoresEXT gave {sem} (GL error {e:?})")),
        }
        // SAFETY: module docs; `fd` is a live opaque semaphore fd.
        unsafe { (self.import_semaphore_fd)(sem, HANDLE_TYPE_OPAQUE_FD_EXT, fd.as_raw_fd()) };
        if let Some(e) = gl_error(gl) {
            // Not imported: the fd is still ours and closes with `fd`.
            self.delete(gl, sem);
            return Err(format!("glImportSemaphoreFdEXT refused the Vulkan semaphore's fd (GL error 0x{e:04X})"));
        }
        // Imported (no GL error): GL owns the fd now, whatever follows.
        let _ = fd.into_raw_fd();
        // SAFETY: module docs; `sem` is the name made above.
        if unsafe { (self.is_semaphore)(sem) } == 0 {
            self.delete(gl, sem);
            return Err("glImportSemaphoreFdEXT gave no semaphore object".into());
        }
        Ok(sem)
    }

    /// `glWaitSemaphoreEXT`: GL commands issued after this wait for `sem`, and see what the other
    /// API wrote into `buffers` (GL buffer names).
    pub fn wait(&self, _gl: Gl<'_>, sem: u32, buffers: &[u32]) {
        // SAFETY: module docs; `buffers` holds `len` names read during the call; no texture
        // barriers, so the layouts pointer may be null.
        unsafe { (self.wait_semaphore)(sem, buffers.len() as u32, buffers.as_ptr(), 0, std::ptr::null(), std::ptr::null()) };
    }

    /// `glSignalSemaphoreEXT`: `sem` is signalled once the GL commands issued before have
    /// completed and their writes to `buffers` are visible to the other API. The caller flushes
    /// (`glFlush`) so that the signal is submitted.
    pub fn signal(&self, _gl: Gl<'_>, sem: u32, buffers: &[u32]) {
        // SAFETY: as `wait`.
        unsafe { (self.signal_semaphore)(sem, buffers.len() as u32, buffers.as_ptr(), 0, std::ptr::null(), std::ptr::null()) };
    }

    /// `glDeleteSemaphoresEXT` of one semaphore.
    pub fn delete(&self, _gl: Gl<'_>, sem: u32) {
        // SAFETY: module docs; reads one name.
        unsafe { (self.delete_semaphores)(1, &sem) };
    }
}
