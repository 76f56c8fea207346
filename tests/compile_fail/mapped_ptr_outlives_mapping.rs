// A MappedPtr borrows its Mapping: using it after the unmap does not compile.
use cuda_gl_interop::{map_resources, GraphicsResource, Stream};

fn frame(resources: &mut [GraphicsResource], stream: &Stream) -> cuda_gl_interop::Result<u64> {
    let mapping = map_resources(resources, stream)?;
    let ptr = mapping.pointer(0)?;
    mapping.unmap()?;
    Ok(ptr.device_ptr())
}

fn main() {
    let _ = frame;
}
