//! Step mode's state machine (pure: no GL, no CUDA): one frame of `--interop map`, one step at a
//! time. The CUDA calls of each step are made by the CUDA backend; the overlay's Workflow panel
//! shows [`StepView`].
//!
//! ```text
//! state        buffers                     next step        driver call
//! Unmapped     registered, GL may use      map              cuGraphicsMapResources
//! Mapped       mapped, CUDA only           get pointers     cuGraphicsResourceGetMappedPointer
//! Pointers     mapped, CUDA only           launch           cuLaunchKernel
//! Launched     mapped, CUDA only           unmap            cuGraphicsUnmapResources
//! AwaitDraw    unmapped, GL may use        draw             (GL) glDrawArrays
//! ```

/// A step of one frame in step mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameStep {
    /// `cuGraphicsMapResources`: CUDA takes both buffers.
    Map,
    /// `cuGraphicsResourceGetMappedPointer` for each buffer.
    GetPointers,
    /// `cuLaunchKernel`: reads one buffer, writes the other.
    Launch,
    /// `cuGraphicsUnmapResources`: GL gets the buffers back.
    Unmap,
    /// GL draws the buffer the kernel wrote.
    Draw,
}

impl FrameStep {
    /// Label for the panel.
    pub fn label(self) -> &'static str {
        match self {
            FrameStep::Map => "map (cuGraphicsMapResources)",
            FrameStep::GetPointers => "get pointers (cuGraphicsResourceGetMappedPointer)",
            FrameStep::Launch => "launch (cuLaunchKernel)",
            FrameStep::Unmap => "unmap (cuGraphicsUnmapResources)",
            FrameStep::Draw => "draw (GL)",
        }
    }
}

/// Where a step-mode frame stands (the state machine's states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepState {
    /// Registered and unmapped: GL may use both buffers. Next: map.
    Unmapped,
    /// Mapped on the frame's stream; no device pointers taken yet. Next: get pointers.
    Mapped,
    /// Mapped, with the device pointers. Next: launch.
    Pointers,
    /// The kernel was launched into the mapped buffers. Next: unmap.
    Launched,
    /// Unmapped after the launch: GL may use the buffers; the new positions are not drawn yet. Next: draw.
    AwaitDraw,
}

impl StepState {
    /// The step this state waits for.
    pub fn next_step(self) -> FrameStep {
        match self {
            StepState::Unmapped => FrameStep::Map,
            StepState::Mapped => FrameStep::GetPointers,
            StepState::Pointers => FrameStep::Launch,
            StepState::Launched => FrameStep::Unmap,
            StepState::AwaitDraw => FrameStep::Draw,
        }
    }

    /// The state after the next step succeeded.
    pub fn after(self) -> StepState {
        match self {
            StepState::Unmapped => StepState::Mapped,
            StepState::Mapped => StepState::Pointers,
            StepState::Pointers => StepState::Launched,
            StepState::Launched => StepState::AwaitDraw,
            StepState::AwaitDraw => StepState::Unmapped,
        }
    }

    /// Whether the buffers are mapped (CUDA's; GL must not touch them).
    pub fn mapped(self) -> bool {
        matches!(self, StepState::Mapped | StepState::Pointers | StepState::Launched)
    }

    /// Who may touch the buffers now.
    pub fn side(self) -> Side {
        if self.mapped() {
            Side::Cuda
        } else {
            Side::Gl
        }
    }
}

/// Which API may touch a buffer now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Mapped: only CUDA (through the mapped device pointer).
    Cuda,
    /// Unmapped: only GL.
    Gl,
}

/// One buffer as the step-mode panel shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferView {
    /// Index 0/1 of the position buffer.
    pub index: usize,
    /// GL buffer name.
    pub gl_buffer: u32,
    /// Registered with CUDA.
    pub registered: bool,
    /// Mapped for CUDA now.
    pub mapped: bool,
    /// Who may touch it now.
    pub side: Side,
    /// Its role this frame ("CUDA reads", "CUDA writes", "GL draws").
    pub role: String,
}

/// What the step-mode panel shows, made by the CUDA backend.
#[derive(Debug, Clone, PartialEq)]
pub struct StepView {
    /// State of the frame.
    pub state: StepState,
    /// Both buffers.
    pub buffers: Vec<BufferView>,
    /// Buffer GL may draw now (`None` while mapped: the body draw is skipped).
    pub display_front: Option<usize>,
    /// Device pointers, once taken.
    pub pointers: Option<[u64; 2]>,
    /// What the last step did (or its error).
    pub last: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_machine_walks_one_frame_in_order() {
        let mut s = StepState::Unmapped;
        let mut steps = Vec::new();
        for _ in 0..5 {
            steps.push(s.next_step());
            s = s.after();
        }
        assert_eq!(steps, [FrameStep::Map, FrameStep::GetPointers, FrameStep::Launch, FrameStep::Unmap, FrameStep::Draw]);
        assert_eq!(s, StepState::Unmapped, "after draw the next frame starts");
    }

    #[test]
    fn only_mapped_states_belong_to_cuda() {
        for (s, side) in [
            (StepState::Unmapped, Side::Gl),
            (StepState::Mapped, Side::Cuda),
            (StepState::Pointers, Side::Cuda),
            (StepState::Launched, Side::Cuda),
            (StepState::AwaitDraw, Side::Gl),
        ] {
            assert_eq!(s.side(), side, "{s:?}");
        }
    }
}
