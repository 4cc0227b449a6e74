//! A small, strict reader of NumPy `.npy` files holding little-endian f32 arrays.
//!
//! The format (numpy.lib.format): the magic `\x93NUMPY`, a version (1, 2 or 3), the header
//! length (u16 for version 1, u32 after), then an ASCII (UTF-8 for version 3) Python dict literal
//! with exactly the keys `descr`, `fortran_order` and `shape`, then the raw data. Only `'<f4'`,
//! C order, is accepted: anything else is an error that says how to convert, never a guess.
//! Written by hand because the header is a few lines to parse and the crates for it pull in more
//! than this needs.

use anyhow::{Result, bail, ensure};
use std::path::Path;

const MAGIC: &[u8] = b"\x93NUMPY";

#[derive(Debug, PartialEq)]
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

/// Bytes of a `.npy` file to read for [`parse_header`] (the longest header NumPy writes is far
/// shorter; a longer one is an error).
pub const HEADER_BYTES: usize = 1 << 16;

/// The shape of the little-endian f32 C-ordered array of a `.npy` file and the offset of its data,
/// from the file's first bytes (at least the whole header); `path` names the file in errors.
pub fn parse_header(bytes: &[u8], path: &Path) -> Result<(Vec<usize>, usize)> {
    let file = path.display();
    ensure!(bytes.len() >= 10 && &bytes[..6] == MAGIC, "{file} is not a .npy file (no \\x93NUMPY magic)");
    let (major, minor) = (bytes[6], bytes[7]);
    let (header_len, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            ensure!(bytes.len() >= 12, "{file}: truncated .npy header");
            (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
        }
        _ => bail!("{file}: .npy format version {major}.{minor} is not supported (1, 2 or 3 are)"),
    };
    let end = start + header_len;
    ensure!(bytes.len() >= end, "{file}: truncated .npy header ({header_len} bytes announced)");
    let header =
        std::str::from_utf8(&bytes[start..end]).map_err(|_| anyhow::anyhow!("{file}: the .npy header is not text"))?;
    let dict = parse_dict(header).map_err(|e| anyhow::anyhow!("{file}: bad .npy header {:?}: {e}", header.trim()))?;

    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    for (key, value) in dict {
        match (key.as_str(), value) {
            ("descr", Value::Str(s)) => descr = Some(s),
            ("fortran_order", Value::Bool(b)) => fortran = Some(b),
            ("shape", Value::Tuple(t)) => shape = Some(t),
            (k, v) => bail!("{file}: unexpected .npy header entry '{k}': {v:?}"),
        }
    }
    let (Some(descr), Some(fortran), Some(shape)) = (descr, fortran, shape) else {
        bail!("{file}: the .npy header needs 'descr', 'fortran_order' and 'shape'");
    };
    ensure!(
        descr == "<f4",
        "{file}: .npy dtype is '{descr}', only little-endian float32 ('<f4') is read; \
         convert with numpy.save(path, array.astype('<f4'))"
    );
    ensure!(!fortran, "{file}: the .npy array is in Fortran order; save a C-ordered copy (numpy.ascontiguousarray)");
    shape
        .iter()
        .try_fold(1usize, |n, &s| n.checked_mul(s))
        .ok_or_else(|| anyhow::anyhow!("{file}: .npy shape {shape:?} overflows"))?;
    Ok((shape, end))
}

/// Parses the header's dict literal: `{'key': value, ...}` with string, bool or int-tuple values.
fn parse_dict(text: &str) -> Result<Vec<(String, Value)>, String> {
    let mut p = Parser { s: text.trim().as_bytes(), i: 0 };
    p.expect(b'{')?;
    let mut out = Vec::new();
    loop {
        p.skip_ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.skip_ws();
        p.expect(b':')?;
        p.skip_ws();
        let value = p.value()?;
        if out.iter().any(|(k, _)| *k == key) {
            return Err(format!("key '{key}' given twice"));
        }
        out.push((key, value));
        p.skip_ws();
        if !p.eat(b',') {
            p.skip_ws();
            p.expect(b'}')?;
            break;
        }
    }
    p.skip_ws();
    if p.i != p.s.len() {
        return Err("text after the closing brace".into());
    }
    Ok(out)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) { Ok(()) } else { Err(format!("expected '{}' at byte {}", c as char, self.i)) }
    }

    fn string(&mut self) -> Result<String, String> {
        let quote = match self.s.get(self.i) {
            Some(&q) if q == b'\'' || q == b'"' => q,
            _ => return Err(format!("expected a quoted string at byte {}", self.i)),
        };
        self.i += 1;
        let begin = self.i;
        while self.i < self.s.len() && self.s[self.i] != quote {
            self.i += 1;
        }
        if self.i == self.s.len() {
            return Err("unterminated string".into());
        }
        let s = String::from_utf8_lossy(&self.s[begin..self.i]).into_owned();
        self.i += 1;
        Ok(s)
    }

    fn value(&mut self) -> Result<Value, String> {
        let rest = &self.s[self.i..];
        if rest.starts_with(b"True") {
            self.i += 4;
            Ok(Value::Bool(true))
        } else if rest.starts_with(b"False") {
            self.i += 5;
            Ok(Value::Bool(false))
        } else if self.eat(b'(') {
            let mut dims = Vec::new();
            loop {
                self.skip_ws();
                if self.eat(b')') {
                    break;
                }
                let begin = self.i;
                while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                    self.i += 1;
                }
                let digits = std::str::from_utf8(&self.s[begin..self.i]).expect("ASCII digits");
                dims.push(digits.parse::<usize>().map_err(|_| format!("expected a size at byte {begin}"))?);
                self.skip_ws();
                if !self.eat(b',') {
                    self.skip_ws();
                    self.expect(b')')?;
                    break;
                }
            }
            Ok(Value::Tuple(dims))
        } else {
            Ok(Value::Str(self.string()?))
        }
    }
}

/// The bytes of a version 1.0 `.npy` file holding `values` with `shape` ('<f4', C order); for
/// tests and tools that write models.
pub fn to_bytes(shape: &[usize], values: &[f32]) -> Vec<u8> {
    assert_eq!(values.len(), shape.iter().product::<usize>());
    let dims: String = shape.iter().map(|d| format!("{d}, ")).collect();
    let dims = if shape.len() == 1 { dims.trim_end().to_string() } else { dims.trim_end_matches(", ").to_string() };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({dims}), }}");
    // Data starts on a 64-byte boundary; the header ends with a newline.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + 4 * values.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header's shape, and the values after it.
    fn parse(bytes: &[u8], p: &Path) -> Result<(Vec<usize>, Vec<f32>)> {
        let (shape, end) = parse_header(bytes, p)?;
        Ok((shape, bytes[end..].chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()))
    }

    #[test]
    fn round_trip_and_numpy_header_forms() {
        let p = Path::new("t.npy");
        let values: Vec<f32> = (0..6).map(|i| i as f32 * 0.5).collect();
        assert_eq!(parse(&to_bytes(&[2, 3], &values), p).unwrap(), (vec![2, 3], values.clone()));
        assert_eq!(parse(&to_bytes(&[6], &values), p).unwrap().0, vec![6]);
        // As numpy writes them: version 2 header, double quotes, no trailing comma.
        let header = "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3, 2)}\n";
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[2, 0]);
        b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        for v in &values {
            b.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(parse(&b, p).unwrap(), (vec![3, 2], values));
    }

    #[test]
    fn rejects_other_dtypes_and_orders() {
        let p = Path::new("m.npy");
        let good = to_bytes(&[2, 2], &[1.0; 4]);
        let swap = |from: &str, to: &str| {
            let mut b = good.clone();
            let at = good.windows(from.len()).position(|w| w == from.as_bytes()).unwrap();
            b[at..at + from.len()].copy_from_slice(to.as_bytes());
            b
        };
        let e = parse_header(&swap("<f4", "<f8"), p).unwrap_err().to_string();
        assert!(e.contains("m.npy") && e.contains("<f8"), "{e}");
        let e = parse_header(&swap("False", "True "), p).unwrap_err().to_string();
        assert!(e.contains("Fortran"), "{e}");
        assert!(parse_header(b"not numpy at all", p).unwrap_err().to_string().contains("magic"));
    }
}
