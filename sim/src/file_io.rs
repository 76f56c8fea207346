//! What reading and writing state files share: the checks made before a file is opened, the
//! limits a read keeps while it streams, the cause and remedy of a failed write, and the output
//! file that appears whole or not at all.
//!
//! # Reading
//! A state file is a regular file. A device (`/dev/zero`, `/dev/urandom`), a named pipe, a socket
//! or a directory is refused by its type ([`check_regular`], a `stat` that opens nothing) before
//! it is opened: nothing endless is read, and no open waits for a pipe's writer. The readers then
//! stream the file (CSV line by line, tipsy record by record) within a [`ReadLimits`]: at most
//! `max_bodies` bodies (what this machine's available memory holds at [`HOST_BYTES_PER_BODY`]
//! bytes a body, and never more than [`MAX_FILE_BODIES`]), CSV lines of at most
//! [`MAX_LINE_BYTES`] bytes, and a "stop requested" callback asked every [`CHECK_EVERY`] lines or
//! records, so an interrupt ends a read within milliseconds. What the file system says of the
//! size is checked before the first byte: a file larger than its limit allows is refused at once.
//! Memory grows with the bodies read, never with the file.
//!
//! # Writing
//! [`OutputFile`] writes to a temporary file beside the target, `.NAME.PID.tmp` in the same
//! directory, and renames it over the target once every byte is written and synced: an
//! interrupted or failed write never leaves a partial file where the user asked for one (the
//! temporary is removed on failure; a process killed mid-write leaves at most the temporary). A
//! target that is a device or a pipe (`/dev/stdout`, `/dev/full`, a FIFO) is written in place: a
//! rename would replace the device node, not write to it. A symbolic link is followed: the file
//! it points to is replaced and the link stays.

use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The longest CSV line read, bytes (without its line end). A row of the seven columns in
/// shortest f32 form takes at most about 110; the rest leaves room for extra columns.
pub const MAX_LINE_BYTES: usize = 4096;

/// Host bytes a run needs per body at most (initial state, the last finite copy, the CPU
/// backend's arrays, the renderer's scratch, upload staging): what a file's bodies are counted
/// against the available memory with. The demo checks `--bodies` against the same figure.
pub const HOST_BYTES_PER_BODY: u64 = 256;

/// The most bodies a state file may hold on any machine: the largest N the step kernels take
/// (`1 ≤ N < 2^31 − 4096`, so that the last tile's indices stay within `int`).
pub const MAX_FILE_BODIES: usize = (i32::MAX as usize) - 4096;

/// Lines (CSV) or records (tipsy) read between two looks at the "stop requested" callback.
pub const CHECK_EVERY: usize = 4096;

/// The limits a state-file read keeps (see the module docs).
pub struct ReadLimits<'a> {
    /// The most bodies the file may hold.
    pub max_bodies: usize,
    /// Where `max_bodies` comes from, for messages (e.g. "21.8 GiB of memory available at 256
    /// bytes a body").
    pub basis: String,
    /// True once the read should stop (an interrupt); asked every [`CHECK_EVERY`] lines or records.
    pub stop: &'a dyn Fn() -> bool,
}

impl fmt::Debug for ReadLimits<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadLimits").field("max_bodies", &self.max_bodies).field("basis", &self.basis).finish_non_exhaustive()
    }
}

/// A "stop requested" callback that never asks to stop.
pub fn never() -> bool {
    false
}

impl<'a> ReadLimits<'a> {
    /// The limits of this machine: as many bodies as `MemAvailable` of `/proc/meminfo` holds at
    /// [`HOST_BYTES_PER_BODY`] bytes a body (at most [`MAX_FILE_BODIES`]; that alone where the
    /// available memory is unknown), stopping when `stop` says so.
    pub fn this_machine(stop: &'a dyn Fn() -> bool) -> ReadLimits<'a> {
        match available_memory() {
            Some(bytes) => {
                let fit = usize::try_from(bytes / HOST_BYTES_PER_BODY).unwrap_or(usize::MAX);
                let basis = format!("{:.1} GiB of memory available at {HOST_BYTES_PER_BODY} bytes a body", bytes as f64 / (1u64 << 30) as f64);
                if fit < MAX_FILE_BODIES {
                    return ReadLimits { max_bodies: fit, basis, stop };
                }
                ReadLimits::bodies(MAX_FILE_BODIES, "the step kernels' limit", stop)
            }
            None => ReadLimits::bodies(MAX_FILE_BODIES, "the step kernels' limit", stop),
        }
    }

    /// At most `max_bodies` bodies (`basis` says why, for messages), stopping when `stop` says so.
    pub fn bodies(max_bodies: usize, basis: &str, stop: &'a dyn Fn() -> bool) -> ReadLimits<'a> {
        ReadLimits { max_bodies, basis: basis.to_owned(), stop }
    }
}

/// `MemAvailable` of `/proc/meminfo`, bytes (`None` where it cannot be read).
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Why a state file was refused before or while it was read, whatever its format.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The path names a device, a pipe, a socket or a directory.
    #[error(
        "{}: not a regular file but {kind} ({why}); state files are read from regular files: save the bodies \
         to a .csv or .tipsy file and give its path",
        path.display()
    )]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is ("a character device", …).
        kind: &'static str,
        /// Why that cannot be read as a state file.
        why: &'static str,
    },
    /// The file holds (or claims) more bodies than the limit.
    #[error(
        "{}: {found}, more than the {max} bodies this machine can hold ({basis}); use a file with fewer bodies",
        path.display()
    )]
    TooManyBodies {
        /// The file.
        path: PathBuf,
        /// Where the excess was found ("body 1001 is on line 1003", "the header counts 5000000000 particles").
        found: String,
        /// The limit, bodies.
        max: usize,
        /// Where the limit comes from.
        basis: String,
    },
    /// The file is larger than any state file within the limits.
    #[error(
        "{}: {len} bytes, more than a state file within this machine's limits has: at most {max_bodies} bodies \
         ({basis}), one per line of at most {line} bytes, make {max} bytes; check that this is the file you meant",
        path.display(), line = MAX_LINE_BYTES
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size, bytes.
        len: u64,
        /// The largest size allowed, bytes.
        max: u64,
        /// The body limit it comes from.
        max_bodies: usize,
        /// Where the body limit comes from.
        basis: String,
    },
    /// The read was stopped by the caller's "stop requested" callback (an interrupt).
    #[error("{}: reading stopped by the interrupt at {at}; nothing was loaded", path.display())]
    Interrupted {
        /// The file.
        path: PathBuf,
        /// Where it stopped ("line 123457", "particle 400000").
        at: String,
    },
}

/// What the file type of `meta` is, and why it cannot be read as a state file; `None` for a
/// regular file.
fn special_kind(meta: &Metadata) -> Option<(&'static str, &'static str)> {
    use std::os::unix::fs::FileTypeExt as _;
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some(("a directory", "it holds files; name one of them"))
    } else if t.is_char_device() {
        Some(("a character device", "a device such as /dev/zero or /dev/urandom has no size and never ends"))
    } else if t.is_block_device() {
        Some(("a block device", "a disk or partition is not a state file"))
    } else if t.is_fifo() {
        Some(("a named pipe (FIFO)", "it has no size, and opening it waits for a writer"))
    } else if t.is_socket() {
        Some(("a socket", "it has no contents to read"))
    } else {
        Some(("a special file", "only regular files have a size to check"))
    }
}

/// Checks that `path` names a regular file (symbolic links followed) without opening it, and
/// returns its metadata.
///
/// # Errors
/// `Err(Ok(SourceError::NotRegular))` for a device, pipe, socket or directory;
/// `Err(Err(io))` when `stat` fails (no such file, no permission).
pub fn check_regular(path: &Path) -> Result<Metadata, Result<SourceError, io::Error>> {
    let meta = std::fs::metadata(path).map_err(Err)?;
    match special_kind(&meta) {
        None => Ok(meta),
        Some((kind, why)) => Err(Ok(SourceError::NotRegular { path: path.to_owned(), kind, why })),
    }
}

/// Opens the regular file `path` for reading ([`check_regular`] first, so a pipe is never
/// opened) and returns it with its size, bytes. The opened file's type is checked again, in case
/// the path changed between the two.
///
/// # Errors
/// As [`check_regular`], and the open's own error.
pub fn open_regular(path: &Path) -> Result<(File, u64), Result<SourceError, io::Error>> {
    check_regular(path)?;
    let file = File::open(path).map_err(Err)?;
    let meta = file.metadata().map_err(Err)?;
    if let Some((kind, why)) = special_kind(&meta) {
        return Err(Ok(SourceError::NotRegular { path: path.to_owned(), kind, why }));
    }
    Ok((file, meta.len()))
}

/// A failed write's cause and remedy, for messages: "no space left on device (os error 28);
/// free some space there or choose another path".
#[derive(Debug, Clone, Copy)]
pub struct WriteProblem<'a>(pub &'a io::Error);

impl fmt::Display for WriteProblem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use io::ErrorKind as K;
        let e = self.0;
        let code = e.raw_os_error().map(|c| format!(" (os error {c})")).unwrap_or_default();
        match e.kind() {
            K::StorageFull => write!(f, "no space left on device{code}; free some space there or choose another path"),
            K::QuotaExceeded => write!(f, "disk quota exceeded{code}; free some space there or choose another path"),
            K::FileTooLarge => write!(
                f,
                "file too large{code}: the file system or the process's file-size limit (ulimit -f) allows no more; \
                 choose another path or raise the limit"
            ),
            K::ReadOnlyFilesystem => write!(f, "read-only file system{code}; choose a path you can write"),
            K::PermissionDenied => write!(f, "permission denied{code}; choose a path you can write"),
            K::NotFound => write!(f, "{e}; check that the directory exists"),
            K::IsADirectory => write!(f, "it is a directory; give a file name"),
            _ => write!(f, "{e}; check that the directory exists and is writable"),
        }
    }
}

/// `.NAME.PID.tmp` beside `path`: the temporary an output is written to before it is renamed
/// over `path` (the name every output of the app uses: hidden, and unique to this process).
pub fn temporary_path(path: &Path) -> PathBuf {
    let name = path.file_name().map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// An output file that appears whole or not at all (see the module docs): write to it, then
/// [`OutputFile::commit`]. Dropped without a commit (an error on the way), it removes its
/// temporary and leaves the target as it was.
#[derive(Debug)]
pub struct OutputFile {
    /// Where the file goes (a symbolic link's destination).
    target: PathBuf,
    /// The temporary being written; `None` when the target is written in place (a device or a
    /// pipe) or once it was renamed.
    temporary: Option<PathBuf>,
    out: BufWriter<File>,
}

impl OutputFile {
    /// Starts writing `path`: creates the temporary beside it (with the target's permissions
    /// where the target exists), or opens a device or pipe target for writing in place.
    ///
    /// # Errors
    /// The target is a directory, or the temporary (or the device) cannot be opened.
    pub fn create(path: &Path) -> io::Result<OutputFile> {
        let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        let target = if is_link { std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned()) } else { path.to_owned() };
        let existing = std::fs::metadata(&target).ok();
        if let Some(m) = &existing {
            if m.is_dir() {
                return Err(io::Error::new(io::ErrorKind::IsADirectory, format!("{} is a directory", target.display())));
            }
            if !m.is_file() {
                let file = OpenOptions::new().write(true).open(&target)?;
                return Ok(OutputFile { target, temporary: None, out: BufWriter::with_capacity(1 << 16, file) });
            }
        }
        let temporary = temporary_path(&target);
        let create = || OpenOptions::new().write(true).create_new(true).open(&temporary);
        let file = match create() {
            // Left by a process of the same id that was killed mid-write.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                std::fs::remove_file(&temporary)?;
                create()?
            }
            r => r?,
        };
        if let Some(m) = existing {
            // Best effort: the replacement keeps the mode of the file it replaces.
            let _ = file.set_permissions(m.permissions());
        }
        Ok(OutputFile { target, temporary: Some(temporary), out: BufWriter::with_capacity(1 << 16, file) })
    }

    /// The temporary being written (`None` for a target written in place).
    pub fn temporary(&self) -> Option<&Path> {
        self.temporary.as_deref()
    }

    /// Finishes the file: flushes, syncs it to the disk and renames the temporary over the target.
    ///
    /// # Errors
    /// Flushing, syncing or renaming fails (the temporary is removed, the target left as it was).
    pub fn commit(mut self) -> io::Result<()> {
        self.put_in_place()
    }

    /// As [`OutputFile::commit`], keeping the file open: what is written afterwards goes on
    /// into the file now in place (flush it, or call this again). The first call renames; later
    /// ones flush.
    ///
    /// # Errors
    /// As [`OutputFile::commit`]; after an error, dropping the value removes the temporary.
    pub fn put_in_place(&mut self) -> io::Result<()> {
        self.out.flush()?;
        if let Some(temporary) = self.temporary.as_deref() {
            // Full disks and quotas may only show at the sync, not at the writes.
            self.out.get_ref().sync_all()?;
            std::fs::rename(temporary, &self.target)?;
            self.temporary = None;
        }
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.out.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Some(temporary) = self.temporary.take() {
            let _ = std::fs::remove_file(temporary);
        }
    }
}

/// Writes `bytes` to `path` through an [`OutputFile`].
///
/// # Errors
/// As [`OutputFile::create`], the write, and [`OutputFile::commit`].
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut out = OutputFile::create(path)?;
    out.write_all(bytes)?;
    out.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("nbody-file-io-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            std::fs::read_dir(dir).expect("list").filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    /// The target keeps its old contents until the commit; a write abandoned on the way (an
    /// error, a panic: the drop) leaves it untouched and removes the temporary.
    #[test]
    fn the_target_is_untouched_until_the_commit() {
        let dir = scratch("commit");
        let path = dir.join("state.csv");
        std::fs::write(&path, "old\n").expect("old file");
        let mut out = OutputFile::create(&path).expect("create");
        let tmp = out.temporary().expect("a temporary").to_owned();
        assert_eq!(tmp, dir.join(format!(".state.csv.{}.tmp", std::process::id())));
        out.write_all(&[b'x'; 200_000]).expect("write");
        out.flush().expect("flush");
        assert_eq!(std::fs::read(&path).expect("read"), b"old\n", "the target changed before the commit");
        assert_eq!(std::fs::metadata(&tmp).expect("temporary").len(), 200_000);
        drop(out);
        assert_eq!(std::fs::read(&path).expect("read"), b"old\n");
        assert_eq!(names(&dir), ["state.csv"], "the temporary stays behind");

        let mut out = OutputFile::create(&path).expect("create");
        out.write_all(b"new\n").expect("write");
        out.commit().expect("commit");
        assert_eq!(std::fs::read(&path).expect("read"), b"new\n");
        assert_eq!(names(&dir), ["state.csv"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A failed rename (the directory removed while writing) leaves no file and no temporary.
    #[test]
    fn a_failed_commit_leaves_nothing() {
        let dir = scratch("vanish");
        let sub = dir.join("sub");
        std::fs::create_dir_all(&sub).expect("sub dir");
        let mut out = OutputFile::create(&sub.join("x.png")).expect("create");
        out.write_all(b"partial").expect("write");
        std::fs::remove_dir_all(&sub).expect("remove the directory mid-write");
        assert!(out.commit().is_err(), "a rename into a removed directory succeeded");
        assert!(!sub.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A symbolic link is followed: the file it points to is replaced, the link stays.
    #[test]
    fn a_link_is_followed_and_kept() {
        let dir = scratch("link");
        let real = dir.join("real.csv");
        std::fs::write(&real, "old").expect("real");
        let link = dir.join("link.csv");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        write_whole(&link, b"new").expect("write through the link");
        assert!(std::fs::symlink_metadata(&link).expect("link").file_type().is_symlink());
        assert_eq!(std::fs::read(&real).expect("real"), b"new");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A device is written in place (never renamed over), and a full device's error says so.
    #[test]
    fn a_device_is_written_in_place_and_a_full_one_names_the_cause() {
        write_whole(Path::new("/dev/null"), b"nothing").expect("/dev/null takes anything");
        assert!(!std::fs::metadata("/dev/null").expect("stat").file_type().is_file(), "/dev/null was replaced");
        if Path::new("/dev/full").exists() {
            let e = write_whole(Path::new("/dev/full"), &[0; 100_000]).expect_err("/dev/full is full");
            let msg = WriteProblem(&e).to_string();
            assert!(msg.starts_with("no space left on device") && msg.contains("choose another path"), "{msg}");
            assert!(!std::fs::metadata("/dev/full").expect("stat").file_type().is_file(), "/dev/full was replaced");
        }
    }

    #[test]
    fn special_files_are_named_by_type() {
        let e = check_regular(Path::new("/dev/zero")).expect_err("a device").expect("refused by type");
        let msg = e.to_string();
        assert!(msg.contains("not a regular file but a character device"), "{msg}");
        assert!(check_regular(&std::env::temp_dir()).expect_err("a directory").expect("by type").to_string().contains("a directory"));
        assert!(check_regular(Path::new("/no/such/file")).expect_err("missing").is_err(), "a missing file is an I/O error");
    }
}
