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

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

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
    #[error("{}: cannot write the tipsy file: {io}; check that the directory exists and is writable", path.display())]
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
    fn body_bytes(&self) -> usize {
        self.counts.iter().zip(RECORD_BYTES).map(|(n, b)| n * b).sum()
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

/// True when the existing file at `path` starts with a valid tipsy header whose counts match the
/// file's size (with or without the header padding).
pub fn looks_like_tipsy(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else { return false };
    sniff(&bytes).is_some_and(|h| [HEADER_FIELDS, HEADER_PADDED].contains(&bytes.len().wrapping_sub(h.body_bytes())))
}

/// Read a tipsy snapshot into [`Bodies`] (`pos[i] = [x, y, z, mass]`, `vel[i] = [vx, vy, vz, 0]`),
/// gas, dark and star particles in file order. The byte order is detected from the header (see
/// the module docs); the other fields (eps, phi, rho, …) are not used.
///
/// # Errors
/// [`TipsyError`]: unreadable file, no valid header, a file shorter than its header promises (the
/// byte offset and the particle where it ends) or longer, a non-finite value, a negative mass,
/// or no particles.
pub fn read_tipsy(path: &Path) -> Result<Bodies, TipsyError> {
    let bytes = std::fs::read(path).map_err(|io| TipsyError::Read { path: path.to_owned(), io })?;
    parse(path, &bytes).map(|(_, bodies)| bodies)
}

/// Parses the bytes of a tipsy file named `path` (for messages): its header and bodies.
///
/// # Errors
/// As [`read_tipsy`], without the read error.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<(Header, Bodies), TipsyError> {
    let Some(header) = sniff(bytes) else {
        let detail = if bytes.len() < HEADER_FIELDS {
            format!("{} bytes, shorter than the {HEADER_FIELDS}-byte header", bytes.len())
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
        return Err(TipsyError::Header { path: path.to_owned(), detail });
    };
    let n = header.nbodies();
    if n == 0 {
        return Err(TipsyError::NoBodies { path: path.to_owned() });
    }
    let body_bytes = header.body_bytes();
    let expected = HEADER_PADDED + body_bytes;
    // The padded header is the usual one; a file exactly 4 bytes shorter has the bare 28.
    let start = if bytes.len() == HEADER_FIELDS + body_bytes { HEADER_FIELDS } else { HEADER_PADDED };
    if bytes.len() > expected {
        let extra = bytes.len() - expected;
        return Err(TipsyError::Trailing { path: path.to_owned(), extra, nbodies: n, len: bytes.len(), expected });
    }
    let [nsph, ndark, nstar] = header.counts;
    // The header's count is only a claim until the records are read: reserve what the file holds.
    let cap = n.min(bytes.len() / RECORD_BYTES[1]);
    let mut bodies = Bodies { pos: Vec::with_capacity(cap), vel: Vec::with_capacity(cap) };
    let mut offset = start;
    const FIELDS: [&str; 7] = ["mass", "x", "y", "z", "vx", "vy", "vz"];
    for (kind_no, (&count, &size)) in header.counts.iter().zip(&RECORD_BYTES).enumerate() {
        let kind = KINDS[kind_no];
        for index in 0..count {
            let particle = bodies.len();
            let end = offset + size;
            if end > bytes.len() {
                let len = bytes.len();
                return Err(TipsyError::Truncated {
                    path: path.to_owned(),
                    len,
                    particle,
                    kind,
                    index,
                    offset,
                    end,
                    nsph,
                    ndark,
                    nstar,
                    expected,
                });
            }
            let mut v = [0.0f32; 7];
            for (k, slot) in v.iter_mut().enumerate() {
                let at = offset + 4 * k;
                let value = f32::from_bits(read_u32(&bytes[at..], header.order));
                let field = FIELDS[k];
                if !value.is_finite() {
                    return Err(TipsyError::NonFinite {
                        path: path.to_owned(),
                        particle,
                        kind,
                        index,
                        field,
                        offset: at,
                        value,
                    });
                }
                if k == 0 && value < 0.0 {
                    return Err(TipsyError::NegativeMass { path: path.to_owned(), particle, kind, index, offset: at, value });
                }
                *slot = value;
            }
            let [m, x, y, z, vx, vy, vz] = v;
            bodies.pos.push([x, y, z, m]);
            bodies.vel.push([vx, vy, vz, 0.0]);
            offset = end;
        }
    }
    Ok((header, bodies))
}

/// Encodes `bodies` as a little-endian tipsy snapshot: the padded header (`time`, N, ndim 3, no
/// gas, N dark, no stars) and one dark record per body with `eps` = `softening` and `phi` = the
/// body's index as an i32 (the sample's id). Bodies beyond `min(pos.len(), vel.len())` are left out.
///
/// # Errors
/// [`TipsyError::TooMany`] past `i32::MAX` bodies (`path` names the file in the message).
pub fn encode(path: &Path, bodies: &Bodies, time: f64, softening: f32) -> Result<Vec<u8>, TipsyError> {
    let n = bodies.pos.len().min(bodies.vel.len());
    let count = i32::try_from(n).map_err(|_| TipsyError::TooMany { path: path.to_owned(), n })?;
    let mut out = Vec::with_capacity(HEADER_PADDED + n * RECORD_BYTES[1]);
    out.extend_from_slice(&time.to_le_bytes());
    for field in [count, 3, 0, count, 0, 0] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    for (i, (p, v)) in bodies.pos.iter().zip(&bodies.vel).enumerate() {
        for value in [p[3], p[0], p[1], p[2], v[0], v[1], v[2], softening] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        out.extend_from_slice(&(i as i32).to_le_bytes());
    }
    Ok(out)
}

/// Write `bodies` as a little-endian tipsy snapshot (see [`encode`]); reading it back with
/// [`read_tipsy`] gives the same bits.
///
/// # Errors
/// [`TipsyError::Write`] when the file cannot be created or written; [`TipsyError::TooMany`].
pub fn write_tipsy(path: &Path, bodies: &Bodies, time: f64, softening: f32) -> Result<(), TipsyError> {
    let bytes = encode(path, bodies, time, softening)?;
    let io = |io| TipsyError::Write { path: path.to_owned(), io };
    let mut out = BufWriter::new(File::create(path).map_err(io)?);
    out.write_all(&bytes).map_err(io)?;
    out.flush().map_err(io)
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
