// A MappedArray borrows its Mapping: using it after the unmap does not compile.
use cuda_gl_interop::{map_resources, GraphicsResource, Stream};

fn frame(resources: &mut [GraphicsResource], stream: &Stream) -> cuda_gl_interop::Result<(usize, usize)> {
    let mapping = map_resources(resources, stream)?;
    let array = mapping.array(0, 0, 0)?;
    mapping.unmap()?;
    Ok(array.size())
}

fn main() {
    let _ = frame;
}
