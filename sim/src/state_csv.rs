//! State files: CSV with a header naming at least `x,y,z,vx,vy,vz,mass`.
//!
//! Columns may come in any order; extra columns are ignored; whitespace around names and values
//! is trimmed; lines starting with `#` are comments. One row per body, values parsed as f32 (any
//! form Rust's `f32::from_str` accepts, e.g. `1.5`, `-2e-3`). A field may be put in double
//! quotes (then it may hold commas; `""` is a quote), but must end on its line. [`write_state`]
//! prints every f32 in its shortest round-tripping decimal form, so write → read gives the same
//! bits.
//!
//! The file is streamed ([`read_state_with`]): a regular file only, lines of at most
//! [`MAX_LINE_BYTES`] bytes, at most as many rows as the [`ReadLimits`] allow, an interrupt
//! looked for every few thousand rows (the limits are in [`super::file_io`]).

use std::borrow::Cow;
use std::fmt;
use std::io::{BufRead, BufReader, Read as _, Write};
use std::path::{Path, PathBuf};

use super::file_io::{never, open_regular, OutputFile, ReadLimits, SourceError, WriteProblem, CHECK_EVERY, MAX_LINE_BYTES};
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
    #[error("cannot write the state file {}: {}", path.display(), WriteProblem(io))]
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
    /// A line is longer than [`MAX_LINE_BYTES`]: not a state file (or a row with far too many columns).
    #[error(
        "{}, line {line}: longer than {max} bytes, the longest line a state file may have; this is not a CSV state \
         file (binary data?), or a row has far too many columns",
        path.display()
    )]
    LineTooLong {
        /// The file.
        path: PathBuf,
        /// Line (1-based).
        line: u64,
        /// The limit, bytes.
        max: usize,
    },
    /// Refused by its type or size, too many rows, or the read was stopped.
    #[error(transparent)]
    Source(#[from] SourceError),
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

/// Read a state file into [`Bodies`] (`pos[i] = [x, y, z, mass]`, `vel[i] = [vx, vy, vz, 0]`)
/// within this machine's limits ([`ReadLimits::this_machine`]), without an interrupt.
///
/// # Errors
/// As [`read_state_with`].
pub fn read_state(path: &Path) -> Result<Bodies, StateFileError> {
    read_state_with(path, &ReadLimits::this_machine(&never))
}

/// Read a state file into [`Bodies`] within `limits`: the path must name a regular file (checked
/// before it is opened), no larger than `limits` allows; it is read line by line, each line at
/// most [`MAX_LINE_BYTES`] bytes, at most `limits.max_bodies` rows, and `limits.stop` is asked
/// every [`CHECK_EVERY`] lines (comments and blank lines too). Memory grows with the rows read.
///
/// # Errors
/// [`StateFileError`]: not a regular file, too large, a line too long, too many rows, the read
/// stopped, unreadable file, missing columns, malformed row, a value that is not a number or not
/// finite in f32, a negative mass, or no rows. The first problem found is returned.
pub fn read_state_with(path: &Path, limits: &ReadLimits) -> Result<Bodies, StateFileError> {
    let read_error = |io| StateFileError::Read { path: path.to_owned(), io };
    let (file, len) = open_regular(path).map_err(|e| e.map_or_else(read_error, StateFileError::Source))?;
    // Every row holds a body, every line is at most MAX_LINE_BYTES long (plus its line end).
    let max = (limits.max_bodies as u64).saturating_add(1).saturating_mul(MAX_LINE_BYTES as u64 + 2);
    if len > max {
        let (max_bodies, basis) = (limits.max_bodies, limits.basis.clone());
        return Err(SourceError::TooLarge { path: path.to_owned(), len, max, max_bodies, basis }.into());
    }
    let input = BufReader::with_capacity(1 << 16, file).take(max);
    let mut lines = Lines { input, line: 0, buf: Vec::new(), stop: limits.stop };

    // The header: the first line that is neither blank nor a comment.
    let (header_line, found) = loop {
        match lines.next(path)? {
            None => {
                return Err(StateFileError::MissingColumns {
                    path: path.to_owned(),
                    line: lines.line.max(1),
                    missing: COLUMNS.map(str::to_owned).to_vec(),
                    found: Vec::new(),
                })
            }
            Some((line, text)) => {
                let text = text.strip_prefix('\u{feff}').unwrap_or(text);
                if let Some(fields) = fields_of(text).map_err(|message| malformed(path, line, message))? {
                    break (line, fields.into_iter().map(Cow::into_owned).collect::<Vec<String>>());
                }
            }
        }
    };
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
    while let Some((line, text)) = lines.next(path)? {
        let Some(record) = fields_of(text).map_err(|message| malformed(path, line, message))? else { continue };
        if record.len() != found.len() {
            let message = format!("{} field(s) where the header has {}", record.len(), found.len());
            return Err(malformed(path, line, message));
        }
        if bodies.len() == limits.max_bodies {
            let found = format!("body {} is on line {line}", limits.max_bodies as u64 + 1);
            let (max, basis) = (limits.max_bodies, limits.basis.clone());
            return Err(SourceError::TooManyBodies { path: path.to_owned(), found, max, basis }.into());
        }
        let values = row_values(path, line, &record, &index)?;
        let [x, y, z, vx, vy, vz, m] = values;
        bodies.pos.push([x, y, z, m]);
        bodies.vel.push([vx, vy, vz, 0.0]);
    }
    if bodies.is_empty() {
        return Err(StateFileError::NoBodies { path: path.to_owned(), line: header_line });
    }
    Ok(bodies)
}

/// The seven values of the row `record` on `line`, in [`COLUMNS`] order (`index`: each column's
/// field): numbers, finite in f32, the mass not negative.
fn row_values(path: &Path, line: u64, record: &[Cow<'_, str>], index: &[usize; 7]) -> Result<[f32; 7], StateFileError> {
    let mut values = [0.0f32; 7];
    for ((value, &k), name) in values.iter_mut().zip(index).zip(COLUMNS) {
        let text: &str = &record[k];
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
            return Err(StateFileError::NegativeMass { path: path.to_owned(), line, column: k + 1, value: text.to_owned() });
        }
        *value = v;
    }
    Ok(values)
}

/// Write `bodies` as CSV with header `x,y,z,vx,vy,vz,mass`, one row per body, each f32 in its
/// shortest decimal form that reads back to the same bits. The file appears whole or not at all
/// ([`OutputFile`]: a temporary beside it, renamed over it when complete).
///
/// Bodies beyond `min(pos.len(), vel.len())` are not written.
///
/// # Errors
/// [`StateFileError::Write`] when the file cannot be created or written (its cause and remedy:
/// a full disk, a missing directory, …); the target is then left as it was.
pub fn write_state(path: &Path, bodies: &Bodies) -> Result<(), StateFileError> {
    let io = |source| StateFileError::Write { path: path.to_owned(), io: source };
    let mut out = OutputFile::create(path).map_err(io)?;
    writeln!(out, "{}", COLUMNS.join(",")).map_err(io)?;
    for (p, v) in bodies.pos.iter().zip(&bodies.vel) {
        writeln!(out, "{},{},{},{},{},{},{}", p[0], p[1], p[2], v[0], v[1], v[2], p[3]).map_err(io)?;
    }
    out.commit().map_err(io)
}

/// The lines of a file, numbered from 1, each at most [`MAX_LINE_BYTES`] bytes, with a look at
/// the "stop requested" callback every [`CHECK_EVERY`] lines.
struct Lines<'a, R> {
    input: R,
    /// The number of the line last returned (0 before the first).
    line: u64,
    buf: Vec<u8>,
    stop: &'a dyn Fn() -> bool,
}

impl<R: BufRead> Lines<'_, R> {
    /// The next line's number and text without its line end (`\n` or `\r\n`); `None` at the end
    /// of the file.
    ///
    /// # Errors
    /// A line longer than [`MAX_LINE_BYTES`] or not UTF-8, a read error, or the read stopped.
    fn next(&mut self, path: &Path) -> Result<Option<(u64, &str)>, StateFileError> {
        if self.line > 0 && self.line.is_multiple_of(CHECK_EVERY as u64) && (self.stop)() {
            return Err(SourceError::Interrupted { path: path.to_owned(), at: format!("line {}", self.line + 1) }.into());
        }
        self.buf.clear();
        let cap = MAX_LINE_BYTES as u64 + 2;
        let n = (&mut self.input).take(cap).read_until(b'\n', &mut self.buf);
        let n = n.map_err(|io| StateFileError::Read { path: path.to_owned(), io })?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        if self.buf.len() > MAX_LINE_BYTES {
            return Err(StateFileError::LineTooLong { path: path.to_owned(), line: self.line, max: MAX_LINE_BYTES });
        }
        match std::str::from_utf8(&self.buf) {
            Ok(text) => Ok(Some((self.line, text))),
            Err(e) => Err(malformed(path, self.line, format!("not UTF-8 text ({e})"))),
        }
    }
}

fn malformed(path: &Path, line: u64, message: String) -> StateFileError {
    StateFileError::Malformed { path: path.to_owned(), line, message }
}

/// The fields of one CSV line, each trimmed (a field in double quotes may hold commas, and `""`
/// for a quote); `None` for a blank line or a `#` comment.
///
/// # Errors
/// A quoted field that does not end on its line, or text after a closing quote.
fn fields_of(line: &str) -> Result<Option<Vec<Cow<'_, str>>>, String> {
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Ok(None);
    }
    let mut fields = Vec::with_capacity(8);
    let mut rest = line;
    loop {
        let start = rest.trim_start();
        if let Some(quoted) = start.strip_prefix('"') {
            // A quoted field: up to the quote not doubled.
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let after = loop {
                match chars.next() {
                    Some((k, '"')) if quoted[k + 1..].starts_with('"') => {
                        value.push('"');
                        chars.next();
                    }
                    Some((k, '"')) => break &quoted[k + 1..],
                    Some((_, c)) => value.push(c),
                    None => return Err("a quoted field does not end on its line (fields spanning lines are not read)".into()),
                }
            };
            fields.push(Cow::Owned(value.trim().to_owned()));
            let after = after.trim_start();
            match after.strip_prefix(',') {
                Some(next) => rest = next,
                None if after.is_empty() => return Ok(Some(fields)),
                None => return Err(format!("text `{after}` after a closing quote")),
            }
        } else {
            match rest.split_once(',') {
                Some((field, next)) => {
                    fields.push(Cow::Borrowed(field.trim()));
                    rest = next;
                }
                None => {
                    fields.push(Cow::Borrowed(rest.trim()));
                    return Ok(Some(fields));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_trimmed_and_quotes_may_hold_commas() {
        let f = |s: &str| fields_of(s).map(|o| o.map(|v| v.into_iter().map(Cow::into_owned).collect::<Vec<_>>()));
        assert_eq!(f(" x , \"y\" ,z").unwrap(), Some(vec!["x".into(), "y".into(), "z".into()]));
        assert_eq!(f("1,\"a, \"\"b\"\"\",,2").unwrap(), Some(vec!["1".into(), "a, \"b\"".into(), "".into(), "2".into()]));
        assert_eq!(f("  # comment").unwrap(), None);
        assert_eq!(f("   ").unwrap(), None);
        assert!(f("1,\"open").unwrap_err().contains("does not end on its line"));
        assert!(f("\"a\"b,1").unwrap_err().contains("after a closing quote"));
    }
}
