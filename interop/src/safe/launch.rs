//! Typed kernel launches (after cudarc's launch builder): the arguments are pushed from typed
//! values — device views ([`DevicePtr`]) that borrow the memory they point into, and scalars —
//! and checked against the kernel's parameter list as its PTX declares it
//! ([`Function::params`]), so a wrong count or type of argument is an [`Error`], not a call into
//! the driver with pointers to the wrong things.
//!
//! [`Launch::launch`] stays `unsafe` for the one thing no signature can show: that the kernel's
//! reads and writes stay inside the views it was given. A crate that knows its kernels' accesses
//! wraps each launch once in a safe function that checks them (the N-body kernels of this
//! workspace do so in their own crate, `kernels/`).

use std::ffi::c_void;
use std::marker::PhantomData;

use crate::driver::error::{Error, Result};
use crate::safe::image::{SurfaceObject, TextureObject};
use crate::safe::memory::{DeviceCopy, DevicePtr};
use crate::safe::module::{Function, PtxParam};
use crate::safe::stream::Stream;

/// One argument value, kept until the launch so that the pointer array can point at it.
#[derive(Debug, Clone, Copy)]
enum Value {
    U64(u64),
    I32(i32),
    U32(u32),
    F32(f32),
    F64(f64),
    F32x4([f32; 4]),
}

impl Value {
    fn fits(self, p: PtxParam) -> bool {
        matches!(
            (self, p),
            (Value::U64(_), PtxParam::B64)
                | (Value::I32(_) | Value::U32(_), PtxParam::B32)
                | (Value::F32(_), PtxParam::F32)
                | (Value::F64(_), PtxParam::F64)
                | (Value::F32x4(_), PtxParam::Bytes(16))
        )
    }

    fn ptx_name(self) -> &'static str {
        match self {
            Value::U64(_) => "a device pointer (.u64)",
            Value::I32(_) => "an int (.s32)",
            Value::U32(_) => "an unsigned int (.u32)",
            Value::F32(_) => "a float (.f32)",
            Value::F64(_) => "a double (.f64)",
            Value::F32x4(_) => "a float4 (.b8 [16])",
        }
    }

    /// Address of the payload, as `cuLaunchKernel`'s `kernelParams` wants it.
    fn as_param(&mut self) -> *mut c_void {
        match self {
            Value::U64(v) => (v as *mut u64).cast(),
            Value::I32(v) => (v as *mut i32).cast(),
            Value::U32(v) => (v as *mut u32).cast(),
            Value::F32(v) => (v as *mut f32).cast(),
            Value::F64(v) => (v as *mut f64).cast(),
            Value::F32x4(v) => v.as_mut_ptr().cast(),
        }
    }
}

/// A kernel launch being built: configuration, then one call per parameter in order, then
/// [`Launch::launch`]. Device views pushed with [`Launch::ptr`] stay borrowed for `'a`.
#[derive(Debug)]
#[must_use = "a launch does nothing until `launch` is called"]
pub struct Launch<'a> {
    function: &'a Function,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_bytes: u32,
    values: Vec<Value>,
    _borrows: PhantomData<&'a ()>,
}

impl<'a> Launch<'a> {
    /// A launch of `function` with a grid and block of 1 and no dynamic shared memory.
    pub fn new(function: &'a Function) -> Self {
        Launch { function, grid: (1, 1, 1), block: (1, 1, 1), shared_bytes: 0, values: Vec::new(), _borrows: PhantomData }
    }

    /// Blocks in x (a 1-D grid).
    pub fn grid(mut self, blocks: u32) -> Self {
        self.grid = (blocks, 1, 1);
        self
    }

    /// Threads per block in x (a 1-D block).
    pub fn block(mut self, threads: u32) -> Self {
        self.block = (threads, 1, 1);
        self
    }

    /// Dynamic shared memory per block, bytes.
    pub fn shared_bytes(mut self, bytes: u32) -> Self {
        self.shared_bytes = bytes;
        self
    }

    /// The next parameter: a device pointer (`.u64`), from a view that stays borrowed for `'a`.
    pub fn ptr<T: DeviceCopy>(mut self, view: DevicePtr<'a, T>) -> Self {
        self.values.push(Value::U64(view.addr()));
        self
    }

    /// The next parameter: an `int` (`.s32`/`.u32`/`.b32`).
    pub fn i32(mut self, v: i32) -> Self {
        self.values.push(Value::I32(v));
        self
    }

    /// The next parameter: an `unsigned int` (`.u32`/`.s32`/`.b32`).
    pub fn u32(mut self, v: u32) -> Self {
        self.values.push(Value::U32(v));
        self
    }

    /// The next parameter: a `float` (`.f32`).
    pub fn f32(mut self, v: f32) -> Self {
        self.values.push(Value::F32(v));
        self
    }

    /// The next parameter: a `double` (`.f64`).
    pub fn f64(mut self, v: f64) -> Self {
        self.values.push(Value::F64(v));
        self
    }

    /// The next parameter: a `float4` by value (`.param .align 16 .b8 name[16]`), x, y, z, w.
    pub fn f32x4(mut self, v: [f32; 4]) -> Self {
        self.values.push(Value::F32x4(v));
        self
    }

    /// The next parameter: a surface object (`cudaSurfaceObject_t`, `.u64`), borrowed for `'a`
    /// so that it (and the mapping under it) outlives the launch call.
    pub fn surface(mut self, s: &'a SurfaceObject<'_>) -> Self {
        self.values.push(Value::U64(s.handle()));
        self
    }

    /// The next parameter: a texture object (`cudaTextureObject_t`, `.u64`), borrowed for `'a`.
    pub fn texture(mut self, t: &'a TextureObject<'_>) -> Self {
        self.values.push(Value::U64(t.handle()));
        self
    }

    /// Checks the arguments against the kernel's PTX parameter list.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the kernel: no PTX signature known, a different
    /// number of arguments, or an argument of another type than its parameter.
    pub fn check(&self) -> Result<()> {
        let name = self.function.name();
        let params = self.function.params().ok_or_else(|| {
            Error::InvalidArgument(format!("kernel {name}: its module's PTX text has no .entry {name}, so its parameters are unknown"))
        })?;
        if params.len() != self.values.len() {
            return Err(Error::InvalidArgument(format!(
                "kernel {name} takes {} parameters ({params:?}), the launch passes {}",
                params.len(),
                self.values.len()
            )));
        }
        for (i, (v, p)) in self.values.iter().zip(params).enumerate() {
            if !v.fits(*p) {
                return Err(Error::InvalidArgument(format!("kernel {name}: parameter {i} is {p:?} in the PTX, the launch passes {}", v.ptx_name())));
            }
        }
        Ok(())
    }

    /// Checks the arguments ([`Launch::check`]) and launches on `stream` (`cuLaunchKernel`).
    ///
    /// # Errors
    /// As [`Launch::check`]; the driver's launch error (`CUDA_ERROR_INVALID_VALUE` for a block
    /// too large, …). Errors during execution surface at the next synchronising call.
    ///
    /// # Safety
    /// The kernel must read and write only inside the views passed to it (for the sizes and
    /// the grid given), and what owns those views must keep the memory allocated (and mapped)
    /// until the launch has completed on `stream`: a stream synchronisation, or a stream-ordered
    /// unmap, before the owner frees it.
    #[doc(alias = "cuLaunchKernel")]
    pub unsafe fn launch(mut self, stream: &Stream) -> Result<()> {
        self.check()?;
        let mut params: Vec<*mut c_void> = self.values.iter_mut().map(Value::as_param).collect();
        // SAFETY: one pointer per PTX parameter (checked above), each to a live value of the
        // parameter's size and kind in `self.values`, which outlives the call; the memory the
        // device pointers name is the caller's promise (# Safety).
        unsafe { self.function.launch(self.grid, self.block, self.shared_bytes, stream, &mut params) }
    }
}
