//! Driver-call tracing: the record of one call, how its output pointers are shown after it, and
//! the receiver the table's wrappers hand each record to.

use std::ffi::{c_int, c_uint};

use crate::sys::*;

/// One traced driver call (see [`super::Api::set_tracer`]).
#[derive(Debug, Clone)]
pub struct TraceRecord {
    /// C name of the function.
    pub name: &'static str,
    /// ABI version it was resolved with.
    pub version: c_int,
    /// The library export the table resolved for it under its semantics (`"cuLaunchKernel_ptsz"`).
    pub export: String,
    /// Address the table called (what `cuGetProcAddress` returned).
    pub address: usize,
    /// Arguments in short form (`name=value`).
    pub args: String,
    /// What the call returned through its output parameters, in short form (`name→value`:
    /// `p_dev_ptr→0x7f3a00000000 p_size→1048576`), after a successful call; empty otherwise.
    /// Pointees of these types are read: device pointers and other `u64`s, sizes, `int`s,
    /// `unsigned`s, `float`s and handles; not strings, structs or `void*` buffers, and not the
    /// arrays `resources`, `options` (inputs) and `p_cuda_devices` (an output array).
    pub returned: String,
    /// What the driver returned.
    pub result: CuResult,
    /// Host time spent in the call, in microseconds.
    pub host_us: f64,
}

/// An argument of a traced call, wrapped to ask what it points at after the call (see
/// [`TraceRecord::returned`]). Output pointers of the types [`ShowReturned`] knows are read;
/// for everything else the fallback [`NoReturned`] answers `None` (method resolution prefers the
/// by-value impl on `OutArg<*mut T>` over the autoref'd blanket one).
#[doc(hidden)]
pub struct OutArg<T>(pub T);

/// The value an output pointer holds after a call.
#[doc(hidden)]
pub trait ShowReturned {
    /// The pointee in short form; `None` for a null pointer.
    ///
    /// # Safety
    /// The pointer is null or valid for reading one value (an output parameter of a call that
    /// succeeded, which the caller passed as writable memory for one value under the function's
    /// contract).
    unsafe fn returned(&self) -> Option<String>;
}

/// Every other argument: nothing to show.
#[doc(hidden)]
pub trait NoReturned {
    /// `None`.
    ///
    /// # Safety
    /// None needed; `unsafe` only to match [`ShowReturned::returned`] at the call site.
    unsafe fn returned(&self) -> Option<String> {
        None
    }
}

impl<T> NoReturned for &OutArg<T> {}

macro_rules! show_returned {
    ($($t:ty => $fmt:literal),* $(,)?) => {$(
        impl ShowReturned for OutArg<*mut $t> {
            unsafe fn returned(&self) -> Option<String> {
                if self.0.is_null() {
                    return None;
                }
                // SAFETY: non-null, and valid for reading one value by this method's contract.
                Some(format!($fmt, unsafe { self.0.read() }))
            }
        }
    )*};
}

show_returned! {
    u64 => "{:#x}",
    usize => "{}",
    c_int => "{}",
    c_uint => "{}",
    f32 => "{}",
    CUcontext => "{:p}",
    CUstream => "{:p}",
    CUevent => "{:p}",
    CUgraphicsResource => "{:p}",
    CUmodule => "{:p}",
    CUfunction => "{:p}",
    CUarray => "{:p}",
}

/// Whether this build can trace driver calls (the `trace` feature, on by default). Without it
/// [`super::Api::set_tracer`] installs nothing and a call costs exactly the function call.
pub const TRACING_COMPILED: bool = cfg!(feature = "trace");

/// A receiver of traced calls.
pub type Tracer = Box<dyn Fn(&TraceRecord) + Send + Sync>;
