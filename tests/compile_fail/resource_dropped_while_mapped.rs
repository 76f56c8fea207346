// A Mapping borrows its resources mutably: they cannot be unregistered (dropped) while mapped.
use cuda_gl_interop::{map_resources, GraphicsResource, Stream};

fn frame(mut resources: Vec<GraphicsResource>, stream: &Stream) -> cuda_gl_interop::Result<()> {
    let mapping = map_resources(&mut resources, stream)?;
    drop(resources);
    mapping.unmap()
}

fn main() {
    let _ = frame;
}
