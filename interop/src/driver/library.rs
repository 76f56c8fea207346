//! Finding and opening a shared library that the binding loads at run time: the CUDA driver
//! ([`crate::Driver`]), CUPTI (`cupti`, a cargo feature) and NCCL (`nccl`, likewise) all go through here.
//!
//! Each has the same three parts: one file the caller may name to replace the search (each
//! `open_with`; an application maps its own setting onto it), default names
//! the system loader looks up, and an error that lists every candidate tried with the loader's
//! own message ([`LibraryAttempt`]), so a user sees at once what is missing and where it was
//! looked for.

use std::ffi::OsStr;
use std::path::PathBuf;

use libloading::Library;

use crate::driver::error::{error_chain, LibraryAttempt};

/// The candidates to try, in order, and whether they came from the override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidates {
    /// Names (for the system loader's search) or paths, in the order tried.
    pub paths: Vec<PathBuf>,
    /// True when `paths` is the named file alone.
    pub named: bool,
}

impl Candidates {
    /// `named` (a file that replaces the search) alone when it is given and not empty; else
    /// `defaults`, then `more` (further paths, e.g. under toolkit roots), in that order.
    pub fn new(named: Option<&OsStr>, defaults: &[&str], more: impl IntoIterator<Item = PathBuf>) -> Candidates {
        match named.filter(|p| !p.is_empty()) {
            Some(p) => Candidates { paths: vec![PathBuf::from(p)], named: true },
            None => Candidates { paths: defaults.iter().map(PathBuf::from).chain(more).collect(), named: false },
        }
    }
}

/// Opens the first of `candidates` that loads; returns it with the name or path it was opened
/// by.
///
/// # Errors
/// Every candidate, in order, with the loader's (`dlerror`) message, when none loads.
///
/// # Safety
/// Loading a library runs its initialisers, and on some systems only the first load of a
/// name does. The caller promises that each candidate is a library made to be loaded by
/// applications at any time (a driver, a profiling or communication library), or one the
/// user named in place of it.
pub unsafe fn open_first(candidates: &[PathBuf]) -> Result<(Library, String), Vec<LibraryAttempt>> {
    let mut tried = Vec::new();
    for c in candidates {
        // SAFETY: the caller's promise (above) about what each candidate is.
        match unsafe { Library::new(c) } {
            Ok(lib) => return Ok((lib, c.display().to_string())),
            Err(e) => tried.push(LibraryAttempt { name: c.display().to_string(), error: error_chain(&e) }),
        }
    }
    Err(tried)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_override_replaces_the_search_and_an_empty_one_does_not() {
        let more = || [PathBuf::from("/opt/x/lib64/liby.so")];
        let env = Candidates::new(Some(OsStr::new("/x/liby.so")), &["liby.so.1"], more());
        assert_eq!(env, Candidates { paths: vec![PathBuf::from("/x/liby.so")], named: true });
        let empty = Candidates::new(Some(OsStr::new("")), &["liby.so.1"], more());
        assert_eq!(empty.paths, [PathBuf::from("liby.so.1"), PathBuf::from("/opt/x/lib64/liby.so")]);
        assert!(!empty.named);
    }

    #[test]
    fn every_failed_candidate_is_listed_with_the_loaders_message() {
        let paths = [PathBuf::from("/nonexistent/a.so"), PathBuf::from("/nonexistent/b.so")];
        // SAFETY: the files do not exist, so nothing is loaded and no initialiser runs.
        let Err(tried) = (unsafe { open_first(&paths) }) else { panic!("a missing file loaded") };
        assert_eq!(tried.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["/nonexistent/a.so", "/nonexistent/b.so"]);
        assert!(tried.iter().all(|t| !t.error.is_empty()));
    }
}
