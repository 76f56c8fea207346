//! GL fences waited on from the host: how the external-memory storage knows that GL is done
//! with the buffers before a kernel writes them (`glFenceSync` → `glClientWaitSync`).

use std::time::{Duration, Instant};

use anyhow::anyhow;

use super::gl::Gl;

/// How long [`wait_for_gl`] waits for a GL fence before giving up.
pub const GL_FENCE_TIMEOUT: Duration = Duration::from_secs(10);

/// Host wait until GL has executed every command issued so far in this context (a fence after
/// them, `glClientWaitSync` with a flush). Returns the wait in ms.
///
/// # Errors
/// `glFenceSync` fails, the wait fails (`GL_WAIT_FAILED`) or exceeds [`GL_FENCE_TIMEOUT`].
pub fn wait_for_gl(gl: Gl<'_>) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    let fence = gl.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0).map_err(|e| anyhow!("glFenceSync: {e}"))?;
    wait_fence(gl, fence, t0)
}

/// Host wait on `fence` (`glClientWaitSync` with a flush, then deleted); returns the ms since `t0`.
///
/// # Errors
/// As [`wait_for_gl`]; the fence is deleted on every path.
pub fn wait_fence(gl: Gl<'_>, fence: glow::NativeFence, t0: Instant) -> anyhow::Result<f64> {
    let mut flags = glow::SYNC_FLUSH_COMMANDS_BIT;
    let result = loop {
        let r = gl.client_wait_sync(fence, flags, 100_000_000); // 100 ms per call
        flags = 0;
        match r {
            glow::ALREADY_SIGNALED | glow::CONDITION_SATISFIED => break Ok(()),
            glow::TIMEOUT_EXPIRED if t0.elapsed() < GL_FENCE_TIMEOUT => {}
            glow::TIMEOUT_EXPIRED => break Err(anyhow!("glClientWaitSync: GL did not finish within {GL_FENCE_TIMEOUT:?}")),
            other => break Err(anyhow!("glClientWaitSync failed (0x{other:04X}, GL error {:?})", super::memory_object::gl_error(gl))),
        }
    };
    gl.delete_sync(fence);
    result.map(|()| t0.elapsed().as_secs_f64() * 1e3)
}
