//! A single run: the model loaded, the problem built and the backend opened in this process, the
//! time loop run into the result file, the derived files written from it (renamed into place
//! together with it), and the summary.

use super::{Job, SNAPSHOT_BUFFERS, report, signals};
use crate::backend::registry;
use crate::output::derived::{self, Derived};
use crate::output::hdf5::{Hdf5Writer, Volumes};
use crate::output::plan::OutputPlan;
use crate::output::progress::Progress;
use crate::problem::Problem;
use crate::resources;
use crate::solver::{self, RunResult, StepStats};
use anyhow::Context;

pub fn run(job: &Job, derived: &[Derived]) -> RunResult<()> {
    let (cfg, out_path) = (&job.cfg, &job.output);
    let model = crate::model::load_model(cfg, &job.input_dir).context("model")?;
    let problem = Problem::build_with_density(cfg, model.vp, model.rho)?;
    let model_ready = job.started.elapsed();
    for w in &problem.warnings {
        eprintln!("warning: {w}");
    }
    let plan = OutputPlan::from_config(cfg, &problem)?;
    let file_bytes = resources::output_file_bytes(&problem, &plan, job.text.len());
    if let Some(w) = resources::check_output_space(out_path, job.output_key, file_bytes)? {
        eprintln!("warning: {w}");
    }
    let mut backend = registry::open(&problem, cfg.run.backend, cfg.run.kernel, 0, &mut |n| {
        eprintln!("notice: {n}");
    })?;
    let backend_ready = job.started.elapsed();
    let device = backend.info();
    if !job.quiet {
        report::print_header(&job.input, &problem, &plan, &device, out_path, file_bytes);
        report::print_smoothing(&job.cfg);
    }

    signals::install_handlers(false)?;
    let meta = super::metadata(&job.text, device, cfg);
    let mut bar = Progress::new(problem.steps, problem.layout.points(), job.quiet);
    let (record, stats, commit) = std::thread::scope(|scope| -> RunResult<_> {
        let mut writer = Hdf5Writer::start(scope, out_path, &problem, &plan, meta, SNAPSHOT_BUFFERS, Volumes::Whole)?;
        let record = solver::run(&problem, backend.as_mut(), &plan, &mut writer, &mut |done| bar.update(done));
        bar.finish();
        let record = record?;
        let stats = StepStats::of(&problem, &record);
        let commit = writer.finish_unsynced(record.clone(), stats.clone())?;
        Ok((record, stats, commit))
    })?;

    // The derived files are made from the finished result file, as `seismic-run export` makes
    // them, and renamed into place with it; a failed derived file leaves the result in place
    // (exit status 1).
    let (written, derived) = derived::commit_with(commit, derived)?;
    if !job.quiet {
        println!(
            "done: {} steps in {:.2} s wall ({:.2} s in steps)",
            problem.steps,
            record.wall_seconds,
            stats.seconds.iter().sum::<f64>()
        );
        println!("  effective bandwidth  mean {:.2} GB/s, median {:.2} GB/s", stats.mean_gbps, stats.median_gbps);
        if problem.full_step_bytes() != problem.step_bytes() {
            println!(
                "  full-step bandwidth  mean {:.2} GB/s, median {:.2} GB/s (interior and CPML memory variables)",
                stats.mean_full_step_gbps, stats.median_full_step_gbps
            );
        }
        println!("  throughput           mean {:.4} GPts/s, median {:.4} GPts/s", stats.mean_gpts, stats.median_gpts);
        let (model_s, total_s) = (model_ready.as_secs_f64(), job.started.elapsed().as_secs_f64());
        println!(
            "  whole run            {total_s:.2} s: model {model_s:.2} s, backend set-up {:.2} s, time loop {:.2} s, \
             files {:.2} s",
            backend_ready.as_secs_f64() - model_s,
            record.wall_seconds,
            total_s - backend_ready.as_secs_f64() - record.wall_seconds,
        );
        println!("  wrote {}", written.path.display());
        for p in &derived {
            println!("  wrote {}", p.display());
        }
    }
    Ok(())
}
