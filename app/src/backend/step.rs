//! Step mode's state machine (pure: no GL, no CUDA): one frame of `--interop map`, one step at a
//! time, and in the density view (`--view density`) the image workflow after it. The CUDA calls
//! of each step are made by the CUDA backend; the overlay's Workflow panel shows [`StepView`].
//!
//! ```text
//! state             resources                    next step           driver calls
//! Unmapped          buffers registered, GL's     map                 cuGraphicsMapResources
//! Mapped            buffers mapped, CUDA's       get pointers        cuGraphicsResourceGetMappedPointer
//! Pointers          buffers mapped, CUDA's       launch              cuLaunchKernel
//! Launched          buffers mapped, CUDA's       unmap               cuGraphicsUnmapResources
//! AwaitDraw         buffers unmapped, GL's       draw (points)       (GL) glDrawArrays
//!                                                or, density view:
//!                   images missing               register images     cuGraphicsGLRegisterImage ×2
//!                   images of another size       unregister images   cuGraphicsUnregisterResource ×2
//!                   images registered            map images          cuGraphicsMapResources
//! ImagesMapped      images mapped, CUDA's        get arrays          cuGraphicsSubResourceGetMappedArray ×2
//! Arrays            images mapped, CUDA's        make objects        cuSurfObjectCreate, cuTexObjectCreate
//! Objects           images mapped, CUDA's        splat               cuLaunchKernel (the shown VBO mapped read-only around it)
//! Splatted          images mapped, CUDA's        store               cuLaunchKernel (surface) | cuMemcpy2DAsync (copy)
//! Stored            images mapped, CUDA's        tone map            cuLaunchKernel
//! ToneMapped        images mapped, CUDA's        destroy objects     cuSurfObjectDestroy, cuTexObjectDestroy
//! ObjectsDestroyed  images mapped, CUDA's        unmap images        cuGraphicsUnmapResources
//! AwaitImageDraw    images unmapped, GL's        draw image          (GL) the full-screen pass
//! ```
//!
//! Which step follows `AwaitDraw` depends on the view and the images ([`Images`]): the state
//! machine takes it as an input, so it stays pure.

/// One step of the interop workflow in step mode (map, get pointers, launch, unmap, draw, and the
/// density view's image steps), named apart from a leapfrog step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkflowStep {
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
    /// Density view: `cuGraphicsUnregisterResource` of both images (the target's size or the
    /// density path changed; a registration names one texture's storage), then GL deletes them.
    UnregisterImages,
    /// Density view: GL makes the two textures at the target's size and
    /// `cuGraphicsGLRegisterImage` registers each (once, and again after a resize).
    RegisterImages,
    /// Density view: `cuGraphicsMapResources` of both images (one call, on the frame's stream).
    MapImages,
    /// `cuGraphicsSubResourceGetMappedArray` for each image: CUDA arrays, not pointers.
    GetArrays,
    /// `cuSurfObjectCreate` and `cuTexObjectCreate` over the arrays.
    MakeObjects,
    /// `cuLaunchKernel` of the splat: each body's mass into its pixel of a linear sum.
    Splat,
    /// The sum into the density image: a kernel through the surface object, or `cuMemcpy2DAsync`.
    Store,
    /// `cuLaunchKernel` of the tone map: the density image (texture object) into the shown
    /// image (surface object).
    ToneMap,
    /// `cuSurfObjectDestroy` and `cuTexObjectDestroy`, before the unmap.
    DestroyObjects,
    /// `cuGraphicsUnmapResources` of both images: GL gets them back.
    UnmapImages,
    /// GL draws the shown image over the target.
    DrawImage,
}

impl WorkflowStep {
    /// Label for the panel.
    pub fn label(self) -> &'static str {
        match self {
            WorkflowStep::Map => "map (cuGraphicsMapResources)",
            WorkflowStep::GetPointers => "get pointers (cuGraphicsResourceGetMappedPointer)",
            WorkflowStep::Launch => "launch (cuLaunchKernel)",
            WorkflowStep::Unmap => "unmap (cuGraphicsUnmapResources)",
            WorkflowStep::Draw => "draw (GL)",
            WorkflowStep::UnregisterImages => "unregister images (cuGraphicsUnregisterResource)",
            WorkflowStep::RegisterImages => "register images (cuGraphicsGLRegisterImage)",
            WorkflowStep::MapImages => "map images (cuGraphicsMapResources)",
            WorkflowStep::GetArrays => "get arrays (cuGraphicsSubResourceGetMappedArray)",
            WorkflowStep::MakeObjects => "make objects (cuSurfObjectCreate, cuTexObjectCreate)",
            WorkflowStep::Splat => "splat (cuLaunchKernel)",
            WorkflowStep::Store => "store (cuLaunchKernel or cuMemcpy2DAsync)",
            WorkflowStep::ToneMap => "tone map (cuLaunchKernel)",
            WorkflowStep::DestroyObjects => "destroy objects (cuSurfObjectDestroy, cuTexObjectDestroy)",
            WorkflowStep::UnmapImages => "unmap images (cuGraphicsUnmapResources)",
            WorkflowStep::DrawImage => "draw image (GL)",
        }
    }

    /// Whether the step belongs to the image workflow (the density view).
    pub fn is_image_step(self) -> bool {
        !matches!(self, WorkflowStep::Map | WorkflowStep::GetPointers | WorkflowStep::Launch | WorkflowStep::Unmap | WorkflowStep::Draw)
    }
}

/// The density view's images as the step after `AwaitDraw` needs them (the state machine's
/// input; the backend says which).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Images {
    /// The view shows points: no image workflow, the buffer is drawn.
    Off,
    /// Density view with no registered images (its first frame, or after an unregister).
    Missing,
    /// Registered at another size or for another density path: unregistered first.
    Stale,
    /// Registered at the target's size: the frame maps them.
    Ready,
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
    /// Unmapped after the launch: GL may use the buffers; the new positions are not drawn yet.
    /// Next: draw, or in the density view the image workflow ([`Images`]).
    AwaitDraw,
    /// Density view: both images mapped, no arrays taken yet. Next: get arrays.
    ImagesMapped,
    /// The images' arrays taken. Next: make objects.
    Arrays,
    /// Surface and texture objects made over the arrays. Next: splat.
    Objects,
    /// The splat launched (the sum in linear memory). Next: store.
    Splatted,
    /// The sum stored into the density image. Next: tone map.
    Stored,
    /// The shown image written. Next: destroy objects.
    ToneMapped,
    /// The objects destroyed; the images still mapped. Next: unmap images.
    ObjectsDestroyed,
    /// The images unmapped: GL may sample them; the new image is not drawn yet. Next: draw image.
    AwaitImageDraw,
}

impl StepState {
    /// The step this state waits for; `images` decides the step after `AwaitDraw`.
    pub fn next_step(self, images: Images) -> WorkflowStep {
        match self {
            StepState::Unmapped => WorkflowStep::Map,
            StepState::Mapped => WorkflowStep::GetPointers,
            StepState::Pointers => WorkflowStep::Launch,
            StepState::Launched => WorkflowStep::Unmap,
            StepState::AwaitDraw => match images {
                Images::Off => WorkflowStep::Draw,
                Images::Missing => WorkflowStep::RegisterImages,
                Images::Stale => WorkflowStep::UnregisterImages,
                Images::Ready => WorkflowStep::MapImages,
            },
            StepState::ImagesMapped => WorkflowStep::GetArrays,
            StepState::Arrays => WorkflowStep::MakeObjects,
            StepState::Objects => WorkflowStep::Splat,
            StepState::Splatted => WorkflowStep::Store,
            StepState::Stored => WorkflowStep::ToneMap,
            StepState::ToneMapped => WorkflowStep::DestroyObjects,
            StepState::ObjectsDestroyed => WorkflowStep::UnmapImages,
            StepState::AwaitImageDraw => WorkflowStep::DrawImage,
        }
    }

    /// The state after `step` (this state's [`StepState::next_step`]) succeeded. A
    /// registration or unregistration keeps the frame waiting in `AwaitDraw`.
    pub fn after(self, step: WorkflowStep) -> StepState {
        match step {
            WorkflowStep::Map => StepState::Mapped,
            WorkflowStep::GetPointers => StepState::Pointers,
            WorkflowStep::Launch => StepState::Launched,
            WorkflowStep::Unmap | WorkflowStep::UnregisterImages | WorkflowStep::RegisterImages => StepState::AwaitDraw,
            WorkflowStep::Draw | WorkflowStep::DrawImage => StepState::Unmapped,
            WorkflowStep::MapImages => StepState::ImagesMapped,
            WorkflowStep::GetArrays => StepState::Arrays,
            WorkflowStep::MakeObjects => StepState::Objects,
            WorkflowStep::Splat => StepState::Splatted,
            WorkflowStep::Store => StepState::Stored,
            WorkflowStep::ToneMap => StepState::ToneMapped,
            WorkflowStep::DestroyObjects => StepState::ObjectsDestroyed,
            WorkflowStep::UnmapImages => StepState::AwaitImageDraw,
        }
    }

    /// The state after the frame was ended early (the buffers or the images were needed
    /// elsewhere: unmapped, objects destroyed): a frame whose kernel ran waits for its draw
    /// (`AwaitDraw`; an image pass in progress is abandoned, and starts again at its map), any
    /// other goes back to `Unmapped`.
    pub fn left(self) -> StepState {
        match self {
            StepState::Mapped | StepState::Pointers => StepState::Unmapped,
            StepState::Launched => StepState::AwaitDraw,
            s if s.images_mapped() => StepState::AwaitDraw,
            s => s,
        }
    }

    /// Whether the buffers are mapped (CUDA's; GL must not touch them).
    pub fn mapped(self) -> bool {
        matches!(self, StepState::Mapped | StepState::Pointers | StepState::Launched)
    }

    /// Whether the density view's images are mapped (CUDA's; GL must not sample them).
    pub fn images_mapped(self) -> bool {
        matches!(
            self,
            StepState::ImagesMapped
                | StepState::Arrays
                | StepState::Objects
                | StepState::Splatted
                | StepState::Stored
                | StepState::ToneMapped
                | StepState::ObjectsDestroyed
        )
    }

    /// Who may touch the buffers now.
    pub fn side(self) -> Side {
        if self.mapped() {
            Side::Cuda
        } else {
            Side::Gl
        }
    }

    /// Who may touch the density view's images now.
    pub fn image_side(self) -> Side {
        if self.images_mapped() {
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
    /// The step "next step" takes ([`StepState::next_step`] with the backend's [`Images`]).
    pub next: WorkflowStep,
    /// Both buffers.
    pub buffers: Vec<BufferView>,
    /// Buffer GL may draw now (`None` while mapped: the body draw is skipped).
    pub display_front: Option<usize>,
    /// Device pointers, once taken.
    pub pointers: Option<[u64; 2]>,
    /// What the last step did (or its error).
    pub last: Option<String>,
    /// The density view's two images (empty in the points view, or before they are registered).
    pub images: Vec<ImageView>,
    /// The surface and texture objects that exist now, one line each (handle, kind, image).
    pub objects: Vec<String>,
}

/// One of the density view's images as the step-mode panel shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageView {
    /// `"density (R32F)"` or `"shown (RGBA8)"`.
    pub name: &'static str,
    /// GL texture name.
    pub gl_texture: u32,
    /// Mapped for CUDA now.
    pub mapped: bool,
    /// Who may touch it now.
    pub side: Side,
    /// The CUDA array handle, once taken (valid until the unmap).
    pub array: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The steps from `s` until the frame starts again (`Unmapped`), with `images` the view's
    /// images before each step as the backend would report them after the step before.
    fn walk(mut s: StepState, mut images: impl FnMut(WorkflowStep) -> Images) -> Vec<WorkflowStep> {
        let mut steps = Vec::new();
        let mut last = None;
        loop {
            let step = s.next_step(last.map_or(images(WorkflowStep::Map), &mut images));
            steps.push(step);
            s = s.after(step);
            last = Some(step);
            if s == StepState::Unmapped || steps.len() > 40 {
                return steps;
            }
        }
    }

    const BUFFERS: [WorkflowStep; 4] = [WorkflowStep::Map, WorkflowStep::GetPointers, WorkflowStep::Launch, WorkflowStep::Unmap];
    const IMAGE_PASS: [WorkflowStep; 9] = [
        WorkflowStep::MapImages,
        WorkflowStep::GetArrays,
        WorkflowStep::MakeObjects,
        WorkflowStep::Splat,
        WorkflowStep::Store,
        WorkflowStep::ToneMap,
        WorkflowStep::DestroyObjects,
        WorkflowStep::UnmapImages,
        WorkflowStep::DrawImage,
    ];

    #[test]
    fn the_state_machine_walks_one_frame_in_order() {
        let steps = walk(StepState::Unmapped, |_| Images::Off);
        assert_eq!(steps, [WorkflowStep::Map, WorkflowStep::GetPointers, WorkflowStep::Launch, WorkflowStep::Unmap, WorkflowStep::Draw]);
        assert!(steps.iter().all(|s| !s.is_image_step()));
    }

    #[test]
    fn the_density_view_walks_the_image_workflow_after_the_buffers() {
        // Images registered: the buffers' steps, then the image pass, which ends with its draw.
        let steps = walk(StepState::Unmapped, |_| Images::Ready);
        assert_eq!(steps[..4], BUFFERS);
        assert_eq!(steps[4..], IMAGE_PASS);
        assert!(steps[4..].iter().all(|s| s.is_image_step()));
        // The first density frame registers the images first (the backend then reports them ready).
        let steps = walk(StepState::Unmapped, |last| if last == WorkflowStep::RegisterImages { Images::Ready } else { Images::Missing });
        assert_eq!(steps[4], WorkflowStep::RegisterImages);
        assert_eq!(steps[5..], IMAGE_PASS);
        // A resize: unregister, register again, then the pass.
        let steps = walk(StepState::AwaitDraw, |last| match last {
            WorkflowStep::UnregisterImages => Images::Missing,
            WorkflowStep::RegisterImages | WorkflowStep::MapImages => Images::Ready,
            _ => Images::Stale,
        });
        assert_eq!(steps[..2], [WorkflowStep::UnregisterImages, WorkflowStep::RegisterImages]);
        assert_eq!(steps[2..], IMAGE_PASS);
    }

    #[test]
    fn images_are_mapped_exactly_between_their_map_and_unmap() {
        let mut s = StepState::AwaitDraw;
        for step in IMAGE_PASS.iter().copied() {
            assert_eq!(s.next_step(Images::Ready), step);
            let before = s;
            s = s.after(step);
            let want = !matches!(step, WorkflowStep::UnmapImages | WorkflowStep::DrawImage);
            assert_eq!(s.images_mapped(), want, "after {step:?} (from {before:?})");
            assert_eq!(s.image_side(), if want { Side::Cuda } else { Side::Gl });
            assert!(!s.mapped(), "the buffers are GL's during the image pass");
        }
        assert_eq!(s, StepState::Unmapped);
    }

    #[test]
    fn leaving_early_unmaps_and_keeps_a_finished_kernel_for_its_draw() {
        assert_eq!(StepState::Mapped.left(), StepState::Unmapped);
        assert_eq!(StepState::Pointers.left(), StepState::Unmapped);
        assert_eq!(StepState::Launched.left(), StepState::AwaitDraw);
        for s in [StepState::ImagesMapped, StepState::Objects, StepState::ToneMapped, StepState::ObjectsDestroyed] {
            assert_eq!(s.left(), StepState::AwaitDraw, "{s:?}: the image pass starts again at its map");
        }
        for s in [StepState::Unmapped, StepState::AwaitDraw, StepState::AwaitImageDraw] {
            assert_eq!(s.left(), s, "{s:?} holds no mapping");
        }
    }

    #[test]
    fn only_mapped_states_belong_to_cuda() {
        for (s, side) in [
            (StepState::Unmapped, Side::Gl),
            (StepState::Mapped, Side::Cuda),
            (StepState::Pointers, Side::Cuda),
            (StepState::Launched, Side::Cuda),
            (StepState::AwaitDraw, Side::Gl),
            (StepState::Splatted, Side::Gl),
        ] {
            assert_eq!(s.side(), side, "{s:?}");
        }
    }
}
