//! A source wavelet read from a file: its samples, their interval and the time of the first one.
//!
//! Three kinds, by the file's extension:
//! - `.npy`: a 1-D little-endian float32 array (the model reader's `.npy` rules); the interval is
//!   the source's `sample_interval` key, the first sample is at t = 0.
//! - `.txt`, `.csv`, `.dat`: two columns, time (s) and value, separated by white space or a comma,
//!   `#` starting a comment; the times must be evenly spaced, and give the interval and the start.
//! - `.sgy`, `.segy`: one trace of a SEG-Y file (IBM or IEEE 4-byte floats, big-endian); the
//!   interval is the trace header's (bytes 117-118, microseconds) or else the binary header's
//!   (bytes 3217-3218), the first sample is at t = 0. Only that trace is read.

use anyhow::{Context, Result, bail, ensure};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Most samples a wavelet file may hold (beyond it the file is almost certainly not a wavelet).
pub const MAX_WAVELET_SAMPLES: usize = 10_000_000;

/// A wavelet's samples as a file gives them.
#[derive(Clone, Debug, PartialEq)]
pub struct WaveletSamples {
    pub values: Vec<f64>,
    /// Sample interval, s.
    pub interval: f64,
    /// Time of the first sample, s.
    pub start: f64,
}

/// The file kinds, from the extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaveletFileKind {
    Npy,
    Text,
    Segy,
}

impl WaveletFileKind {
    pub fn of(path: &Path) -> Result<Self> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        Ok(match ext.as_str() {
            "npy" => WaveletFileKind::Npy,
            "txt" | "csv" | "dat" => WaveletFileKind::Text,
            "sgy" | "segy" => WaveletFileKind::Segy,
            _ => bail!(
                "wavelet file {}: unknown kind; name it .npy (samples), .txt/.csv/.dat (time and value \
                 columns) or .sgy/.segy (a SEG-Y trace)",
                path.display()
            ),
        })
    }
}

/// Reads the wavelet of `path`: `trace` is the SEG-Y trace (0-based), `sample_interval` the
/// `.npy` file's interval; each is refused with the kinds it does not apply to.
pub fn read_wavelet(path: &Path, trace: Option<usize>, sample_interval: Option<f64>) -> Result<WaveletSamples> {
    let kind = WaveletFileKind::of(path)?;
    let file = path.display();
    ensure!(
        trace.is_none() || kind == WaveletFileKind::Segy,
        "wavelet file {file}: `trace` applies to SEG-Y files only"
    );
    ensure!(
        sample_interval.is_none() || kind == WaveletFileKind::Npy,
        "wavelet file {file}: `sample_interval` applies to .npy files only (this file gives its own)"
    );
    let w = match kind {
        WaveletFileKind::Npy => {
            let interval = sample_interval.with_context(|| {
                format!("wavelet file {file}: a .npy wavelet needs `sample_interval` (s) beside `file`")
            })?;
            read_npy(path, interval)?
        }
        WaveletFileKind::Text => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read wavelet file {file}"))?;
            parse_text(&text).with_context(|| format!("wavelet file {file}"))?
        }
        WaveletFileKind::Segy => read_segy_trace(path, trace.unwrap_or(0))?,
    };
    ensure!(!w.values.is_empty(), "wavelet file {file} holds no samples");
    ensure!(
        w.values.len() <= MAX_WAVELET_SAMPLES,
        "wavelet file {file} holds {} samples, more than the {MAX_WAVELET_SAMPLES} a wavelet may have",
        w.values.len()
    );
    ensure!(
        w.interval.is_finite() && w.interval > 0.0 && w.interval <= crate::config::MAX_TIME,
        "wavelet file {file}: the sample interval {} s is not a positive time",
        w.interval
    );
    ensure!(
        w.start.is_finite() && w.start.abs() <= crate::config::MAX_TIME,
        "wavelet file {file}: the start time {} s is not a time",
        w.start
    );
    if let Some(bad) = w.values.iter().find(|v| !v.is_finite() || v.abs() > crate::config::MAX_AMPLITUDE) {
        bail!("wavelet file {file}: the sample {bad} is not a finite amplitude");
    }
    Ok(w)
}

fn read_npy(path: &Path, interval: f64) -> Result<WaveletSamples> {
    let file = path.display();
    let bytes = std::fs::read(path).with_context(|| format!("cannot read wavelet file {file}"))?;
    let (shape, start) = crate::model::npy::parse_header(&bytes, path)?;
    ensure!(shape.len() == 1, "wavelet file {file}: the .npy array has shape {shape:?}, a wavelet is 1-D");
    let data = &bytes[start..];
    ensure!(
        data.len() == shape[0] * 4,
        "wavelet file {file}: {} data bytes for {} float32 samples",
        data.len(),
        shape[0]
    );
    let values = data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect();
    Ok(WaveletSamples { values, interval, start: 0.0 })
}

/// Two columns, time and value; evenly spaced times (to 1e-6 of the interval, the rounding of
/// times printed with a few digits).
pub fn parse_text(text: &str) -> Result<WaveletSamples> {
    let mut times = Vec::new();
    let mut values = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split(|c: char| c == ',' || c.is_whitespace()).filter(|c| !c.is_empty()).collect();
        ensure!(cols.len() == 2, "line {}: {} columns, expected two (time in s, value)", i + 1, cols.len());
        let num = |c: &str| c.parse::<f64>().with_context(|| format!("line {}: `{c}` is not a number", i + 1));
        times.push(num(cols[0])?);
        values.push(num(cols[1])?);
    }
    ensure!(times.len() >= 2, "{} samples: two at least give the sample interval", times.len());
    let n = times.len();
    let interval = (times[n - 1] - times[0]) / (n - 1) as f64;
    ensure!(interval > 0.0, "the times must increase");
    for (j, &t) in times.iter().enumerate() {
        let expected = times[0] + j as f64 * interval;
        ensure!(
            (t - expected).abs() <= 1e-6 * interval,
            "the times must be evenly spaced: sample {} is at {t} s, {expected} s expected (interval {interval} s)",
            j + 1
        );
    }
    Ok(WaveletSamples { values, interval, start: times[0] })
}

fn read_segy_trace(path: &Path, trace: usize) -> Result<WaveletSamples> {
    let name = path.display();
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot read wavelet file {name}"))?;
    let len = f.metadata()?.len();
    let mut head = vec![0u8; 3600];
    f.read_exact(&mut head).with_context(|| format!("wavelet file {name}: shorter than SEG-Y's 3600-byte headers"))?;
    let be16 = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let (interval_us, samples, format) = (be16(&head, 3216), be16(&head, 3220) as usize, be16(&head, 3224));
    ensure!(
        format == 1 || format == 5,
        "wavelet file {name}: SEG-Y sample format code {format} (bytes 3225-3226); IBM (1) or IEEE (5) \
         4-byte floats, big-endian, are read"
    );
    let extended = be16(&head, 3504) as i16;
    ensure!(extended >= 0, "wavelet file {name}: a variable number of extended text headers is not read");
    let first_trace = 3600 + 3200 * extended as u64;
    ensure!(samples > 0, "wavelet file {name}: the binary header gives 0 samples per trace (bytes 3221-3222)");
    let trace_bytes = 240 + 4 * samples as u64;
    let at = first_trace + trace as u64 * trace_bytes;
    ensure!(
        at + trace_bytes <= len,
        "wavelet file {name}: trace {trace} lies past the end of the file ({} traces of {samples} samples)",
        len.saturating_sub(first_trace) / trace_bytes
    );
    let mut data = vec![0u8; trace_bytes as usize];
    f.seek(SeekFrom::Start(at))?;
    f.read_exact(&mut data)?;
    let trace_interval = be16(&data, 116);
    let interval_us = if trace_interval > 0 { trace_interval } else { interval_us };
    ensure!(interval_us > 0, "wavelet file {name}: no sample interval in the trace or binary header");
    let values = data[240..]
        .chunks_exact(4)
        .map(|c| {
            let bits = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
            // An IBM float's 24-bit fraction fits f32 exactly: the model reader's decode serves.
            if format == 1 { crate::model::segy::ibm_to_f32(bits) as f64 } else { f32::from_bits(bits) as f64 }
        })
        .collect();
    Ok(WaveletSamples { values, interval: interval_us as f64 * 1e-6, start: 0.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_gives_interval_start_and_values() {
        let w = parse_text("# t v\n0.01, 1.0\n0.012 -2.5\n\n0.014\t3e-1 # last\n").unwrap();
        assert_eq!(w.values, [1.0, -2.5, 0.3]);
        assert!((w.interval - 0.002).abs() < 1e-15 && w.start == 0.01);
        let uneven = parse_text("0 1\n0.001 2\n0.003 3\n").unwrap_err();
        assert!(format!("{uneven:#}").contains("evenly spaced"), "{uneven:#}");
        assert!(format!("{:#}", parse_text("0 1 2\n").unwrap_err()).contains("expected two"));
    }
}
