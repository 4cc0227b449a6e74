//! The graph-capture gate ([`GraphCapture`]): where the runtime captures graphs (CUDA), a run's
//! steps go to the device 32 at a time (4 after a host wait) as one graph launch. Every other use
//! of the stream (a snapshot, a copy, a blow-up check, a timing) passes through
//! [`GraphCapture::end`] first, which launches the steps captured so far.

use super::GpuRuntime;
use anyhow::{Context, Result};

/// Steps in one graph launch: a launch's few microseconds of host work and the graph's update
/// are spread over this many steps, and a snapshot, a blow-up check or the end of the run launches
/// the steps captured so far.
const GRAPH_STEPS: usize = 32;

/// Steps in the first graph launch after any other use of the stream (a snapshot's download, a
/// blow-up check): the device, idle after such a wait, starts on these while the host captures
/// the next [`GRAPH_STEPS`].
const FIRST_GRAPH_STEPS: usize = 4;

/// Executable graphs kept, one per chunk length (the chunk before a snapshot is shorter than the
/// others, the first after it shorter still): each is updated in place from one chunk of its
/// length to the next instead of being instantiated again.
const GRAPH_SLOTS: usize = 4;

/// Steps in each graph launch for `requested` (0 where the runtime cannot capture, or where a
/// launch would hold at most one step: every kernel is then launched on its own).
fn graph_chunk(requested: usize, captures: bool) -> usize {
    if captures && requested > 1 { requested } else { 0 }
}

/// The steps being captured and the executable graphs they go through.
pub(super) struct GraphCapture<G> {
    /// Steps a graph launch holds (0: none, each kernel launched on its own).
    steps: usize,
    /// Steps of the capture in progress (its launch comes at `chunk`, or at [`Self::end`]).
    captured: usize,
    /// Steps the capture in progress will hold: `steps`, or fewer after a host wait.
    chunk: usize,
    /// The executable graphs by chunk length, most recent last.
    graphs: Vec<(usize, Option<G>)>,
}

impl<G> GraphCapture<G> {
    /// [`GRAPH_STEPS`] a launch where the runtime `captures`, else none.
    pub fn new(captures: bool) -> Self {
        let steps = graph_chunk(GRAPH_STEPS, captures);
        GraphCapture {
            steps,
            captured: 0,
            chunk: FIRST_GRAPH_STEPS.min(steps),
            graphs: Vec::with_capacity(GRAPH_SLOTS),
        }
    }

    /// Steps in each graph launch (0: none).
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Captures `steps` steps into each graph launch (0 or 1: none), where `rt` can capture; the
    /// steps captured so far are launched first.
    pub fn set_steps<Rt: GpuRuntime<Graph = G>>(&mut self, rt: &Rt, steps: usize) -> Result<()> {
        self.end(rt)?;
        self.steps = graph_chunk(steps, rt.captures());
        self.chunk = FIRST_GRAPH_STEPS.min(self.steps);
        Ok(())
    }

    /// The gate: launches the steps captured so far (none: nothing to do). Every use of the
    /// stream other than a step's comes after this.
    pub fn end<Rt: GpuRuntime<Graph = G>>(&mut self, rt: &Rt) -> Result<()> {
        // Whatever comes next may wait on the device: the next capture starts short.
        self.chunk = FIRST_GRAPH_STEPS.min(self.steps);
        self.launch(rt)
    }

    /// Before a step's work is queued: starts a capture where none is in progress.
    pub fn begin_step<Rt: GpuRuntime<Graph = G>>(&mut self, rt: &Rt) -> Result<()> {
        if self.steps > 0 && self.captured == 0 {
            rt.begin_capture()?;
        }
        Ok(())
    }

    /// After a step's work was queued (`queued`): counts it into the capture and launches the
    /// capture once it holds its chunk; on an error, ends the capture.
    pub fn end_step<Rt: GpuRuntime<Graph = G>>(&mut self, rt: &Rt, queued: Result<()>) -> Result<()> {
        if self.steps == 0 {
            return queued;
        }
        self.captured += 1;
        if let Err(e) = queued {
            let _ = self.end(rt);
            return Err(e);
        }
        if self.captured == self.chunk {
            self.chunk = self.steps;
            self.launch(rt)
        } else {
            Ok(())
        }
    }

    /// Launches the steps captured so far through the executable graph of their count.
    fn launch<Rt: GpuRuntime<Graph = G>>(&mut self, rt: &Rt) -> Result<()> {
        let steps = std::mem::take(&mut self.captured);
        if steps == 0 {
            return Ok(());
        }
        let slot = match self.graphs.iter().position(|(n, _)| *n == steps) {
            Some(i) => i,
            None => {
                if self.graphs.len() == GRAPH_SLOTS {
                    self.graphs.remove(0);
                }
                self.graphs.push((steps, None));
                self.graphs.len() - 1
            }
        };
        let (_, graph) = &mut self.graphs[slot];
        let launched = rt.launch_capture(graph).context("the steps' graph launch");
        let used = self.graphs.remove(slot);
        self.graphs.push(used);
        launched
    }
}
