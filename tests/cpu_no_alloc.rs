//! The CPU time step allocates nothing: a counting global allocator watches `advance` for every
//! boundary kind, after a short warm-up (rayon's worker queues grow on first use).

mod common;

use common::Setup;
use seismic_run::backend::cpu::CpuSolver;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn time_step_does_not_allocate() {
    for (boundary, free_surface) in [("none", false), ("sponge", false), ("cpml", false), ("cpml", true)] {
        let setup = Setup {
            shape: [48, 40, 44],
            spacing: 10.0,
            vp: 2000.0,
            radius: 4,
            frequency: 10.0,
            delay: 0.1,
            cfl_safety: 0.8,
            duration: 0.2,
            source: [20, 20, 10],
            receivers: vec![[30, 20, 5], [10, 10, 10]],
            boundary,
            width: 8,
            free_surface,
        };
        let p = setup.problem();
        let mut solver = CpuSolver::<f32>::new(&p).expect("solver");
        let warm = 10;
        // Measured inside the pool: a call from outside it goes through rayon's injector queue,
        // which allocates a block every few dozen calls (rayon's doing, not the step's; a time
        // loop run under `ThreadPool::install` or `rayon::scope` avoids it). Inside it, the
        // work-stealing machinery still allocates once in a while (2 allocations in 101 steps, once,
        // on CI's 2 cores), so the steps are counted in three windows and one must be clean: a step
        // that allocated would show in every window.
        let counts = rayon::scope(|_| {
            for n in 0..warm {
                solver.advance(n);
            }
            let windows = 3;
            let per = (p.steps - warm) / windows;
            (0..windows)
                .map(|k| {
                    let before = ALLOCATIONS.load(Ordering::Relaxed);
                    for n in warm + k * per..warm + (k + 1) * per {
                        solver.advance(n);
                    }
                    ALLOCATIONS.load(Ordering::Relaxed) - before
                })
                .collect::<Vec<_>>()
        });
        eprintln!(
            "no-alloc: {boundary} (free surface {free_surface}): {counts:?} allocations in three windows of {} steps",
            (p.steps - warm) / 3
        );
        assert!(p.steps - warm >= 30, "too few steps to measure");
        assert_eq!(counts.iter().min(), Some(&0), "{boundary}: the time step allocated in every window");
    }
}
