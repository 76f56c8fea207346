//! Modules loaded from PTX with JIT logs, and their functions.

use std::ffi::{c_int, c_uint, c_void, CString};
use std::sync::Arc;

use crate::driver::error::{Error, Result};
use crate::safe::context::Context;
use crate::safe::stream::Stream;
use crate::sys::{func_attr, jit, CUfunction, CUmodule};

/// Size of each JIT log buffer, bytes.
const LOG_BYTES: usize = 64 * 1024;

struct ModuleInner {
    ctx: Arc<Context>,
    raw: CUmodule,
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        // SAFETY: loaded in `from_ptx`; functions hold an Arc to us, so none is left.
        drop(unsafe { self.ctx.api().cuModuleUnload(self.raw) });
    }
}

// SAFETY: module and function handles are plain data usable from any thread with the context current.
unsafe impl Send for ModuleInner {}
// SAFETY: as above; no interior mutability.
unsafe impl Sync for ModuleInner {}

/// A module loaded with `cuModuleLoadDataEx`.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
    info_log: String,
    /// Each `.entry` of the PTX text with its parameter list, as the text declares them.
    entries: Arc<Vec<(String, Vec<PtxParam>)>>,
}

/// The type of one kernel parameter as a PTX `.entry` declares it (`.param .u64 name`): what a
/// launch must pass for it. PTX does not tell a pointer from a 64-bit integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PtxParam {
    /// `.u32`, `.s32` or `.b32`: a 4-byte integer.
    B32,
    /// `.u64`, `.s64` or `.b64`: a 64-bit integer or a device pointer.
    B64,
    /// `.f32`.
    F32,
    /// `.f64`.
    F64,
    /// `.b8 name[N]`: N bytes passed by value (a struct or vector type such as `float4`, N = 16).
    Bytes(usize),
    /// Anything else (8- or 16-bit types, arrays of other types): not launched by
    /// [`crate::safe::launch::Launch`].
    Other,
}

/// The `.entry` declarations of a PTX text: each kernel's name and parameter list, in order
/// (PTX ISA, "Kernel Function Parameters"). Text that is not a well-formed entry is skipped.
pub fn ptx_entries(ptx: &str) -> Vec<(String, Vec<PtxParam>)> {
    let mut out = Vec::new();
    let mut rest = ptx;
    while let Some(at) = rest.find(".entry") {
        rest = &rest[at + ".entry".len()..];
        let Some(open) = rest.find('(') else { break };
        let name = rest[..open].trim();
        let Some(close) = rest[open..].find(')') else { break };
        let list = &rest[open + 1..open + close];
        rest = &rest[open + close..];
        if name.is_empty() || name.contains(char::is_whitespace) {
            continue;
        }
        let params = list
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                if let Some(open) = p.find('[') {
                    let bytes = p[open + 1..].trim_end_matches(']').trim().parse::<usize>();
                    return match bytes {
                        Ok(n) if p.split_whitespace().any(|t| t == ".b8") => PtxParam::Bytes(n),
                        _ => PtxParam::Other,
                    };
                }
                match p.split_whitespace().find(|t| t.starts_with('.') && *t != ".param" && !t.starts_with(".align") && *t != ".ptr") {
                    Some(".u32" | ".s32" | ".b32") => PtxParam::B32,
                    Some(".u64" | ".s64" | ".b64") => PtxParam::B64,
                    Some(".f32") => PtxParam::F32,
                    Some(".f64") => PtxParam::F64,
                    _ => PtxParam::Other,
                }
            })
            .collect();
        out.push((name.to_string(), params));
    }
    out
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module").field("info_log", &self.info_log).finish_non_exhaustive()
    }
}

fn log_to_string(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim_end().to_string()
}

impl Module {
    /// JIT-compiles a PTX text for the context's device (`cuModuleLoadDataEx` with
    /// `CU_JIT_INFO_LOG_BUFFER`/`CU_JIT_ERROR_LOG_BUFFER`, 64 KiB each, verbose).
    /// `ptx` may end with one NUL; the driver is always given a NUL-terminated image.
    ///
    /// # Errors
    /// [`Error::InteriorNul`] naming the byte offset of a NUL inside the text;
    /// [`Error::Jit`] with the JIT error log when the driver rejects the PTX (for example
    /// `CUDA_ERROR_UNSUPPORTED_PTX_VERSION` for a `.version` newer than the driver knows).
    #[doc(alias = "cuModuleLoadDataEx")]
    pub fn from_ptx(ctx: &Arc<Context>, ptx: &[u8]) -> Result<Module> {
        let text = ptx.strip_suffix(&[0]).unwrap_or(ptx);
        if let Some(offset) = text.iter().position(|&b| b == 0) {
            return Err(Error::InteriorNul { offset });
        }
        let image = CString::new(text).map_err(|e| Error::InteriorNul { offset: e.nul_position() })?;
        let mut info = vec![0u8; LOG_BYTES];
        let mut error = vec![0u8; LOG_BYTES];
        let mut options: [c_uint; 5] =
            [jit::INFO_LOG_BUFFER, jit::INFO_LOG_BUFFER_SIZE_BYTES, jit::ERROR_LOG_BUFFER, jit::ERROR_LOG_BUFFER_SIZE_BYTES, jit::LOG_VERBOSE];
        // Option values are passed as pointer-sized words: buffers by address, sizes and flags by value.
        let mut values: [*mut c_void; 5] = [
            info.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut::<c_void>(LOG_BYTES),
            error.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut::<c_void>(LOG_BYTES),
            std::ptr::without_provenance_mut::<c_void>(1), // CU_JIT_LOG_VERBOSE = 1, passed by value
        ];
        let mut raw: CUmodule = std::ptr::null_mut();
        // SAFETY: `image` is NUL-terminated PTX; the option arrays have 5 entries each; the log
        // buffers hold LOG_BYTES bytes and live until after the call.
        let r = unsafe {
            ctx.api().cuModuleLoadDataEx(&mut raw, image.as_ptr().cast(), options.len() as c_uint, options.as_mut_ptr(), values.as_mut_ptr())
        };
        match r {
            Ok(()) => Ok(Module {
                inner: Arc::new(ModuleInner { ctx: ctx.clone(), raw }),
                info_log: log_to_string(&info),
                entries: Arc::new(ptx_entries(&String::from_utf8_lossy(text))),
            }),
            Err(Error::Driver { code, name, text, .. }) => {
                let mut log = log_to_string(&error);
                if log.is_empty() {
                    log = log_to_string(&info);
                }
                Err(Error::Jit { code, name, text, log })
            }
            Err(e) => Err(e),
        }
    }

    /// The JIT info log of the load (registers per kernel and so on).
    pub fn info_log(&self) -> &str {
        &self.info_log
    }

    /// The kernel `name` (`cuModuleGetFunction`).
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_FOUND` when the module has no such kernel; [`Error::InvalidArgument`] for a name with NUL.
    #[doc(alias = "cuModuleGetFunction")]
    pub fn function(&self, name: &str) -> Result<Function> {
        let c = CString::new(name).map_err(|_| Error::InvalidArgument(format!("kernel name {name:?} contains NUL")))?;
        let mut raw: CUfunction = std::ptr::null_mut();
        // SAFETY: writes one handle; `c` is NUL-terminated; the module is loaded.
        unsafe { self.inner.ctx.api().cuModuleGetFunction(&mut raw, self.inner.raw, c.as_ptr()) }?;
        let params = self.entries.iter().find(|(n, _)| n == name).map(|(_, p)| Arc::new(p.clone()));
        Ok(Function { module: self.inner.clone(), raw, name: name.to_string(), params })
    }
}

/// Attributes of a kernel (`cuFuncGetAttribute`).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct FunctionAttributes {
    /// Registers per thread.
    pub registers: i32,
    /// Max threads per block this kernel can be launched with.
    pub max_threads_per_block: i32,
    /// Static shared memory, bytes.
    pub static_shared_bytes: i32,
    /// Local memory per thread, bytes (spills and stack).
    pub local_bytes: i32,
    /// Constant memory, bytes.
    pub const_bytes: i32,
    /// PTX ISA virtual architecture it was compiled for (e.g. 75).
    pub ptx_version: i32,
    /// Binary architecture (e.g. 90).
    pub binary_version: i32,
}

/// A kernel of a loaded module. Keeps its module loaded.
#[derive(Clone)]
pub struct Function {
    module: Arc<ModuleInner>,
    raw: CUfunction,
    name: String,
    /// The parameter list of its `.entry` in the module's PTX text (`None`: not found there).
    params: Option<Arc<Vec<PtxParam>>>,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Function {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The raw handle.
    pub fn raw(&self) -> CUfunction {
        self.raw
    }

    /// The kernel's parameter list as its PTX `.entry` declares it; `None` when the module's
    /// text has no such entry (then [`crate::safe::launch::Launch`] refuses to launch it).
    pub fn params(&self) -> Option<&[PtxParam]> {
        self.params.as_deref().map(Vec::as_slice)
    }

    /// One `CU_FUNC_ATTRIBUTE_*` value.
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuFuncGetAttribute")]
    pub fn attribute(&self, attribute: c_int) -> Result<i32> {
        let mut v = 0;
        // SAFETY: writes one int.
        unsafe { self.module.ctx.api().cuFuncGetAttribute(&mut v, attribute, self.raw) }?;
        Ok(v)
    }

    /// All attributes.
    ///
    /// # Errors
    /// The driver's error.
    pub fn attributes(&self) -> Result<FunctionAttributes> {
        Ok(FunctionAttributes {
            registers: self.attribute(func_attr::NUM_REGS)?,
            max_threads_per_block: self.attribute(func_attr::MAX_THREADS_PER_BLOCK)?,
            static_shared_bytes: self.attribute(func_attr::SHARED_SIZE_BYTES)?,
            local_bytes: self.attribute(func_attr::LOCAL_SIZE_BYTES)?,
            const_bytes: self.attribute(func_attr::CONST_SIZE_BYTES)?,
            ptx_version: self.attribute(func_attr::PTX_VERSION)?,
            binary_version: self.attribute(func_attr::BINARY_VERSION)?,
        })
    }

    /// Resident blocks per multiprocessor at `block_size` threads and `dynamic_shared_bytes`
    /// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuOccupancyMaxActiveBlocksPerMultiprocessor")]
    pub fn max_active_blocks_per_sm(&self, block_size: u32, dynamic_shared_bytes: usize) -> Result<i32> {
        let mut n = 0;
        // SAFETY: writes one int; the function is live.
        unsafe { self.module.ctx.api().cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut n, self.raw, block_size as c_int, dynamic_shared_bytes) }?;
        Ok(n)
    }

    /// Launches the kernel on `stream` (`cuLaunchKernel`).
    ///
    /// # Errors
    /// The driver's launch error (`CUDA_ERROR_INVALID_VALUE` for a block too large, …). Errors
    /// during execution surface at the next synchronising call.
    ///
    /// # Safety
    /// `params` must hold one pointer per kernel parameter, each pointing to a value of the
    /// parameter's type, and every device pointer among them must be valid for what the kernel
    /// reads and writes until the launch completes.
    #[doc(alias = "cuLaunchKernel")]
    pub unsafe fn launch(
        &self,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_bytes: u32,
        stream: &Stream,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: the caller guarantees the parameters (see # Safety); the function and stream are live.
        unsafe {
            self.module.ctx.api().cuLaunchKernel(
                self.raw,
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
                shared_bytes,
                stream.raw(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
    }
}
