//! `[source]` (or `[[source]]`, several sources a shot) and `[[receivers]]`: the wavelets, where
//! the sources and receivers are and how positions between grid points are tied to them.

use super::values::*;
use anyhow::{Context, Result};
use serde::Deserialize;

/// One source: `[source]`, or one entry of `[[source]]`.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Metres, in the grid's coordinates (origin included).
    #[serde(deserialize_with = "point")]
    pub position: [f64; 3],
    /// The time function: "ricker" (default) or a file.
    #[serde(default)]
    pub wavelet: WaveletConfig,
    /// Ricker peak frequency, Hz (required with the Ricker wavelet, refused with a file).
    pub frequency: Option<f64>,
    #[serde(default = "one")]
    pub amplitude: f64,
    /// Ricker: time of the wavelet's peak, s (default 1 / frequency); a file: time shift of its
    /// samples, s (default 0).
    pub delay: Option<f64>,
    /// How the point source is spread over grid points: "sinc" (default), "trilinear" or "nearest".
    #[serde(default)]
    pub injection: Injection,
    /// Half-width r of the windowed sinc (2r points per axis); only with injection = "sinc".
    pub sinc_half_width: Option<usize>,
}

/// `wavelet = "ricker"` or `wavelet = { file = "w.npy", sample_interval = 0.001 }`,
/// `{ file = "w.txt" }`, `{ file = "w.sgy", trace = 0 }`.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum WaveletConfig {
    #[default]
    Ricker,
    File(WaveletFileConfig),
}

/// A wavelet read from a file (see `numerics::wavelet_file` for the kinds).
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WaveletFileConfig {
    /// Relative to the input file's directory.
    pub file: std::path::PathBuf,
    /// SEG-Y: the trace, 0-based (default 0).
    pub trace: Option<usize>,
    /// `.npy`: the interval of its samples, s.
    pub sample_interval: Option<f64>,
}

impl<'de> Deserialize<'de> for WaveletConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = WaveletConfig;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"ricker\" or a table such as { file = \"wavelet.npy\", sample_interval = 0.001 }")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<WaveletConfig, E> {
                match v {
                    "ricker" => Ok(WaveletConfig::Ricker),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> std::result::Result<WaveletConfig, A::Error> {
                WaveletFileConfig::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(WaveletConfig::File)
            }
        }
        // As a struct: a table gives the file's keys; a string reaches visit_str.
        d.deserialize_struct("WaveletFileConfig", &["file", "trace", "sample_interval"], V)
    }
}

/// The shot's sources: `[source]` (one) or `[[source]]` (any number, at least one).
#[derive(Debug, Clone)]
pub struct Sources(Vec<SourceConfig>);

impl Sources {
    /// The first source: the one a survey moves to each shot's position.
    pub fn first(&self) -> &SourceConfig {
        &self.0[0]
    }

    pub fn iter(&self) -> std::slice::Iter<'_, SourceConfig> {
        self.0.iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, SourceConfig> {
        self.0.iter_mut()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never: parsing refuses an empty `source` list.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The key of source `i` in messages: `source` for a lone `[source]`, `source[i]` in a list.
    pub fn key(&self, i: usize) -> String {
        if self.0.len() == 1 { "source".to_string() } else { format!("source[{i}]") }
    }

    /// Wavelet files given relative to `dir` (the input file's directory) made relative to the
    /// working directory.
    pub fn resolve_files(&mut self, dir: &std::path::Path) {
        for s in &mut self.0 {
            if let WaveletConfig::File(f) = &mut s.wavelet {
                f.file = dir.join(&f.file);
            }
        }
    }
}

impl From<Vec<SourceConfig>> for Sources {
    /// `sources` must not be empty.
    fn from(sources: Vec<SourceConfig>) -> Sources {
        assert!(!sources.is_empty(), "a shot has at least one source");
        Sources(sources)
    }
}

impl<'de> Deserialize<'de> for Sources {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Sources;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a [source] table or a list of [[source]] tables")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> std::result::Result<Sources, A::Error> {
                SourceConfig::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(|s| Sources(vec![s]))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> std::result::Result<Sources, A::Error> {
                let list = Vec::<SourceConfig>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
                if list.is_empty() {
                    return Err(serde::de::Error::invalid_length(0, &"at least one [[source]]"));
                }
                Ok(Sources(list))
            }
        }
        // As a list: a table reaches visit_map, an array of tables visit_seq.
        d.deserialize_seq(V)
    }
}

impl Sources {
    /// Every source's numbers finite and in range, and its wavelet's keys consistent: a Ricker
    /// has a frequency, whose default delay (1 / frequency) must be a time in range too (a
    /// vanishing frequency would otherwise inject a constant); a file wavelet has none.
    pub fn check_values(&self) -> Result<()> {
        for (i, s) in self.iter().enumerate() {
            let key = self.key(i);
            finite3(&format!("{key}.position"), s.position, -MAX_LENGTH, MAX_LENGTH, "a coordinate in m")?;
            finite_in(&format!("{key}.amplitude"), s.amplitude, -MAX_AMPLITUDE, MAX_AMPLITUDE, "an amplitude")?;
            if let Some(d) = s.delay {
                finite_in(&format!("{key}.delay"), d, -MAX_TIME, MAX_TIME, "a time in s")?;
            }
            match (&s.wavelet, s.frequency) {
                (WaveletConfig::Ricker, None) => {
                    anyhow::bail!("{key}.frequency is required with the Ricker wavelet (the peak frequency, Hz)")
                }
                (WaveletConfig::Ricker, Some(f)) => {
                    finite_in(
                        &format!("{key}.frequency"),
                        f,
                        f64::MIN_POSITIVE,
                        MAX_FREQUENCY,
                        "a positive frequency in Hz",
                    )?;
                    anyhow::ensure!(
                        s.delay.is_some() || 1.0 / f <= MAX_TIME,
                        "{key}.frequency = {f:e} Hz: its default delay 1 / frequency = {:e} s is past the longest \
                         time, {MAX_TIME:e} s (the run would inject a constant); give {key}.delay or a frequency of \
                         at least {:e} Hz",
                        1.0 / f,
                        1.0 / MAX_TIME
                    );
                }
                (WaveletConfig::File(w), f) => {
                    anyhow::ensure!(
                        f.is_none(),
                        "{key}.frequency applies to the Ricker wavelet only; a wavelet file {} gives its own spectrum",
                        w.file.display()
                    );
                    if let Some(h) = w.sample_interval {
                        finite_in(
                            &format!("{key}.wavelet.sample_interval"),
                            h,
                            f64::MIN_POSITIVE,
                            MAX_TIME,
                            "a positive time in s",
                        )?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// When `text` gives both `[source]` and `[[source]]` (TOML refuses that with a message about a
/// duplicate key), an error that says so.
pub(super) fn source_forms_mixed(text: &str) -> Option<toml::de::Error> {
    let header = |l: &str| l.split('#').next().unwrap_or("").split_whitespace().collect::<String>();
    let table = text.lines().any(|l| header(l) == "[source]");
    let list = text.lines().any(|l| header(l) == "[[source]]");
    (table && list).then(|| {
        serde::de::Error::custom(
            "the input gives both [source] (one source) and [[source]] (a list of sources): write every source \
             as a [[source]] entry",
        )
    })
}

fn one() -> f64 {
    1.0
}

/// How a position between grid points is tied to them: a source's spread, a receiver's
/// interpolation (see `problem::Positioning`).
#[derive(Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Injection {
    Nearest,
    Trilinear,
    /// Kaiser-windowed sinc (Hicks 2002).
    #[default]
    Sinc,
}

/// One `[[receivers]]` entry: exactly one of `position`, `line` or `grid`.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct ReceiverConfig {
    #[serde(default, deserialize_with = "point_opt")]
    pub position: Option<[f64; 3]>,
    pub line: Option<LineConfig>,
    pub grid: Option<ReceiverGridConfig>,
    /// How the pressure is read between grid points: "sinc" (default), "trilinear" or "nearest".
    #[serde(default)]
    pub interpolation: Injection,
    /// Half-width r of the windowed sinc (2r points per axis); only with interpolation = "sinc".
    pub sinc_half_width: Option<usize>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct LineConfig {
    #[serde(deserialize_with = "point")]
    pub start: [f64; 3],
    #[serde(deserialize_with = "point")]
    pub end: [f64; 3],
    pub count: usize,
}

/// A regular 2D or 3D grid of receivers: `origin + i*step_a + j*step_b (+ k*step_c)`.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ReceiverGridConfig {
    #[serde(deserialize_with = "point")]
    pub origin: [f64; 3],
    #[serde(deserialize_with = "point")]
    pub step_a: [f64; 3],
    pub count_a: usize,
    #[serde(deserialize_with = "point")]
    pub step_b: [f64; 3],
    pub count_b: usize,
    #[serde(default, deserialize_with = "point")]
    pub step_c: [f64; 3],
    #[serde(default = "one_usize")]
    pub count_c: usize,
}

fn one_usize() -> usize {
    1
}

impl ReceiverConfig {
    /// Receivers this entry gives, with checked arithmetic (a line or grid of absurd counts is an
    /// error here, before anything is allocated for it).
    pub fn count(&self) -> Result<usize> {
        if let Some(l) = &self.line {
            return Ok(l.count);
        }
        if let Some(g) = &self.grid {
            return g.count_a.checked_mul(g.count_b).and_then(|n| n.checked_mul(g.count_c)).with_context(|| {
                format!("receivers grid counts {} x {} x {} overflow", g.count_a, g.count_b, g.count_c)
            });
        }
        Ok(self.position.is_some() as usize)
    }
}
