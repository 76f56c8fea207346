//! `GL_EXT_memory_object` + `GL_EXT_memory_object_fd`: the GL side of external-memory interop
//! (the CUDA backend's external-memory storage). glow 0.17 has none of these functions, so they are loaded here,
//! like ash fills its tables: through the context's own `get_proc_address` (EGL's
//! `eglGetProcAddress` headless, glutin's display windowed), once per context, after checking
//! that the context lists both extensions. Every pointer is checked for null at load time; a
//! table exists only when all of them resolved, so nothing here ever calls a null pointer.
//!
//! The functions (Khronos registry, `EXT_external_objects.txt` and `EXT_external_objects_fd.txt`):
//! `glCreateMemoryObjectsEXT` → (optional) `glMemoryObjectParameterivEXT(GL_DEDICATED_MEMORY_OBJECT_EXT)`
//! → `glImportMemoryFdEXT(memory, size, GL_HANDLE_TYPE_OPAQUE_FD_EXT, fd)` (GL owns `fd` after a
//! successful import) → `glBufferStorageMemEXT(target, size, memory, offset)` → … →
//! `glDeleteBuffers` → `glDeleteMemoryObjectsEXT`.
//!
//! Safety: every call needs the GL context that loaded the table current on the calling thread
//! (rule 1 of [`super::gl`]); the methods take the proof of that, a [`Gl`]. Object names, enums and sizes are validated by GL
//! (a wrong one is a GL error); the one call that GL cannot validate, the import of a descriptor
//! with its size, is `unsafe`.

use std::ffi::{c_void, CStr};
use std::os::fd::{AsRawFd as _, IntoRawFd as _, OwnedFd};

use anyhow::{anyhow, bail, Context as _};
use interop::ExportableBuffer;

use super::gl::Gl;

/// `GL_HANDLE_TYPE_OPAQUE_FD_EXT`: the handle type of `glImportMemoryFdEXT` for an opaque POSIX fd.
pub const HANDLE_TYPE_OPAQUE_FD_EXT: u32 = 0x9586;
/// `GL_DEDICATED_MEMORY_OBJECT_EXT`: memory-object parameter, the import is one dedicated allocation.
pub const DEDICATED_MEMORY_OBJECT_EXT: u32 = 0x9581;
/// The extensions the table needs, as listed by `glGetStringi(GL_EXTENSIONS, i)`.
pub const EXTENSIONS: [&str; 2] = ["GL_EXT_memory_object", "GL_EXT_memory_object_fd"];

/// Declares a table of GL extension entry points once: its type, then for each function the
/// field, C name and signature. Nothing else lists the symbols. (Also used by
/// [`super::gl_semaphore`].)
macro_rules! gl_table {
    ($(#[$tdoc:meta])* $table:ident; $( $(#[$doc:meta])* $field:ident = $cname:literal : fn($($arg:ident: $ty:ty),*) $(-> $ret:ty)?; )*) => {
        $(#[$tdoc])*
        pub struct $table {
            $( $(#[$doc])* $field: unsafe extern "system" fn($($arg: $ty),*) $(-> $ret)?, )*
        }

        impl $table {
            /// The C names of every entry point of the table.
            pub const NAMES: &'static [&'static CStr] = &[$($cname),*];

            /// Resolve every entry point with `loader`; the first one missing is the error.
            fn resolve(mut loader: impl FnMut(&CStr) -> *const c_void) -> Result<Self, String> {
                Ok(Self {
                    $( $field: {
                        let p = loader($cname);
                        if p.is_null() {
                            return Err(format!("{} did not resolve", $cname.to_string_lossy()));
                        }
                        // SAFETY: `p` is non-null and is the address the context's loader gives
                        // for this exact C name, whose prototype in the Khronos registry
                        // (glext.h) is the signature declared in this table, with the
                        // platform's GL calling convention ("system" = APIENTRY).
                        unsafe { std::mem::transmute::<*const c_void, unsafe extern "system" fn($($ty),*) $(-> $ret)?>(p) }
                    }, )*
                })
            }

            fn addresses(&self) -> Vec<usize> {
                vec![$(self.$field as usize),*]
            }
        }

        impl std::fmt::Debug for $table {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($table)).field("entry_points", &Self::NAMES.len()).finish_non_exhaustive()
            }
        }

        /// Two tables are equal when they hold the same addresses (the same driver).
        impl PartialEq for $table {
            fn eq(&self, other: &Self) -> bool {
                self.addresses() == other.addresses()
            }
        }
        impl Eq for $table {}
    };
}
pub(super) use gl_table;

gl_table! {
    /// The loaded entry points of `GL_EXT_memory_object(_fd)` for one GL context.
    MemoryObjectFns;
    /// `void glCreateMemoryObjectsEXT(GLsizei n, GLuint *memoryObjects)`.
    create_memory_objects = c"glCreateMemoryObjectsEXT": fn(n: i32, memory_objects: *mut u32);
    /// `void glDeleteMemoryObjectsEXT(GLsizei n, const GLuint *memoryObjects)`.
    delete_memory_objects = c"glDeleteMemoryObjectsEXT": fn(n: i32, memory_objects: *const u32);
    /// `void glMemoryObjectParameterivEXT(GLuint memoryObject, GLenum pname, const GLint *params)`.
    memory_object_parameteriv = c"glMemoryObjectParameterivEXT": fn(memory_object: u32, pname: u32, params: *const i32);
    /// `GLboolean glIsMemoryObjectEXT(GLuint memoryObject)`.
    is_memory_object = c"glIsMemoryObjectEXT": fn(memory_object: u32) -> u8;
    /// `void glImportMemoryFdEXT(GLuint memory, GLuint64 size, GLenum handleType, GLint fd)`.
    import_memory_fd = c"glImportMemoryFdEXT": fn(memory: u32, size: u64, handle_type: u32, fd: i32);
    /// `void glBufferStorageMemEXT(GLenum target, GLsizeiptr size, GLuint memory, GLuint64 offset)`.
    buffer_storage_mem = c"glBufferStorageMemEXT": fn(target: u32, size: isize, memory: u32, offset: u64);
}

/// Why an import did not happen; the descriptor comes back when GL did not take it.
#[derive(Debug)]
pub struct ImportError {
    /// The GL error (`glGetError`) after `glImportMemoryFdEXT`.
    pub gl_error: u32,
    /// The descriptor, still owned by the caller (GL takes it only on success).
    pub fd: OwnedFd,
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "glImportMemoryFdEXT failed with GL error 0x{:04X}", self.gl_error)
    }
}
impl std::error::Error for ImportError {}

/// `GL_RENDERER` when the context of `gl` lists every one of `extensions`; else a message naming
/// the missing ones and the renderer.
pub(super) fn check_extensions(gl: Gl<'_>, extensions: &[&str]) -> Result<String, String> {
    let (_, renderer, _) = gl.strings();
    use glow::HasContext as _;
    let ext = gl.raw().supported_extensions();
    let missing: Vec<&str> = extensions.iter().copied().filter(|e| !ext.contains(*e)).collect();
    if !missing.is_empty() {
        return Err(format!("{} missing on {renderer}", missing.join(" and ")));
    }
    Ok(renderer)
}

/// Drain pending GL errors so that the next `glGetError` belongs to the next call.
pub fn clear_gl_errors(gl: Gl<'_>) {
    for _ in 0..16 {
        if gl.get_error() == glow::NO_ERROR {
            break;
        }
    }
}

/// The first pending GL error, if any.
pub fn gl_error(gl: Gl<'_>) -> Option<u32> {
    let e = gl.get_error();
    (e != glow::NO_ERROR).then_some(e)
}

impl MemoryObjectFns {
    /// Load the table for the context of `gl` (current on this thread) with its `loader`
    /// (`get_proc_address` of the EGL/GLX display that made the context).
    ///
    /// # Errors
    /// A message naming the missing extensions and `GL_RENDERER` (e.g. `"GL_EXT_memory_object_fd
    /// missing on llvmpipe (LLVM 15.0.6, 256 bits)"`), or the entry point that did not resolve.
    pub fn load(gl: Gl<'_>, loader: impl FnMut(&CStr) -> *const c_void) -> Result<Self, String> {
        let renderer = check_extensions(gl, &EXTENSIONS)?;
        Self::resolve(loader).map_err(|e| format!("{e} on {renderer} (it lists {})", EXTENSIONS.join(" and ")))
    }

    /// `glCreateMemoryObjectsEXT` of one object.
    ///
    /// # Errors
    /// GL gave name 0 or raised an error.
    pub fn create_memory_object(&self, gl: Gl<'_>) -> Result<u32, String> {
        clear_gl_errors(gl);
        let mut mem = 0u32;
        // SAFETY: module docs (current context); GL writes exactly one name into `mem` (n = 1).
        unsafe { (self.create_memory_objects)(1, &mut mem) };
        match gl_error(gl) {
            None if mem != 0 => Ok(mem),
            e => Err(format!("glCreateMemoryObjectsEXT gave {mem} (GL error {e:?})")),
        }
    }

    /// `glDeleteMemoryObjectsEXT` of one object (0 and unknown names are ignored by GL).
    pub fn delete_memory_object(&self, _gl: Gl<'_>, mem: u32) {
        // SAFETY: module docs (current context); GL reads one name from `mem` (n = 1).
        unsafe { (self.delete_memory_objects)(1, &mem) };
    }

    /// `glIsMemoryObjectEXT`.
    pub fn is_memory_object(&self, _gl: Gl<'_>, mem: u32) -> bool {
        // SAFETY: module docs (current context); takes a name, returns a GLboolean.
        unsafe { (self.is_memory_object)(mem) != 0 }
    }

    /// `glMemoryObjectParameterivEXT(mem, GL_DEDICATED_MEMORY_OBJECT_EXT, &dedicated)`; must come
    /// before the import.
    pub fn set_dedicated(&self, _gl: Gl<'_>, mem: u32, dedicated: bool) {
        let v = i32::from(dedicated);
        // SAFETY: module docs (current context); GL_DEDICATED_MEMORY_OBJECT_EXT reads one GLint.
        unsafe { (self.memory_object_parameteriv)(mem, DEDICATED_MEMORY_OBJECT_EXT, &v) };
    }

    /// `glImportMemoryFdEXT(mem, size, GL_HANDLE_TYPE_OPAQUE_FD_EXT, fd)`. On success GL owns the
    /// descriptor (it is released from `fd` with `into_raw_fd`, not closed); on a GL error it
    /// comes back in the [`ImportError`] (and closes when that drops).
    ///
    /// # Errors
    /// The GL error after the call.
    ///
    /// # Safety
    /// `size` must be the size in bytes of the allocation behind `fd` (GL cannot check it, and a
    /// larger value lets the GPU reach past the allocation); the context must be current.
    pub unsafe fn import_fd(&self, gl: Gl<'_>, mem: u32, size: u64, fd: OwnedFd) -> Result<(), ImportError> {
        clear_gl_errors(gl);
        // SAFETY: the caller keeps the size contract; `fd` is a live descriptor we own for the
        // duration of the call; the context is current (module docs).
        unsafe { (self.import_memory_fd)(mem, size, HANDLE_TYPE_OPAQUE_FD_EXT, fd.as_raw_fd()) };
        match gl_error(gl) {
            None => {
                // GL owns the descriptor now and closes it with the memory object: do not close it.
                let _ = fd.into_raw_fd();
                Ok(())
            }
            Some(gl_error) => Err(ImportError { gl_error, fd }),
        }
    }

    /// `glBufferStorageMemEXT(target, size, mem, offset)` on the buffer bound to `target`.
    ///
    /// # Errors
    /// The GL error after the call (`GL_INVALID_VALUE` when `offset + size` exceeds the imported size).
    pub fn buffer_storage_mem(&self, gl: Gl<'_>, target: u32, size: usize, mem: u32, offset: u64) -> Result<(), String> {
        let size = isize::try_from(size).map_err(|_| format!("buffer size {size} does not fit GLsizeiptr"))?;
        clear_gl_errors(gl);
        // SAFETY: module docs (current context); numbers and names only, which GL validates
        // against the memory object's imported size.
        unsafe { (self.buffer_storage_mem)(target, size, mem, offset) };
        match gl_error(gl) {
            None => Ok(()),
            Some(e) => Err(format!("glBufferStorageMemEXT({size} bytes, memory object {mem}) failed with GL error 0x{e:04X}")),
        }
    }
}

/// One CUDA allocation as GL sees it: a buffer object whose storage is an imported memory object.
#[derive(Debug, Clone, Copy)]
pub struct Imported {
    /// The GL buffer (`glBufferStorageMemEXT`).
    pub buffer: glow::NativeBuffer,
    /// The GL memory object holding the imported fd.
    pub memory: u32,
}

impl Imported {
    /// Delete the buffer, then the memory object (which closes the fd GL owns). Context current.
    pub fn release(self, gl: Gl<'_>, fns: &MemoryObjectFns) {
        gl.delete_buffer(self.buffer);
        fns.delete_memory_object(gl, self.memory);
    }
}

/// Export the CUDA allocation `buf` as a POSIX fd, import it into GL
/// (`glCreateMemoryObjectsEXT` → `glImportMemoryFdEXT`) and make a `bytes`-byte buffer object on
/// it (`glBufferStorageMemEXT`), as a dedicated memory object when `dedicated`.
///
/// # Errors
/// The export, the import or the buffer storage failed (GL error named); whatever was made is
/// released then (buffer → memory object; the fd closes unless GL took it).
pub fn import_exported(gl: Gl<'_>, fns: &MemoryObjectFns, buf: &ExportableBuffer, bytes: usize, dedicated: bool) -> anyhow::Result<Imported> {
    let fd = buf.export_fd().context("cuMemExportToShareableHandle (POSIX fd)")?;
    let memory = fns.create_memory_object(gl).map_err(|e| anyhow!(e))?;
    if dedicated {
        fns.set_dedicated(gl, memory, true);
    }
    let size = buf.size() as u64;
    // SAFETY: `size` is the size of the cuMemCreate allocation behind `fd` (ExportableBuffer::size,
    // the granularity-rounded size it was created and exported with); the context is current
    // (`gl` proves it).
    if let Err(e) = unsafe { fns.import_fd(gl, memory, size, fd) } {
        fns.delete_memory_object(gl, memory);
        bail!("{e} (memory object {memory}, {size} bytes, dedicated {dedicated})");
        // e.fd closes here
    }
    let buffer = match gl.create_buffer() {
        Ok(b) => b,
        Err(e) => {
            fns.delete_memory_object(gl, memory);
            bail!("glGenBuffers: {e}");
        }
    };
    gl.bind_buffer(glow::ARRAY_BUFFER, Some(buffer));
    let stored = fns.buffer_storage_mem(gl, glow::ARRAY_BUFFER, bytes, memory, 0);
    gl.bind_buffer(glow::ARRAY_BUFFER, None);
    if let Err(e) = stored {
        let imported = Imported { buffer, memory };
        imported.release(gl, fns);
        bail!("{e} (dedicated {dedicated})");
    }
    Ok(Imported { buffer, memory })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_the_khronos_registry() {
        // glext.h: GL_HANDLE_TYPE_OPAQUE_FD_EXT 0x9586, GL_DEDICATED_MEMORY_OBJECT_EXT 0x9581.
        assert_eq!(HANDLE_TYPE_OPAQUE_FD_EXT, 0x9586);
        assert_eq!(DEDICATED_MEMORY_OBJECT_EXT, 0x9581);
        let names: Vec<_> = MemoryObjectFns::NAMES.iter().map(|n| n.to_str().unwrap_or("")).collect();
        for n in ["glCreateMemoryObjectsEXT", "glDeleteMemoryObjectsEXT", "glImportMemoryFdEXT", "glBufferStorageMemEXT"] {
            assert!(names.contains(&n), "{n} is in the table");
        }
    }

    #[test]
    fn a_null_entry_point_is_an_error_naming_it() {
        let e = MemoryObjectFns::resolve(|s| {
            if s == c"glImportMemoryFdEXT" {
                std::ptr::null()
            } else {
                // Any non-null address: the table is never called in this test.
                c"x".as_ptr().cast()
            }
        })
        .err();
        assert_eq!(e.as_deref(), Some("glImportMemoryFdEXT did not resolve"));
    }
}
