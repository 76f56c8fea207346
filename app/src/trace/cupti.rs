//! The timeline's CUPTI track: [`interop::cupti`]'s activity records (kernels, memcpys,
//! memsets and, where this CUPTI provides them, compute-engine context switches) on the host
//! clock. Loaded for the demo's `--timeline` runs (any backend: a CPU run gets no records) and
//! the bench's CUDA modes; where CUPTI cannot be loaded, the timeline's `otherData` says why and
//! nothing fails.
//!
//! # Clock
//! CUPTI's timestamps are ns on its own clock; `cuptiGetTimestamp` reads that clock now. It is
//! read between two host instants (the tightest of 5 brackets), which places every record with
//! an error of at most half that bracket plus the drift over the run (measured again at the end).

use std::time::{Duration, Instant};

use interop::cupti::{ActivityKind, Availability, Cupti, SwitchPhase, Track as CuptiKind};
use serde_json::json;

use super::clock::{calibrate, signed_us};
use super::{Recorder, Track};

/// CUPTI loaded and its clock read against the host's.
#[derive(Debug)]
pub struct CuptiTrack {
    cupti: Cupti,
    host: Instant,
    ts_ns: u64,
    bracket_us: f64,
    records: usize,
    switches: usize,
    availability: Vec<(CuptiKind, Availability)>,
}

impl CuptiTrack {
    /// Loads CUPTI ([`Cupti::open`]: `NBODY_CUPTI_LIBRARY`, the usual names, the toolkit's
    /// `extras/CUPTI/lib64`) and enables its kernel, memcpy, memset and context-switch records.
    /// `None` when it cannot; `r`'s timeline then notes why.
    pub fn start(r: &Recorder) -> Option<CuptiTrack> {
        let cupti = match crate::libraries::open_cupti() {
            Ok(c) => c,
            Err(e) => {
                tracing::info!("timeline without CUPTI: {e}");
                r.note("cupti", json!(format!("not loaded: {e}")));
                return None;
            }
        };
        let availability = match cupti.enable(&CuptiKind::ALL) {
            Ok(a) => a,
            Err(e) => {
                r.note("cupti", json!(format!("loaded from {}, but enabling activity records failed: {e}", cupti.path())));
                return None;
            }
        };
        let (host, ts_ns, bracket_us) = calibrate(|| cupti.timestamp_ns());
        tracing::info!(path = cupti.path(), version = cupti.version(), "CUPTI activity records on the timeline");
        Some(CuptiTrack { cupti, host, ts_ns, bracket_us, records: 0, switches: 0, availability })
    }

    /// The host instant of CUPTI time `ns`.
    fn host_of(&self, ns: u64) -> Instant {
        if ns >= self.ts_ns {
            self.host + Duration::from_nanos(ns - self.ts_ns)
        } else {
            self.host.checked_sub(Duration::from_nanos(self.ts_ns - ns)).unwrap_or(self.host)
        }
    }

    /// Drops the records collected so far (the bench's warmup frames).
    pub fn discard(&self) {
        if let Err(e) = self.cupti.flush() {
            tracing::warn!("CUPTI flush: {e}");
        }
    }

    /// Flushes CUPTI's buffers and puts their records on `r`'s CUPTI track.
    pub fn flush_into(&mut self, r: &Recorder) {
        let records = match self.cupti.flush() {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("CUPTI flush: {e}");
                return;
            }
        };
        for a in records {
            let start = self.host_of(a.start_ns);
            let dur_us = a.end_ns.saturating_sub(a.start_ns) as f64 * 1e-3;
            let ids = format!("device {} · stream {} · correlation {}", a.device_id, a.stream_id, a.correlation_id);
            let (name, detail) = match &a.kind {
                ActivityKind::Kernel => (a.name.clone().unwrap_or_else(|| "kernel".into()), format!("kernel record · {ids}")),
                ActivityKind::Memcpy { bytes, copy_kind } => (format!("memcpy {copy_kind}"), format!("{bytes} bytes · {ids}")),
                ActivityKind::Memset { bytes } => ("memset".into(), format!("{bytes} bytes · {ids}")),
                ActivityKind::ContextSwitch { phase } => {
                    self.switches += 1;
                    let p = match phase {
                        SwitchPhase::Start => "start".to_string(),
                        SwitchPhase::End => "end".to_string(),
                        SwitchPhase::Other(v) => format!("operation {v}"),
                    };
                    (format!("context switch {p}"), format!("compute-engine context switch ({p}) of context {}", a.context_id))
                }
                ActivityKind::Other(k) => (format!("CUPTI kind {k}"), ids),
            };
            r.span_at(Track::Cupti, &name, start, dur_us, &detail);
            self.records += 1;
        }
    }

    /// Flushes the last records into `r` and notes what CUPTI gave: its version, the clock's
    /// bracket and drift, each record kind's availability, the record and context-switch counts.
    pub fn finish(&mut self, r: &Recorder) {
        self.flush_into(r);
        let (host, ts, bracket) = calibrate(|| self.cupti.timestamp_ns());
        let drift_us = signed_us(host, self.host_of(ts));
        let kinds: serde_json::Map<String, serde_json::Value> = self
            .availability
            .iter()
            .map(|(k, a)| {
                let v = match a {
                    Availability::Enabled => json!("enabled"),
                    Availability::NotProvided(why) => json!(format!("not provided: {why}")),
                };
                (k.kind_name().to_string(), v)
            })
            .collect();
        r.note(
            "cupti",
            json!({
                "library": self.cupti.path(),
                "api_version": self.cupti.version(),
                "kernel_names": self.cupti.kernel_names(),
                "kinds": kinds,
                "records_so_far": self.records,
                "context_switch_records_so_far": self.switches,
                "dropped_records": self.cupti.dropped_records().ok().flatten(),
                "clock": "cuptiGetTimestamp read between two host instants (tightest of 5)",
                "start_bracket_us": self.bracket_us,
                "end_bracket_us": bracket,
                "drift_over_run_us": drift_us,
            }),
        );
    }
}
