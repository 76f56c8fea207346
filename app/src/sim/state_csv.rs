//! State files: CSV with a header naming at least `x,y,z,vx,vy,vz,mass`.
//!
//! Columns may come in any order; extra columns are ignored; whitespace around names and values
//! is trimmed; lines starting with `#` are comments. One row per body, values parsed as f32 (any
//! form Rust's `f32::from_str` accepts, e.g. `1.5`, `-2e-3`). [`write_state`] prints every f32 in
//! its shortest round-tripping decimal form, so write → read gives the same bits.

use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::Bodies;

/// The columns a state file must have, in the order [`write_state`] writes them.
pub const COLUMNS: [&str; 7] = ["x", "y", "z", "vx", "vy", "vz", "mass"];

/// What is wrong with a state file. Every message names the file and, where there is one, the
/// 1-based line and column, and says how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// The file could not be opened or read.
    #[error("{}: cannot read the state file: {io}; check the path and its permissions", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error (in the message, not a separate source: printed once).
        io: std::io::Error,
    },
    /// The file could not be created or written.
    #[error("{}: cannot write the state file: {io}; check that the directory exists and is writable", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error (in the message, not a separate source: printed once).
        io: std::io::Error,
    },
    /// The header lacks required columns.
    #[error(
        "{}, line {line}: missing column(s) {}; the header must name x,y,z,vx,vy,vz,mass \
         (any order, extra columns ignored), found: {}",
        path.display(), missing.join(", "), ColumnList(found)
    )]
    MissingColumns {
        /// The file.
        path: PathBuf,
        /// Line of the header (1-based).
        line: u64,
        /// The required columns that are absent.
        missing: Vec<String>,
        /// The column names the header has.
        found: Vec<String>,
    },
    /// A value is not a number.
    #[error(
        "{}, line {line}, column {column} (`{name}`): `{value}` is not a number; \
         write a decimal number such as 1.5 or -2e-3",
        path.display()
    )]
    NotANumber {
        /// The file.
        path: PathBuf,
        /// Line (1-based).
        line: u64,
        /// Column (1-based).
        column: usize,
        /// Column name.
        name: String,
        /// The offending text.
        value: String,
    },
    /// A value is NaN, infinite, or beyond the f32 range.
    #[error(
        "{}, line {line}, column {column} (`{name}`): `{value}` is not a finite f32 (NaN, inf, or beyond ±3.4e38); \
         every value must be a finite number",
        path.display()
    )]
    NonFinite {
        /// The file.
        path: PathBuf,
        /// Line (1-based).
        line: u64,
        /// Column (1-based).
        column: usize,
        /// Column name.
        name: String,
        /// The offending text.
        value: String,
    },
    /// A mass is negative.
    #[error(
        "{}, line {line}, column {column} (`mass`): negative mass `{value}`; masses must be ≥ 0",
        path.display()
    )]
    NegativeMass {
        /// The file.
        path: PathBuf,
        /// Line (1-based).
        line: u64,
        /// Column (1-based).
        column: usize,
        /// The offending text.
        value: String,
    },
    /// A row is not valid CSV (e.g. a different number of fields than the header, or not UTF-8).
    #[error(
        "{}, line {line}: malformed CSV row: {message}; every row must have one field per header column",
        path.display()
    )]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Line (1-based).
        line: u64,
        /// What the CSV reader reported.
        message: String,
    },
    /// The file has a header but no body rows.
    #[error(
        "{}, line {line}: no bodies: the header is followed by no data rows; add one row per body",
        path.display()
    )]
    NoBodies {
        /// The file.
        path: PathBuf,
        /// Line of the header (1-based).
        line: u64,
    },
}

/// Formats a list of column names as `` `a`, `b` `` (or "nothing").
struct ColumnList<'a>(&'a [String]);

impl fmt::Display for ColumnList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("nothing");
        }
        for (k, name) in self.0.iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "`{name}`")?;
        }
        Ok(())
    }
}

/// Read a state file into [`Bodies`] (`pos[i] = [x, y, z, mass]`, `vel[i] = [vx, vy, vz, 0]`).
///
/// # Errors
/// [`StateFileError`]: unreadable file, missing columns, malformed row, a value that is not a
/// number or not finite in f32, a negative mass, or no rows. The first problem found is returned.
pub fn read_state(path: &Path) -> Result<Bodies, StateFileError> {
    let text = std::fs::read(path).map_err(|source| StateFileError::Read { path: path.to_owned(), io: source })?;
    // The CSV reader's own line count skips blank lines, so lines come from byte offsets.
    let lines = LineIndex::new(&text);
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .has_headers(true)
        .from_reader(text.as_slice());
    let malformed = |e: csv::Error| csv_error(path, &lines, e);

    let header = reader.headers().map_err(malformed)?.clone();
    let header_line = lines.line_of(header.position());
    let found: Vec<String> = header.iter().map(str::to_owned).collect();
    let mut index = [0usize; 7];
    let mut missing = Vec::new();
    for (slot, name) in index.iter_mut().zip(COLUMNS) {
        match found.iter().position(|h| h == name) {
            Some(k) => *slot = k,
            None => missing.push(name.to_owned()),
        }
    }
    if !missing.is_empty() {
        return Err(StateFileError::MissingColumns { path: path.to_owned(), line: header_line, missing, found });
    }

    let mut bodies = Bodies::default();
    for record in reader.records() {
        let record = record.map_err(malformed)?;
        let line = lines.line_of(record.position());
        let mut values = [0.0f32; 7];
        for ((value, &k), name) in values.iter_mut().zip(&index).zip(COLUMNS) {
            let text = record.get(k).unwrap_or("");
            let at = |path: &Path| (path.to_owned(), line, k + 1, name.to_owned(), text.to_owned());
            let v: f32 = text.parse().map_err(|_| {
                let (path, line, column, name, value) = at(path);
                StateFileError::NotANumber { path, line, column, name, value }
            })?;
            if !v.is_finite() {
                let (path, line, column, name, value) = at(path);
                return Err(StateFileError::NonFinite { path, line, column, name, value });
            }
            if name == "mass" && v < 0.0 {
                return Err(StateFileError::NegativeMass {
                    path: path.to_owned(),
                    line,
                    column: k + 1,
                    value: text.to_owned(),
                });
            }
            *value = v;
        }
        let [x, y, z, vx, vy, vz, m] = values;
        bodies.pos.push([x, y, z, m]);
        bodies.vel.push([vx, vy, vz, 0.0]);
    }
    if bodies.is_empty() {
        return Err(StateFileError::NoBodies { path: path.to_owned(), line: header_line });
    }
    Ok(bodies)
}

/// Write `bodies` as CSV with header `x,y,z,vx,vy,vz,mass`, one row per body, each f32 in its
/// shortest decimal form that reads back to the same bits.
///
/// Bodies beyond `min(pos.len(), vel.len())` are not written.
///
/// # Errors
/// [`StateFileError::Write`] when the file cannot be created or written.
pub fn write_state(path: &Path, bodies: &Bodies) -> Result<(), StateFileError> {
    let io = |source| StateFileError::Write { path: path.to_owned(), io: source };
    let mut out = BufWriter::new(File::create(path).map_err(io)?);
    writeln!(out, "{}", COLUMNS.join(",")).map_err(io)?;
    for (p, v) in bodies.pos.iter().zip(&bodies.vel) {
        writeln!(out, "{},{},{},{},{},{},{}", p[0], p[1], p[2], v[0], v[1], v[2], p[3]).map_err(io)?;
    }
    out.flush().map_err(io)?;
    Ok(())
}

/// Turns the byte offset where the CSV reader starts a record into the 1-based line of its first
/// field. (The reader's own line count skips blank lines, and its offset points before the blank
/// and comment lines it skipped.)
struct LineIndex<'a> {
    text: &'a [u8],
    /// Byte offsets of every `\n`.
    newlines: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    fn new(text: &'a [u8]) -> Self {
        let newlines = text.iter().enumerate().filter(|&(_, &b)| b == b'\n').map(|(k, _)| k).collect();
        Self { text, newlines }
    }

    /// The line of the record that starts at `position` (line 1 when the position is unknown).
    fn line_of(&self, position: Option<&csv::Position>) -> u64 {
        let Some(position) = position else { return 1 };
        let mut at = usize::try_from(position.byte()).unwrap_or(usize::MAX).min(self.text.len());
        // Skip the blank lines and `#` comment lines the reader passed over.
        loop {
            match self.text.get(at) {
                Some(b'\n' | b'\r') => at += 1,
                Some(b'#') => match self.newlines.get(self.newlines.partition_point(|&nl| nl < at)) {
                    Some(&nl) => at = nl + 1,
                    None => break,
                },
                _ => break,
            }
        }
        self.newlines.partition_point(|&nl| nl < at) as u64 + 1
    }
}

/// Maps a CSV reader error to [`StateFileError`].
fn csv_error(path: &Path, lines: &LineIndex, e: csv::Error) -> StateFileError {
    let line = lines.line_of(e.position());
    match e.into_kind() {
        csv::ErrorKind::Io(source) => StateFileError::Read { path: path.to_owned(), io: source },
        kind => StateFileError::Malformed { path: path.to_owned(), line, message: describe(&kind) },
    }
}

/// A short description of a CSV error kind, without the position (which the caller prints).
fn describe(kind: &csv::ErrorKind) -> String {
    match kind {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("{len} field(s) where the header has {expected_len}")
        }
        csv::ErrorKind::Utf8 { err, .. } => format!("not UTF-8 text ({err})"),
        other => format!("{other:?}"),
    }
}
