//! Tipsy snapshots: the binary particle format of NVIDIA's nbody sample (`tipsy.h`, `-tipsy=FILE`)
//! and of the Tipsy/ChaNGa/Gasoline family of N-body codes.
//!
//! # Layout
//! A header (the C struct `dump` of `tipsy.h`: 28 bytes of fields, then 4 bytes of padding that
//! make it the struct's `sizeof`, 32; files without the padding are read too), then the particle
//! records: `nsph` gas, `ndark` dark, `nstar` star records, in that order, every field 4 bytes.
//!
//! | record | bytes | fields (f32 unless said) |
//! | --- | ---: | --- |
//! | header | 28 (+4) | `time` f64, `nbodies`, `ndim`, `nsph`, `ndark`, `nstar` (i32) |
//! | gas | 48 | mass, pos\[3\], vel\[3\], rho, temp, hsmooth, metals, phi |
//! | dark | 36 | mass, pos\[3\], vel\[3\], eps, phi (the sample stores a particle id, i32) |
//! | star | 44 | mass, pos\[3\], vel\[3\], metals, tform, eps, phi (id, i32) |
//!
//! Two byte orders exist: native little-endian files (what the sample reads and writes on x86)
//! and the standard Tipsy format written through XDR, big-endian. [`read_tipsy`] detects the order
//! from the header: `ndim` must be 1, 2 or 3 and the counts must add up to `nbodies`, which only
//! one order satisfies. Only mass, position and velocity are used; [`write_tipsy`] writes
//! little-endian, every body as a dark particle with `eps` = the run's softening and `phi` = its
//! index (the sample's id convention).
//!
//! [`read_tipsy_with`] checks the header before the records: the file's size (from the file
//! system) must be what the header's counts imply, and the counts within the [`ReadLimits`]; then
//! the records are streamed, an interrupt looked for every few thousand (see [`super::file_io`]).

use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use super::file_io::{never, open_regular, OutputFile, ReadLimits, SourceError, WriteProblem, CHECK_EVERY, MAX_FILE_BODIES};
use super::Bodies;

/// Bytes of the header's fields (f64 + 5 × i32).
pub const HEADER_FIELDS: usize = 28;
/// Bytes of the header as the C struct (`sizeof(dump)`, with 4 bytes of padding after `nstar`).
pub const HEADER_PADDED: usize = 32;
/// Bytes of one gas, dark and star record.
pub const RECORD_BYTES: [usize; 3] = [48, 36, 44];
/// The names of the three particle kinds, in file order.
const KINDS: [&str; 3] = ["gas", "dark", "star"];

/// The byte order of a tipsy file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    /// Little-endian: the native files of the sample on x86.
    Little,
    /// Big-endian: the standard XDR Tipsy format.
    Big,
}

/// What is wrong with a tipsy file. Every message names the file and, where there is one, the
/// byte offset and the particle, and says how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum TipsyError {
    /// The file could not be opened or read.
    #[error("{}: cannot read the tipsy file: {io}; check the path and its permissions", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error (in the message, printed once).
        io: std::io::Error,
    },
    /// The file could not be created or written.
    #[error("cannot write the tipsy file {}: {}", path.display(), WriteProblem(io))]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error (in the message, printed once).
        io: std::io::Error,
    },
    /// Neither byte order gives a valid header.
    #[error(
        "{}: not a tipsy snapshot: {detail}; a tipsy file starts with time (f64), nbodies, ndim (1–3), nsph, \
         ndark, nstar (i32, little- or big-endian) with nsph + ndark + nstar = nbodies",
        path.display()
    )]
    Header {
        /// The file.
        path: PathBuf,
        /// What the header holds.
        detail: String,
    },
    /// The file ends inside a particle record.
    #[error(
        "{}: truncated at byte {len}: particle {particle} ({kind} record {index}) needs bytes {offset}..{end}; \
         the header promises {nsph} gas, {ndark} dark and {nstar} star particles ({expected} bytes); \
         the file was cut short: copy it again or fix the header's counts",
        path.display()
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// The file's length in bytes.
        len: usize,
        /// 0-based index of the first incomplete particle in the file.
        particle: usize,
        /// Its kind (`gas`, `dark`, `star`).
        kind: &'static str,
        /// Its index among the particles of its kind.
        index: usize,
        /// Byte offset where its record starts.
        offset: usize,
        /// Byte offset where its record ends.
        end: usize,
        /// Gas particles in the header.
        nsph: usize,
        /// Dark particles in the header.
        ndark: usize,
        /// Star particles in the header.
        nstar: usize,
        /// The file size the header implies (with the padded header).
        expected: usize,
    },
    /// Bytes follow the last particle record.
    #[error(
        "{}: {extra} byte(s) after the last of the {nbodies} particles the header counts (the file has {len} bytes, \
         the header implies {expected}); the header's counts are wrong or the file is not a tipsy snapshot",
        path.display()
    )]
    Trailing {
        /// The file.
        path: PathBuf,
        /// Bytes too many.
        extra: usize,
        /// Particles in the header.
        nbodies: usize,
        /// The file's length in bytes.
        len: usize,
        /// The file size the header implies (with the padded header).
        expected: usize,
    },
    /// A mass, position or velocity is NaN or infinite.
    #[error(
        "{}: particle {particle} ({kind} record {index}), `{field}` at byte {offset} is {value}; every mass, \
         position and velocity must be finite",
        path.display()
    )]
    NonFinite {
        /// The file.
        path: PathBuf,
        /// 0-based index of the particle in the file.
        particle: usize,
        /// Its kind.
        kind: &'static str,
        /// Its index among the particles of its kind.
        index: usize,
        /// The field (`mass`, `x`, … `vz`).
        field: &'static str,
        /// Byte offset of the value.
        offset: usize,
        /// The value.
        value: f32,
    },
    /// A mass is negative.
    #[error(
        "{}: particle {particle} ({kind} record {index}) has negative mass {value} at byte {offset}; masses must be ≥ 0",
        path.display()
    )]
    NegativeMass {
        /// The file.
        path: PathBuf,
        /// 0-based index of the particle in the file.
        particle: usize,
        /// Its kind.
        kind: &'static str,
        /// Its index among the particles of its kind.
        index: usize,
        /// Byte offset of the mass.
        offset: usize,
        /// The value.
        value: f32,
    },
    /// The header counts no particles.
    #[error("{}: the tipsy header counts no particles (nbodies = 0); write a snapshot with at least one", path.display())]
    NoBodies {
        /// The file.
        path: PathBuf,
    },
    /// Refused by its type, more particles than the limits allow, or the read was stopped.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// More bodies than a tipsy header can count (i32).
    #[error("{}: {n} bodies do not fit a tipsy header (at most {} particles); save as .csv instead", path.display(), i32::MAX)]
    TooMany {
        /// The file.
        path: PathBuf,
        /// Bodies to write.
        n: usize,
    },
}

/// The fields of a tipsy header that the reader uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Header {
    /// Simulation time of the snapshot.
    pub time: f64,
    /// Byte order of the file.
    pub order: ByteOrder,
    /// Gas, dark and star particle counts.
    pub counts: [usize; 3],
}

impl Header {
    /// Particles in the file.
    pub fn nbodies(&self) -> usize {
        self.counts.iter().sum()
    }

    /// Bytes of all particle records.
    fn body_bytes(&self) -> u64 {
        self.counts.iter().zip(RECORD_BYTES).map(|(&n, b)| n as u64 * b as u64).sum()
    }
}

fn read_f64(b: &[u8], order: ByteOrder) -> f64 {
    let a: [u8; 8] = b[..8].try_into().unwrap_or([0; 8]);
    match order {
        ByteOrder::Little => f64::from_le_bytes(a),
        ByteOrder::Big => f64::from_be_bytes(a),
    }
}

fn read_u32(b: &[u8], order: ByteOrder) -> u32 {
    let a: [u8; 4] = b[..4].try_into().unwrap_or([0; 4]);
    match order {
        ByteOrder::Little => u32::from_le_bytes(a),
        ByteOrder::Big => u32::from_be_bytes(a),
    }
}

fn read_i32(b: &[u8], order: ByteOrder) -> i32 {
    read_u32(b, order) as i32
}

/// The header in `bytes` under `order`, if it is a valid one (ndim 1–3, counts ≥ 0 adding up to
/// nbodies).
fn header_as(bytes: &[u8], order: ByteOrder) -> Option<Header> {
    if bytes.len() < HEADER_FIELDS {
        return None;
    }
    let field = |k: usize| read_i32(&bytes[8 + 4 * k..], order);
    let (nbodies, ndim) = (field(0), field(1));
    let counts = [field(2), field(3), field(4)];
    if !(1..=3).contains(&ndim) || nbodies < 0 || counts.iter().any(|&c| c < 0) {
        return None;
    }
    let counts = counts.map(|c| c as usize);
    (counts.iter().sum::<usize>() == nbodies as usize).then(|| Header { time: read_f64(bytes, order), order, counts })
}

/// The header of a tipsy file, in whichever byte order makes it valid (little-endian first).
/// `None` when neither does: the bytes are not a tipsy snapshot.
pub fn sniff(bytes: &[u8]) -> Option<Header> {
    header_as(bytes, ByteOrder::Little).or_else(|| header_as(bytes, ByteOrder::Big))
}

/// True when `path` names a tipsy file by its extension (`.tipsy`, `.std` or `.bin`, any case).
pub fn has_tipsy_extension(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| ["tipsy", "std", "bin"].iter().any(|t| e.eq_ignore_ascii_case(t)))
}

/// True when the existing regular file at `path` starts with a valid tipsy header whose counts
/// match the file's size (with or without the header padding). Reads the header alone; a
/// device, pipe or directory is not opened.
pub fn looks_like_tipsy(path: &Path) -> bool {
    let Ok((mut file, len)) = open_regular(path) else { return false };
    let mut head = [0u8; HEADER_PADDED];
    let Ok(got) = read_up_to(&mut file, &mut head) else { return false };
    sniff(&head[..got])
        .is_some_and(|h| len.checked_sub(h.body_bytes()).is_some_and(|rest| rest == HEADER_FIELDS as u64 || rest == HEADER_PADDED as u64))
}

/// Reads into `buf` until it is full or the input ends; the bytes read.
fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Read a tipsy snapshot into [`Bodies`] (`pos[i] = [x, y, z, mass]`, `vel[i] = [vx, vy, vz, 0]`)
/// within this machine's limits ([`ReadLimits::this_machine`]), without an interrupt.
///
/// # Errors
/// As [`read_tipsy_with`].
pub fn read_tipsy(path: &Path) -> Result<Bodies, TipsyError> {
    read_tipsy_with(path, &ReadLimits::this_machine(&never))
}

/// Read a tipsy snapshot into [`Bodies`] within `limits`, gas, dark and star particles in file
/// order. The path must name a regular file (checked before it is opened); the header is read
/// first and the file's size checked against its counts, then the records are streamed. The byte
/// order is detected from the header (see the module docs); the other fields (eps, phi, rho, …)
/// are not used.
///
/// # Errors
/// [`TipsyError`]: not a regular file, unreadable file, no valid header, a file shorter than its
/// header promises (the byte offset and the particle where it ends) or longer, more particles
/// than `limits` allow, the read stopped, a non-finite value, a negative mass, or no particles.
pub fn read_tipsy_with(path: &Path, limits: &ReadLimits) -> Result<Bodies, TipsyError> {
    let read_error = |io| TipsyError::Read { path: path.to_owned(), io };
    let (file, len) = open_regular(path).map_err(|e| e.map_or_else(read_error, TipsyError::Source))?;
    read_from(path, &mut BufReader::with_capacity(1 << 16, file), len, limits).map(|(_, bodies)| bodies)
}

/// Parses the bytes of a tipsy file named `path` (for messages): its header and bodies.
///
/// # Errors
/// As [`read_tipsy_with`] with no limit but [`MAX_FILE_BODIES`], without the read errors.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<(Header, Bodies), TipsyError> {
    let limits = ReadLimits::bodies(MAX_FILE_BODIES, "the step kernels' limit", &never);
    read_from(path, &mut &bytes[..], bytes.len() as u64, &limits)
}

/// Reads a tipsy file of `len` bytes from `input`: the header, the size and limit checks, then
/// the records one by one.
fn read_from(path: &Path, input: &mut impl Read, len: u64, limits: &ReadLimits) -> Result<(Header, Bodies), TipsyError> {
    let read_error = |io| TipsyError::Read { path: path.to_owned(), io };
    let mut head = [0u8; HEADER_PADDED];
    let got = read_up_to(input, &mut head).map_err(read_error)?;
    let bytes = &head[..got];
    let Some(header) = sniff(bytes) else {
        return Err(header_error(path, bytes, len));
    };
    let n = header.nbodies();
    if n == 0 {
        return Err(TipsyError::NoBodies { path: path.to_owned() });
    }
    let body_bytes = header.body_bytes();
    let expected = HEADER_PADDED as u64 + body_bytes;
    // The padded header is the usual one; a file exactly 4 bytes shorter has the bare 28.
    let start = if len == HEADER_FIELDS as u64 + body_bytes { HEADER_FIELDS } else { HEADER_PADDED };
    let size = |b: u64| usize::try_from(b).unwrap_or(usize::MAX);
    if len > expected {
        let (len, expected) = (size(len), size(expected));
        return Err(TipsyError::Trailing { path: path.to_owned(), extra: len - expected, nbodies: n, len, expected });
    }
    if len < start as u64 + body_bytes {
        if let Some(e) = truncated(path, &header, len, start as u64, expected) {
            return Err(e);
        }
    }
    if n > limits.max_bodies {
        let found = format!("the header counts {n} particles");
        let (max, basis) = (limits.max_bodies, limits.basis.clone());
        return Err(SourceError::TooManyBodies { path: path.to_owned(), found, max, basis }.into());
    }
    // The header's records start at `start`: what of them came with the header comes first.
    let mut records = bytes.get(start..).unwrap_or(&[]).chain(input);
    // The size matches the counts, so the file holds every body it counts.
    let mut bodies = Bodies { pos: Vec::with_capacity(n), vel: Vec::with_capacity(n) };
    let mut offset = start;
    const FIELDS: [&str; 7] = ["mass", "x", "y", "z", "vx", "vy", "vz"];
    let mut record = [0u8; 48];
    for ((&count, &size), kind) in header.counts.iter().zip(&RECORD_BYTES).zip(KINDS) {
        for index in 0..count {
            let particle = bodies.len();
            if particle > 0 && particle.is_multiple_of(CHECK_EVERY) && (limits.stop)() {
                return Err(SourceError::Interrupted { path: path.to_owned(), at: format!("particle {particle}") }.into());
            }
            records.read_exact(&mut record[..size]).map_err(read_error)?;
            let mut v = [0.0f32; 7];
            for (k, slot) in v.iter_mut().enumerate() {
                let value = f32::from_bits(read_u32(&record[4 * k..], header.order));
                let (field, at) = (FIELDS[k], offset + 4 * k);
                if !value.is_finite() {
                    return Err(TipsyError::NonFinite { path: path.to_owned(), particle, kind, index, field, offset: at, value });
                }
                if k == 0 && value < 0.0 {
                    return Err(TipsyError::NegativeMass { path: path.to_owned(), particle, kind, index, offset: at, value });
                }
                *slot = value;
            }
            let [m, x, y, z, vx, vy, vz] = v;
            bodies.pos.push([x, y, z, m]);
            bodies.vel.push([vx, vy, vz, 0.0]);
            offset += size;
        }
    }
    Ok((header, bodies))
}

/// The error of a file whose first bytes `bytes` (of `len`) are no tipsy header, with what they
/// say read little-endian.
fn header_error(path: &Path, bytes: &[u8], len: u64) -> TipsyError {
    let detail = if bytes.len() < HEADER_FIELDS {
        format!("{len} bytes, shorter than the {HEADER_FIELDS}-byte header")
    } else {
        let le = |k: usize| read_i32(&bytes[8 + 4 * k..], ByteOrder::Little);
        format!(
            "read little-endian it says nbodies {}, ndim {}, nsph {}, ndark {}, nstar {}, and big-endian no better",
            le(0),
            le(1),
            le(2),
            le(3),
            le(4)
        )
    };
    TipsyError::Header { path: path.to_owned(), detail }
}

/// The error of a file of `len` bytes, shorter than `header` promises (`expected` bytes with the
/// padded header; the records start at `start`): the first record that ends past the end of it
/// (`None` if none does).
fn truncated(path: &Path, header: &Header, len: u64, start: u64, expected: u64) -> Option<TipsyError> {
    let size = |b: u64| usize::try_from(b).unwrap_or(usize::MAX);
    let [nsph, ndark, nstar] = header.counts;
    // The first record that ends past the end of the file.
    let (mut offset, mut particle) = (start, 0usize);
    for ((&count, &record), kind) in header.counts.iter().zip(&RECORD_BYTES).zip(KINDS) {
        let record = record as u64;
        if offset + count as u64 * record > len {
            let index = len.saturating_sub(offset) / record;
            let at = offset + index * record;
            return Some(TipsyError::Truncated {
                path: path.to_owned(),
                len: size(len),
                particle: particle + size(index),
                kind,
                index: size(index),
                offset: size(at),
                end: size(at + record),
                nsph,
                ndark,
                nstar,
                expected: size(expected),
            });
        }
        offset += count as u64 * record;
        particle += count;
    }
    None
}

/// Encodes `bodies` as a little-endian tipsy snapshot: the padded header (`time`, N, ndim 3, no
/// gas, N dark, no stars) and one dark record per body with `eps` = `softening` and `phi` = the
/// body's index as an i32 (the sample's id). Bodies beyond `min(pos.len(), vel.len())` are left out.
///
/// # Errors
/// [`TipsyError::TooMany`] past `i32::MAX` bodies (`path` names the file in the message).
pub fn encode(path: &Path, bodies: &Bodies, time: f64, softening: f32) -> Result<Vec<u8>, TipsyError> {
    let n = bodies.pos.len().min(bodies.vel.len());
    let mut out = Vec::with_capacity(HEADER_PADDED + n * RECORD_BYTES[1]);
    let count = count_of(path, n)?;
    encode_into(&mut out, bodies, count, time, softening).map_err(|io| TipsyError::Write { path: path.to_owned(), io })?;
    Ok(out)
}

/// N as a tipsy header's count.
fn count_of(path: &Path, n: usize) -> Result<i32, TipsyError> {
    i32::try_from(n).map_err(|_| TipsyError::TooMany { path: path.to_owned(), n })
}

/// Writes the snapshot [`encode`] describes, of `count` bodies, to `out`.
fn encode_into(out: &mut impl Write, bodies: &Bodies, count: i32, time: f64, softening: f32) -> io::Result<()> {
    out.write_all(&time.to_le_bytes())?;
    // nbodies, ndim, nsph, ndark, nstar, and the 4 bytes of padding.
    for field in [count, 3, 0, count, 0, 0] {
        out.write_all(&field.to_le_bytes())?;
    }
    let mut record = [0u8; 36];
    for (i, (p, v)) in bodies.pos.iter().zip(&bodies.vel).enumerate() {
        for (k, value) in [p[3], p[0], p[1], p[2], v[0], v[1], v[2], softening].into_iter().enumerate() {
            record[4 * k..4 * k + 4].copy_from_slice(&value.to_le_bytes());
        }
        record[32..].copy_from_slice(&(i as i32).to_le_bytes());
        out.write_all(&record)?;
    }
    Ok(())
}

/// Write `bodies` as a little-endian tipsy snapshot (see [`encode`]); reading it back with
/// [`read_tipsy`] gives the same bits. The file appears whole or not at all ([`OutputFile`]: a
/// temporary beside it, renamed over it when complete).
///
/// # Errors
/// [`TipsyError::Write`] when the file cannot be created or written (its cause and remedy: a full
/// disk, a missing directory, …; the target is then left as it was); [`TipsyError::TooMany`].
pub fn write_tipsy(path: &Path, bodies: &Bodies, time: f64, softening: f32) -> Result<(), TipsyError> {
    let count = count_of(path, bodies.pos.len().min(bodies.vel.len()))?;
    let io = |io| TipsyError::Write { path: path.to_owned(), io };
    let mut out = OutputFile::create(path).map_err(io)?;
    encode_into(&mut out, bodies, count, time, softening).map_err(io)?;
    out.commit().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Bodies {
        Bodies {
            pos: vec![[1.0, -2.5, 3.25, 0.5], [0.0, 1e-3, -7.0, 0.0], [f32::MIN_POSITIVE, 4.0, 5.0, 2.0]],
            vel: vec![[0.1, 0.2, 0.3, 0.0], [-1.0, 0.0, 2.0, 0.0], [9.0, -9.0, 1e20, 0.0]],
        }
    }

    /// Big-endian bytes of a standard (XDR) file with `counts` particles, from `bodies`, with or
    /// without the header padding.
    fn xdr(bodies: &Bodies, counts: [usize; 3], padded: bool) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&1.5f64.to_be_bytes());
        let n = counts.iter().sum::<usize>() as i32;
        for f in [n, 3, counts[0] as i32, counts[1] as i32, counts[2] as i32] {
            out.extend_from_slice(&f.to_be_bytes());
        }
        if padded {
            out.extend_from_slice(&[0; 4]);
        }
        let mut i = 0;
        for (kind, &c) in counts.iter().enumerate() {
            for _ in 0..c {
                let (p, v) = (bodies.pos[i], bodies.vel[i]);
                for x in [p[3], p[0], p[1], p[2], v[0], v[1], v[2]] {
                    out.extend_from_slice(&x.to_be_bytes());
                }
                out.extend(std::iter::repeat_n(0xab, RECORD_BYTES[kind] - 28));
                i += 1;
            }
        }
        out
    }

    #[test]
    fn little_endian_round_trip_is_bit_exact() {
        let path = Path::new("x.tipsy");
        let bytes = encode(path, &sample(), 2.0, 0.05).unwrap();
        assert_eq!(bytes.len(), HEADER_PADDED + 3 * 36);
        let (h, b) = parse(path, &bytes).unwrap();
        assert_eq!((h.order, h.counts, h.time), (ByteOrder::Little, [0, 3, 0], 2.0));
        assert_eq!(b, sample());
    }

    #[test]
    fn big_endian_gas_dark_star_in_file_order() {
        for padded in [true, false] {
            let bytes = xdr(&sample(), [1, 1, 1], padded);
            let (h, b) = parse(Path::new("x.std"), &bytes).unwrap();
            assert_eq!((h.order, h.counts, h.time), (ByteOrder::Big, [1, 1, 1], 1.5));
            assert_eq!(b, sample());
        }
    }

    #[test]
    fn truncated_file_names_offset_and_particle() {
        let bytes = xdr(&sample(), [1, 1, 1], true);
        let cut = &bytes[..bytes.len() - 10];
        let e = parse(Path::new("t.std"), cut).unwrap_err().to_string();
        assert!(e.contains("truncated at byte 150"), "{e}");
        assert!(e.contains("particle 2 (star record 0) needs bytes 116..160"), "{e}");
    }

    #[test]
    fn malformed_files_get_clear_errors() {
        let p = Path::new("m.tipsy");
        let short = parse(p, &[0; 10]).unwrap_err().to_string();
        assert!(short.contains("shorter than the 28-byte header"), "{short}");
        let mut bad = encode(p, &sample(), 0.0, 0.0).unwrap();
        bad[12] = 7; // ndim 7
        assert!(parse(p, &bad).unwrap_err().to_string().contains("not a tipsy snapshot"));
        let mut long = encode(p, &sample(), 0.0, 0.0).unwrap();
        long.extend_from_slice(&[0; 5]);
        assert!(parse(p, &long).unwrap_err().to_string().contains("5 byte(s) after the last"));
        let mut nan = encode(p, &sample(), 0.0, 0.0).unwrap();
        nan[HEADER_PADDED + 36 + 4..HEADER_PADDED + 36 + 8].copy_from_slice(&f32::NAN.to_le_bytes());
        let e = parse(p, &nan).unwrap_err().to_string();
        assert!(e.contains("particle 1 (dark record 1), `x` at byte 72"), "{e}");
        let mut neg = encode(p, &sample(), 0.0, 0.0).unwrap();
        neg[HEADER_PADDED..HEADER_PADDED + 4].copy_from_slice(&(-1.0f32).to_le_bytes());
        assert!(parse(p, &neg).unwrap_err().to_string().contains("negative mass -1"));
        let empty = encode(p, &Bodies::default(), 0.0, 0.0).unwrap();
        assert!(parse(p, &empty).unwrap_err().to_string().contains("no particles"));
    }
}
