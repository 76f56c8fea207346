//! Layer 2, the driver: finding and opening the library ([`library`], [`loader`]), the one
//! declarative table of entry points resolved through `cuGetProcAddress` with explicit ABI
//! versions ([`entry`]: [`Api`], one `unsafe` method per driver function returning [`Result`]),
//! decoded statuses ([`status`]) and the typed errors ([`error`]).
//!
//! Everything here is a thin, checked path to a driver function; the RAII types built on it are
//! in [`crate::safe`].

pub mod entry;
pub mod error;
pub mod library;
pub mod loader;
pub mod status;

pub use entry::{Api, EntryDecl, EntryReport, SymbolStatus, TraceRecord, ENTRY_POINTS};
pub use error::{Error, Result};
pub use loader::{BootstrapKind, Driver, StreamSemantics};
