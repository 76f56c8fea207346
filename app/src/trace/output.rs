//! The recorder's files appear whole or not at all: each is written to a temporary beside its
//! target (`.NAME.PID.tmp`, the name every output of the app uses) and renamed over the target
//! when complete, so an interrupted or failed run never leaves a partial file where the user
//! asked for one; a temporary not renamed is removed when dropped. A target that is a device or
//! a pipe (`/dev/stdout`, a FIFO) is written in place: a rename would replace the device node.
//! A symbolic link is followed (the file it points to is replaced, the link stays).

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// A file being written: where it goes and the temporary it is written to until
/// [`Pending::commit`].
#[derive(Debug)]
pub(super) struct Pending {
    target: PathBuf,
    /// `None` when written in place, or once renamed.
    temporary: Option<PathBuf>,
}

/// Opens the file that becomes `path`: the temporary beside it (with the target's permissions
/// where it exists), or the device or pipe itself.
///
/// # Errors
/// The target is a directory, or the file cannot be opened.
pub(super) fn create(path: &Path) -> io::Result<(File, Pending)> {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let target = if is_link { std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned()) } else { path.to_owned() };
    let existing = std::fs::metadata(&target).ok();
    if let Some(m) = &existing {
        if m.is_dir() {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, format!("{} is a directory", target.display())));
        }
        if !m.is_file() {
            let file = OpenOptions::new().write(true).open(&target)?;
            return Ok((file, Pending { target, temporary: None }));
        }
    }
    let name = target.file_name().map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    let temporary = target.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let open = || OpenOptions::new().write(true).create_new(true).open(&temporary);
    let file = match open() {
        // Left by a process of the same id that was killed mid-write.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(&temporary)?;
            open()?
        }
        r => r?,
    };
    if let Some(m) = existing {
        let _ = file.set_permissions(m.permissions());
    }
    Ok((file, Pending { target, temporary: Some(temporary) }))
}

impl Pending {
    /// Syncs `file` (everything written to it) and renames the temporary over the target; later
    /// calls do nothing.
    ///
    /// # Errors
    /// Syncing or renaming fails.
    pub(super) fn commit(&mut self, file: &File) -> io::Result<()> {
        if let Some(temporary) = self.temporary.as_deref() {
            file.sync_all()?;
            std::fs::rename(temporary, &self.target)?;
            self.temporary = None;
        }
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(temporary) = self.temporary.take() {
            let _ = std::fs::remove_file(temporary);
        }
    }
}

/// Writes `bytes` as the whole file `path`.
///
/// # Errors
/// Creating, writing, syncing or renaming fails (the target is left as it was).
pub(super) fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (mut file, mut pending) = create(path)?;
    file.write_all(bytes)?;
    pending.commit(&file)
}
