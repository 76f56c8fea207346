// A SurfaceObject borrows the MappedArray it was made over, which borrows the Mapping: a surface
// kept past the unmap does not compile.
use cuda_gl_interop::{map_resources, GraphicsResource, Stream, SurfaceObject};

fn frame(resources: &mut [GraphicsResource], stream: &Stream) -> cuda_gl_interop::Result<u64> {
    let mapping = map_resources(resources, stream)?;
    let array = mapping.array(0, 0, 0)?;
    let surface = SurfaceObject::new(&array)?;
    mapping.unmap()?;
    Ok(surface.handle())
}

fn main() {
    let _ = frame;
}
