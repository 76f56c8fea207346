//! A window's display going away under a run: another X client destroying the window
//! (`xdotool windowclose`), killing the connection (`xkill`, `xdotool windowkill`), or the X
//! server ending. The windowed demo then ends as after Ctrl-C, writing what it was asked for;
//! two things stand in its way, and this module turns each into something it can handle:
//!
//! - winit panics inside its event loop on some of them (the input context of a window destroyed
//!   by another client: `Failed to destroy input context: XError BadDrawable`).
//!   [`watch_window_system_panics`] installs a panic hook that, for a panic raised in the window
//!   system's crates (winit, x11rb, x11-dl, glutin), prints one line naming what went away
//!   instead of a panic report and notes it ([`window_system_failure`]); every other panic is
//!   reported as before. The caller catches the unwind (`std::panic::catch_unwind`) and writes
//!   its outputs.
//! - Xlib's fatal I/O error (the connection broken) calls the I/O error handler and then
//!   `exit(1)` when it returns, from inside whatever Xlib call found the broken connection:
//!   nothing up the stack may be touched then. [`on_connection_lost`] installs a handler
//!   (`XSetIOErrorHandler`) that runs the caller's `fn` — which writes from data it already holds
//!   on the host — and ends the process with the status that `fn` returns, never returning into
//!   Xlib.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Source paths (as in a panic's location) of the crates that talk to the window system.
const WINDOW_SYSTEM_CRATES: [&str; 4] = ["/winit-", "/x11rb-", "/x11-dl-", "/glutin-"];

/// The message of the first panic raised in the window system's crates, if one was.
static FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// True when a panic at `file` (its location's path) was raised in the window system's crates.
pub fn in_window_system(file: &str) -> bool {
    WINDOW_SYSTEM_CRATES.iter().any(|c| file.contains(c))
}

/// Installs (once) a panic hook that, for a panic raised in the window system's crates, notes
/// its message ([`window_system_failure`]) and prints one line, `the window system failed (…)`,
/// instead of a panic report; other panics go to the hook installed before.
pub fn watch_window_system_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.location().is_some_and(|l| in_window_system(l.file())) {
                previous(info);
                return;
            }
            let payload = info.payload();
            let msg = payload.downcast_ref::<&str>().map(|s| (*s).to_string()).or_else(|| payload.downcast_ref::<String>().cloned());
            let msg = msg.unwrap_or_else(|| "a failure without a message".to_string());
            eprintln!("the window system failed ({msg}): the window or the display went away");
            let mut failure = FAILURE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            failure.get_or_insert(msg);
        }));
    });
}

/// The message of the panic that [`watch_window_system_panics`] noted, if one was raised.
pub fn window_system_failure() -> Option<String> {
    FAILURE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

/// `dlopen`'s flag: resolve symbols as they are used.
const RTLD_LAZY: c_int = 1;

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// `XIOErrorHandler`: `int (*)(Display *)`.
type XIoErrorHandler = unsafe extern "C" fn(display: *mut c_void) -> c_int;
/// `XSetIOErrorHandler`: `XIOErrorHandler XSetIOErrorHandler(XIOErrorHandler)`.
type XSetIoErrorHandler = unsafe extern "C" fn(handler: Option<XIoErrorHandler>) -> Option<XIoErrorHandler>;

/// The caller's `fn` for a lost connection ([`on_connection_lost`]), as an address (0: none).
static ON_LOST: AtomicUsize = AtomicUsize::new(0);

/// The I/O error handler: runs the caller's `fn` and ends the process with its status, without
/// running `atexit` handlers (which could call into the broken connection again) and without
/// returning into Xlib (which would `exit(1)`).
unsafe extern "C" fn io_error(_display: *mut c_void) -> c_int {
    let f = ON_LOST.load(Ordering::SeqCst);
    let code = if f == 0 {
        1
    } else {
        // SAFETY: ON_LOST holds only addresses of `fn() -> i32` stored by `on_connection_lost`.
        let f: fn() -> i32 = unsafe { std::mem::transmute::<usize, fn() -> i32>(f) };
        // A panic must not unwind into Xlib's C frames: it is caught and counts as a failure.
        std::panic::catch_unwind(f).unwrap_or(1)
    };
    signal_hook::low_level::exit(code)
}

/// Makes a broken X connection run `on_lost` (which writes what it can from data already held
/// on the host, prints what happened, and returns the exit status), then end the process with
/// that status. Where libX11 is not loaded (Wayland), or has no `XSetIOErrorHandler`, nothing is
/// installed and false is returned.
///
/// `on_lost` runs on the thread whose Xlib call found the connection broken, inside that call:
/// it must not touch anything that thread was using (the window, GL, the frame's state).
pub fn on_connection_lost(on_lost: fn() -> i32) -> bool {
    ON_LOST.store(on_lost as usize, Ordering::SeqCst);
    // SAFETY: the name is a NUL-terminated string; dlopen of an already-loaded library returns
    // a handle to it (a new reference, never dropped: libX11 stays loaded for the process).
    let lib = unsafe { dlopen(c"libX11.so.6".as_ptr(), RTLD_LAZY) };
    if lib.is_null() {
        return false;
    }
    // SAFETY: `lib` is a live handle from dlopen, the name is NUL-terminated.
    let sym = unsafe { dlsym(lib, c"XSetIOErrorHandler".as_ptr()) };
    if sym.is_null() {
        return false;
    }
    // SAFETY: libX11's `XSetIOErrorHandler` has the C signature `XSetIoErrorHandler` spells
    // (Xlib.h: `extern XIOErrorHandler XSetIOErrorHandler(XIOErrorHandler)`).
    let set: XSetIoErrorHandler = unsafe { std::mem::transmute::<*mut c_void, XSetIoErrorHandler>(sym) };
    // SAFETY: `io_error` is a valid handler of the C signature `XIOErrorHandler`, for the whole
    // process (a plain function); the previous handler is not needed (Xlib's default exits).
    unsafe { set(Some(io_error)) };
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn panics_of_the_window_system_are_told_apart_by_their_crate() {
        let winit = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/winit-0.30.13/src/platform_impl/linux/x11/event_processor.rs";
        assert!(super::in_window_system(winit));
        assert!(!super::in_window_system("app/src/demo/windowed.rs"));
    }
}
