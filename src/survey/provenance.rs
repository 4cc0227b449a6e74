//! A survey shot's provenance: one digest of everything that determines its result file, stored in
//! the file (root attribute `provenance`), so that `--resume` keeps a shot only where the file was
//! computed from the same input, model and numerics as the shot now would be.
//!
//! The digest is the SHA-256 of: [`NUMERICS_VERSION`]; the SHA-256 of the data files (a
//! `kind = "file"` model's file as read, or a named data set's known digest, a density file, and
//! the sources' wavelet files); and the shot's configuration as parsed (the command line's overrides
//! applied), less what does not change the result file: the output path, `plot` and `segy` (files beside it), and how a decomposed run
//! moves its halos (a decomposed shot equals the whole one bit for bit).

use crate::config::{Config, DensityConfig, ModelConfig, WaveletConfig};
use anyhow::{Context, Result};
use std::path::Path;

/// The version of the program's numerics: bumped, here and only here, by every change that makes
/// a result file differ for the same input (the stencil, time step, boundary, source or receiver
/// interpolation, what the file stores). A survey shot computed by a binary of another numerics
/// version is not kept by `--resume`.
pub const NUMERICS_VERSION: u32 = 2;

/// The SHA-256 (hex) of the data files `cfg` reads: its model (a `kind = "file"` model's file as
/// read, a named data set's known digest), its density file and its sources' wavelet files; None
/// for a run given by numbers alone. Each file is read whole (once per survey).
pub fn data_digest(cfg: &Config, input_dir: &Path) -> Result<Option<String>> {
    let file_digest = |path: &Path, what: &str| -> Result<String> {
        let mut f = std::fs::File::open(path).with_context(|| format!("{what} {}: cannot open it", path.display()))?;
        crate::model::file::sha256_of(&mut f).with_context(|| format!("{what} {}: cannot read it", path.display()))
    };
    let model = match &cfg.model.velocity {
        ModelConfig::Constant { .. } | ModelConfig::Layered { .. } => None,
        ModelConfig::File { path, .. } => Some(file_digest(&input_dir.join(path), "model file")?),
        // A named data set is checked against its known digest when it is read.
        ModelConfig::Marmousi { .. } => Some(crate::model::descriptor("marmousi")?.sha256),
    };
    let mut wavelets = Vec::new();
    for s in cfg.source.iter() {
        if let WaveletConfig::File(w) = &s.wavelet {
            wavelets.push(file_digest(&input_dir.join(&w.file), "wavelet file")?);
        }
    }
    let density = match &cfg.model.density {
        Some(DensityConfig::File { path, .. }) => Some(file_digest(&input_dir.join(path), "density file")?),
        _ => None,
    };
    if wavelets.is_empty() && density.is_none() {
        return Ok(model);
    }
    let mut text = format!("model {}\nwavelets {}\n", model.as_deref().unwrap_or("none"), wavelets.join(" "));
    if let Some(density) = density {
        text += &format!("density {density}\n");
    }
    Ok(Some(crate::model::file::sha256_hex(text.as_bytes())))
}

/// The digest (hex SHA-256) of a shot's configuration `cfg` (the survey's input made that shot's,
/// overrides applied) over the model whose digest is `model`.
pub fn digest(cfg: &Config, model: Option<&str>) -> String {
    let mut c = cfg.clone();
    c.output.path = Default::default();
    (c.output.plot, c.output.segy) = (false, false);
    c.survey = None;
    (c.run.decomposition, c.run.halo_exchange, c.run.halo_overlap) = (None, Default::default(), Default::default());
    // The configuration's Debug form names every field and value (floats exactly, in the
    // shortest form that reads back the same): equal configurations, equal text.
    let text = format!("numerics {NUMERICS_VERSION}\nmodel {}\n{c:#?}\n", model.unwrap_or("none"));
    crate::model::file::sha256_hex(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const INPUT: &str = "[grid]\nshape = [20, 10, 12]\nspacing = [10.0, 10.0, 10.0]\n[model]\nkind = \"constant\"\n\
                         vp = 2000.0\n[time]\nsteps = 5\n[source]\nposition = [50.0, 40.0, 30.0]\nfrequency = 10.0\n";

    fn digest_of(extra: &str) -> String {
        digest(&Config::from_toml(&format!("{INPUT}{extra}")).unwrap(), None)
    }

    #[test]
    fn what_changes_the_result_changes_the_digest_and_nothing_else() {
        let base = digest_of("");
        assert_eq!(base.len(), 64);
        assert_eq!(base, digest_of(""), "the same input, the same digest");
        assert_eq!(base, digest_of("[output]\npath = \"elsewhere.h5\"\nsegy = true\nplot = true\n"));
        let c = Config::from_toml(INPUT).unwrap();
        assert_ne!(digest(&c, None), digest(&c, Some("ab")), "the model data");
        for changed in [
            INPUT.replace("frequency = 10.0", "frequency = 12.0"),
            INPUT.replace("vp = 2000.0", "vp = 2100.0"),
            INPUT.replace("steps = 5", "steps = 6"),
            format!("{INPUT}[boundary]\nfree_surface = true\n"),
            format!("{INPUT}[output]\nsnapshot_every = 2\n"),
        ] {
            assert_ne!(base, digest(&Config::from_toml(&changed).unwrap(), None), "{changed}");
        }
    }
}
