//! CUDA events on the host clock: where a frame's stream work happened, not only how long it took.
//!
//! `cuEventElapsedTime` gives the time between two events of one context ("resolution of around
//! 0.5 microseconds", driver API reference), never an absolute time. A [`GpuClock`] records one
//! reference event on an idle stream, waits for it (`cuEventSynchronize`) and notes the host's
//! [`Instant`] when the wait returns; any later event `e` then happened at that instant plus
//! `elapsed(reference, e)`.
//!
//! # How well it aligns
//! The host learns of the reference event's completion one wake-up late, so every placed time is
//! late by that wake-up `w₀`. Each frame that waits for its last event measures the alignment
//! again: the host's return from that wait minus the event's placed time is `wₖ − w₀` (plus any
//! drift between the GPU's and the host's clocks): [`GpuClock::residual_us`]. The timeline
//! writes these residuals as a counter and their median and largest value in its `otherData`.
//! The reference is renewed ([`GpuClock::rebase`]) before the elapsed time reaches
//! [`REBASE_AFTER_S`], so the `f32` milliseconds of `cuEventElapsedTime` keep about 1 µs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use interop::sys::event_flags;
use interop::{Context, Event, Stream};

use crate::trace::clock::signed_us;

/// The reference is renewed after this many seconds (an `f32` of 8000 ms has a 0.5 µs step).
pub const REBASE_AFTER_S: f64 = 8.0;

/// A CUDA reference event and the host instant it completed at.
pub struct GpuClock {
    reference: Event,
    host: Instant,
}

impl std::fmt::Debug for GpuClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuClock").field("host", &self.host).finish_non_exhaustive()
    }
}

impl GpuClock {
    /// Records the reference event on `stream` and waits for it. Call with the stream idle (or
    /// the wait includes its queued work, and the placed times come out early by that much).
    ///
    /// # Errors
    /// `cuEventCreate`, `cuEventRecord` or `cuEventSynchronize` fails.
    pub fn new(ctx: &Arc<Context>, stream: &Stream) -> anyhow::Result<GpuClock> {
        let reference = Event::new(ctx, event_flags::DEFAULT).context("cuEventCreate (clock reference)")?;
        let mut c = GpuClock { reference, host: Instant::now() };
        c.rebase(stream)?;
        Ok(c)
    }

    /// Records the reference again on `stream` and waits for it (the stream should be idle).
    ///
    /// # Errors
    /// `cuEventRecord` or `cuEventSynchronize` fails.
    pub fn rebase(&mut self, stream: &Stream) -> anyhow::Result<()> {
        self.reference.record(stream).context("cuEventRecord (clock reference)")?;
        self.reference.synchronize().context("cuEventSynchronize (clock reference)")?;
        self.host = Instant::now();
        Ok(())
    }

    /// Renews the reference when it is older than [`REBASE_AFTER_S`] (call between frames, with
    /// the stream idle).
    ///
    /// # Errors
    /// As [`GpuClock::rebase`].
    pub fn rebase_if_old(&mut self, stream: &Stream) -> anyhow::Result<()> {
        if self.host.elapsed().as_secs_f64() > REBASE_AFTER_S {
            self.rebase(stream)?;
        }
        Ok(())
    }

    /// The host instant at which the completed event `e` happened on the GPU; `None` while `e`
    /// has not completed.
    ///
    /// # Errors
    /// `cuEventElapsedTime` fails (an event never recorded, or of another context).
    pub fn at(&self, e: &Event) -> anyhow::Result<Option<Instant>> {
        let ms = Event::elapsed_ms(&self.reference, e).context("cuEventElapsedTime (clock reference)")?;
        Ok(ms.map(|ms| self.host + Duration::from_secs_f64(f64::from(ms.max(0.0)) * 1e-3)))
    }

    /// µs from `e`'s placed time to `waited`, the instant a wait for `e` returned: the alignment
    /// error of this sample (see the module docs). `None` while `e` has not completed.
    ///
    /// # Errors
    /// As [`GpuClock::at`].
    pub fn residual_us(&self, e: &Event, waited: Instant) -> anyhow::Result<Option<f64>> {
        Ok(self.at(e)?.map(|t| signed_us(waited, t)))
    }
}
