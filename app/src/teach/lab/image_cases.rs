//! The image workflow's part of the lab's table ([`super::CASES`] lists these after the others, in
//! this order): textures registered with `cuGraphicsGLRegisterImage`, their arrays, surfaces and
//! map flags, a texture deleted while registered, the interop calls with no GL context current,
//! a read under `WRITE_DISCARD`, and what registering every frame costs.

use interop::sys::CuResult;

use super::{Case, Data, Expect, Needs};

/// What the `*-no-gl-context` cases accept: the reference states the rule but no code, so a
/// refusal, an acceptance or a crash.
const NO_GL_CONTEXT: &[Expect] = &[
    Expect::Cu(CuResult::CUDA_SUCCESS),
    Expect::Cu(CuResult::CUDA_ERROR_INVALID_GRAPHICS_CONTEXT),
    Expect::Cu(CuResult::CUDA_ERROR_INVALID_CONTEXT),
    Expect::Cu(CuResult::CUDA_ERROR_INVALID_VALUE),
    Expect::Cu(CuResult::CUDA_ERROR_UNKNOWN),
    Expect::Crash,
];

/// The image workflow's cases (see [`super::cases`] for what each field says).
pub(super) const IMAGE: [Case; 12] = [
    Case {
        name: "image-pointer",
        call: "cuGraphicsResourceGetMappedPointer on a mapped GL texture (cuGraphicsGLRegisterImage)",
        needs: Needs::GlInterop,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_NOT_MAPPED_AS_POINTER)],
        explanation: "A mapped image reaches CUDA as a CUDA array, which the CUDA C++ Programming Guide (12.x \
                      §6.2.14.3, CUDA Arrays) calls an opaque memory layout optimized for texture fetching: there is \
                      no device pointer to hand out. Reference (cuGraphicsResourceGetMappedPointer): “If resource is \
                      not a buffer then it cannot be accessed via a pointer and CUDA_ERROR_NOT_MAPPED_AS_POINTER is \
                      returned.” [cuda.h: cuGraphicsResourceGetMappedPointer] \
                      H200: 213 CUDA_ERROR_NOT_MAPPED_AS_POINTER.",
        fix: "Ask a mapped image for its array (cuGraphicsSubResourceGetMappedArray, Mapping::array) and reach it \
              through a surface or texture object, or cuMemcpy2D.",
    },
    Case {
        name: "buffer-as-array",
        call: "cuGraphicsSubResourceGetMappedArray on a mapped GL buffer",
        needs: Needs::GlInterop,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_NOT_MAPPED_AS_ARRAY)],
        explanation: "The mirror of image-pointer: a buffer is linear memory with a device pointer, and has no array. \
                      Reference (cuGraphicsSubResourceGetMappedArray): “If resource is not a texture then it cannot be \
                      accessed via an array and CUDA_ERROR_NOT_MAPPED_AS_ARRAY is returned.” [cuda.h: \
                      cuGraphicsSubResourceGetMappedArray] H200: 212 CUDA_ERROR_NOT_MAPPED_AS_ARRAY.",
        fix: "Ask a mapped buffer for its pointer (cuGraphicsResourceGetMappedPointer, Mapping::pointer).",
    },
    Case {
        name: "image-layer-out-of-range",
        call: "cuGraphicsSubResourceGetMappedArray(arrayIndex = 1) on a mapped 2D texture",
        needs: Needs::GlInterop,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_INVALID_VALUE)],
        explanation: "A 2D texture has one layer (index 0); array indices count the layers of array textures and the \
                      faces of cube maps, and mipLevel the mip levels the texture has. Reference \
                      (cuGraphicsSubResourceGetMappedArray): “If arrayIndex is not a valid array index for resource \
                      then CUDA_ERROR_INVALID_VALUE is returned.” [cuda.h: cuGraphicsSubResourceGetMappedArray] \
                      H200: 1 CUDA_ERROR_INVALID_VALUE.",
        fix: "Use layer 0 and a mip level the texture has (0 for one without mipmaps).",
    },
    Case {
        name: "surface-without-ldst",
        call: "cuSurfObjectCreate over the array of a texture registered without CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST",
        needs: Needs::GlInterop,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_SUCCESS), Expect::Cu(CuResult::CUDA_ERROR_INVALID_VALUE)],
        explanation: "The surface flag tells the driver, at registration, that CUDA will use the image through a \
                      surface. The lab registers a texture without it, maps it and makes a surface object over its \
                      array; it writes nothing through the object. Reference (cuGraphicsGLRegisterImage): \
                      CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST “Specifies that CUDA will bind this resource to a \
                      surface reference.” [cudaGL.h: cuGraphicsGLRegisterImage] The CUDA C++ Programming Guide (OpenGL \
                      Interoperability, 12.x §6.2.15.1) lets kernels read the array through a texture or a surface, \
                      and write it through the surface write functions only when the resource was registered with the \
                      flag (cudaGraphicsRegisterFlagsSurfaceLoadStore, the runtime's name): a surface that only reads \
                      is within the rule, a write through it is not. Only the code is unstated: cuSurfObjectCreate \
                      lists “CUDA_SUCCESS, CUDA_ERROR_DEINITIALIZED, CUDA_ERROR_NOT_INITIALIZED, \
                      CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_VALUE” [cuda.h: cuSurfObjectCreate] and does not \
                      say what it answers for an image registered without the flag, so CUDA_SUCCESS and \
                      CUDA_ERROR_INVALID_VALUE are both possible. \
                      H200: 0 CUDA_SUCCESS: the object was made (no write through it was tried).",
        fix: "Register every image a kernel writes through a surface with CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST (the \
              Programming Guide's condition for surface writes); an image CUDA only reads needs no flag.",
    },
    Case {
        name: "register-rgb8-texture",
        call: "cuGraphicsGLRegisterImage of a GL_RGB8 texture (a three-channel format)",
        needs: Needs::GlInterop,
        isolated: false,
        expected: &[
            Expect::Cu(CuResult::CUDA_SUCCESS),
            Expect::Cu(CuResult::CUDA_ERROR_INVALID_HANDLE),
            Expect::Cu(CuResult::CUDA_ERROR_INVALID_VALUE),
            Expect::Cu(CuResult::CUDA_ERROR_NOT_SUPPORTED),
        ],
        explanation: "GL_RGB8 has three channels; the elements of a CUDA array have 1, 2 or 4 components (CUDA C++ \
                      Programming Guide, 12.x §6.2.14.3, CUDA Arrays), and both of NVIDIA's lists of what \
                      cuGraphicsGLRegisterImage takes leave three-channel formats out. Reference \
                      (cuGraphicsGLRegisterImage): the formats listed are “GL_RED, GL_RG, GL_RGBA, GL_LUMINANCE, \
                      GL_ALPHA, GL_LUMINANCE_ALPHA, GL_INTENSITY” [cudaGL.h: cuGraphicsGLRegisterImage], “{GL_R, \
                      GL_RG, GL_RGBA} X {8, 16, 16F, 32F, 8UI, 16UI, 32UI, 8I, 16I, 32I}” [cudaGL.h: \
                      cuGraphicsGLRegisterImage] and the luminance, alpha and intensity sizes; the CUDA C++ \
                      Programming Guide (OpenGL Interoperability, 12.x §6.2.15.1) names cudaGraphicsGLRegisterImage's \
                      formats as those with 1, 2 or 4 components. Neither says what an unlisted format gets. The \
                      listed returns are “CUDA_SUCCESS, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_ALREADY_MAPPED, \
                      CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_OPERATING_SYSTEM” [cudaGL.h: cuGraphicsGLRegisterImage], \
                      none tied to a format. The lab accepts CUDA_SUCCESS, the listed CUDA_ERROR_INVALID_HANDLE, and \
                      two codes the list does not name: CUDA_ERROR_INVALID_VALUE (what this driver answered to another \
                      refused registration, register-buffer-zero, also unlisted there) and CUDA_ERROR_NOT_SUPPORTED; \
                      another driver may answer with any code. \
                      H200: 0 CUDA_SUCCESS: registered, although the format is not listed.",
        fix: "Use a listed format: GL_RGBA8 for colour (4 channels), GL_R32F for a density.",
    },
    Case {
        name: "map-flags-invalid",
        call: "cuGraphicsResourceSetMapFlags(flags = 7) on a registered buffer",
        needs: Needs::GlInterop,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_INVALID_VALUE)],
        explanation: "The map flags are one value, not a bit set: NONE (0), READ_ONLY (1) or WRITE_DISCARD (2). \
                      GraphicsResource::set_map_flags takes any c_uint, so the mistake is possible with the safe \
                      types. Reference (cuGraphicsResourceSetMapFlags): “If flags is not one of the above values then \
                      CUDA_ERROR_INVALID_VALUE is returned.” [cuda.h: cuGraphicsResourceSetMapFlags] \
                      H200: 1 CUDA_ERROR_INVALID_VALUE.",
        fix: "Pass one of CU_GRAPHICS_MAP_RESOURCE_FLAGS_NONE, _READ_ONLY or _WRITE_DISCARD (the app's \
              --map-flags none|read-only|write-discard).",
    },
    Case {
        name: "texture-deleted-while-registered",
        call: "glDeleteTextures of a texture registered with cuGraphicsGLRegisterImage, then cuGraphicsMapResources, \
               cuGraphicsSubResourceGetMappedArray, cuGraphicsUnmapResources and cuGraphicsUnregisterResource",
        needs: Needs::GlInterop,
        isolated: true,
        expected: &[
            Expect::Cu(CuResult::CUDA_SUCCESS),
            Expect::Cu(CuResult::CUDA_ERROR_INVALID_HANDLE),
            Expect::Cu(CuResult::CUDA_ERROR_INVALID_VALUE),
            Expect::Cu(CuResult::CUDA_ERROR_MAP_FAILED),
            Expect::Cu(CuResult::CUDA_ERROR_UNKNOWN),
            Expect::Crash,
        ],
        explanation: "glDeleteTextures frees the name whether or not CUDA has the texture registered, and the \
                      registration still refers to it. interop cannot stop this: a GraphicsResource keeps only the GL \
                      name, and GL deletes what the application tells it to. The lab registers a 16 × 16 RGBA8 \
                      texture, deletes it, then maps it, asks for its array, unmaps it and unregisters it. The answer \
                      is the first call the driver refused (its text names the call), or CUDA_SUCCESS when it accepted \
                      all of them; the detail lists every code. It runs in a child process in case a call reaches what \
                      GL freed. Reference (cuGraphicsGLRegisterImage, cuGraphicsMapResources, \
                      cuGraphicsSubResourceGetMappedArray, cuGraphicsUnmapResources, cuGraphicsUnregisterResource): \
                      nothing in the documentation of these five functions (cudaGL.h, cuda.h) says what a registration \
                      does when its GL object is deleted, nor which code a call on it returns; cuGraphicsMapResources \
                      lists “CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_ALREADY_MAPPED, CUDA_ERROR_UNKNOWN” [cuda.h: \
                      cuGraphicsMapResources] among its returns without tying them to this. The Programming Guide's \
                      OpenGL sample unregisters (cudaGraphicsUnregisterResource) before it deletes the GL object. So \
                      any answer is possible: CUDA_SUCCESS, a refusal such as CUDA_ERROR_INVALID_HANDLE, \
                      CUDA_ERROR_INVALID_VALUE or CUDA_ERROR_MAP_FAILED (cuda.h: \"a map or register operation has \
                      failed\"), CUDA_ERROR_UNKNOWN, or a crash (PROCESS_KILLED_BY_A_SIGNAL); what one driver does is \
                      no promise. \
                      H200: 0 CUDA_SUCCESS for all four calls on driver 580.159: the map, the array, the unmap and the unregister of the deleted texture were accepted.",
        fix: "Unregister (drop the GraphicsResource) before glDeleteTextures, and register again after re-creating \
              the texture: the teardown order is unregister, then delete the GL objects.",
    },
    Case {
        name: "map-no-gl-context",
        call: "cuGraphicsMapResources of a registered texture with no GL context current on the thread (registered \
               with it current, then released: eglMakeCurrent(EGL_NO_CONTEXT))",
        needs: Needs::GlInterop,
        isolated: true,
        expected: NO_GL_CONTEXT,
        explanation: "The GL context was current at the registration; the lab then releases it (glutin's \
                      make_not_current_in_place, through HeadlessContext::without_current, whose closure cannot hold \
                      the Gl token) and maps the texture on the same thread, the CUDA context still current. \
                      register-no-gl-context makes the registration itself without a GL context; this is the same rule \
                      for the map. A refused map is made again with the GL context current (the control, in the \
                      detail). The case runs in a child process in case the driver does not check. Reference (CUDA C++ \
                      Programming Guide, OpenGL Interoperability, 12.x §6.2.15.1, 13.x §4.19.1.1): \"The OpenGL \
                      context whose resources are being shared has to be current to the host thread making any OpenGL \
                      interoperability API calls\" — a stated rule, which covers the map. Only the code is not stated: \
                      cuGraphicsMapResources lists “CUDA_SUCCESS, CUDA_ERROR_DEINITIALIZED, \
                      CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE, \
                      CUDA_ERROR_ALREADY_MAPPED, CUDA_ERROR_UNKNOWN” [cuda.h: cuGraphicsMapResources], none said to \
                      answer a thread without its GL context. A driver may refuse \
                      (CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, cuda.h: \"an error with OpenGL or DirectX context\"; \
                      CUDA_ERROR_INVALID_CONTEXT; CUDA_ERROR_INVALID_VALUE, as for register-no-gl-context; \
                      CUDA_ERROR_UNKNOWN), accept the map all the same (CUDA_SUCCESS, which does not make the call \
                      right) or crash (PROCESS_KILLED_BY_A_SIGNAL). \
                      H200: 219 CUDA_ERROR_INVALID_GRAPHICS_CONTEXT on driver 580.159, and the same map with the GL context current again succeeded.",
        fix: "Keep the GL context current on the thread for every interop call — register, map, unmap, unregister — \
              as this project's render thread does (it holds the Gl token); a worker thread that maps needs the GL \
              context made current there first (and not current on the render thread meanwhile).",
    },
    Case {
        name: "unmap-no-gl-context",
        call: "cuGraphicsUnmapResources of a mapped texture with no GL context current on the thread (registered and \
               mapped with it current, then released: eglMakeCurrent(EGL_NO_CONTEXT))",
        needs: Needs::GlInterop,
        isolated: true,
        expected: NO_GL_CONTEXT,
        explanation: "The unmap hands the texture back to GL and orders GL's later work after CUDA's, so it is a GL \
                      interop call like the map. The lab registers and maps the texture with the GL context current, \
                      releases the GL context (HeadlessContext::without_current) and unmaps, the CUDA context still \
                      current. A refused unmap is made again with the GL context current (the control), and the \
                      texture is then unregistered; all codes are in the detail. It runs in a child process in case \
                      the driver does not check. Reference (CUDA C++ Programming Guide, OpenGL Interoperability, 12.x \
                      §6.2.15.1, 13.x §4.19.1.1): \"The OpenGL context whose resources are being shared has to be \
                      current to the host thread making any OpenGL interoperability API calls\" — stated, for the \
                      unmap too. The code is not: cuGraphicsUnmapResources's listed returns, “CUDA_SUCCESS, \
                      CUDA_ERROR_DEINITIALIZED, CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_INVALID_CONTEXT, \
                      CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_NOT_MAPPED, CUDA_ERROR_UNKNOWN” [cuda.h: \
                      cuGraphicsUnmapResources], name no code for a thread without its GL context. A driver may refuse \
                      (CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_VALUE, \
                      CUDA_ERROR_UNKNOWN), accept the unmap (CUDA_SUCCESS, which does not make the call right) or \
                      crash (PROCESS_KILLED_BY_A_SIGNAL). \
                      H200: 219 CUDA_ERROR_INVALID_GRAPHICS_CONTEXT on driver 580.159, but not cleanly: with the GL context current again the retried unmap answered CUDA_ERROR_NOT_MAPPED and the unregister CUDA_ERROR_ALREADY_MAPPED, so after the refusal the driver called the texture neither mapped nor unmapped.",
        fix: "Unmap (drop the Mapping) on the thread where the GL context is current, before GL uses the texture \
              again; never release the GL context between the map and the unmap.",
    },
    Case {
        name: "unregister-no-gl-context",
        call: "cuGraphicsUnregisterResource of a registered texture with no GL context current on the thread \
               (registered with it current, then released: eglMakeCurrent(EGL_NO_CONTEXT))",
        needs: Needs::GlInterop,
        isolated: true,
        expected: NO_GL_CONTEXT,
        explanation: "Teardown is where this happens in practice: a GraphicsResource dropped after the GL context was \
                      released, or on another thread. The lab registers the texture with the GL context current, \
                      releases the GL context (HeadlessContext::without_current) and unregisters it, the CUDA context \
                      still current. A refused unregister is made again with the GL context current (the control, in \
                      the detail). It runs in a child process in case the driver does not check. Reference (CUDA C++ \
                      Programming Guide, OpenGL Interoperability, 12.x §6.2.15.1, 13.x §4.19.1.1): \"The OpenGL \
                      context whose resources are being shared has to be current to the host thread making any OpenGL \
                      interoperability API calls\" — stated, for the unregister too. The code is not: \
                      cuGraphicsUnregisterResource lists “CUDA_SUCCESS, CUDA_ERROR_DEINITIALIZED, \
                      CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE, \
                      CUDA_ERROR_UNKNOWN” [cuda.h: cuGraphicsUnregisterResource], none said to answer a thread without \
                      its GL context. A driver may refuse (CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, \
                      CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_UNKNOWN), accept (CUDA_SUCCESS, \
                      which does not make the call right) or crash (PROCESS_KILLED_BY_A_SIGNAL). \
                      H200: on driver 580.159 the unregister answered 219 CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, and the same call again with the GL context current killed the process (SIGSEGV; the child's last log lines, kept in the recording, end at that call): a refused unregister may leave nothing safe to retry.",
        fix: "Unregister (drop every GraphicsResource) while the GL context is still current on the thread, before \
              the GL objects are deleted and the context goes: the teardown order unregister → GL objects → context.",
    },
    Case {
        name: "write-discard-read-back",
        call: "cuGraphicsResourceSetMapFlags(CU_GRAPHICS_MAP_RESOURCE_FLAGS_WRITE_DISCARD) on a registered texture GL \
               has just cleared, then map and cuMemcpy2D of its array to the host: CUDA reads what it promised not to",
        needs: Needs::GlInterop,
        isolated: true,
        expected: &[Expect::Silent(Data::Stale), Expect::Silent(Data::Garbled), Expect::Silent(Data::Current)],
        explanation: "WRITE_DISCARD is a promise, for the maps that follow, that CUDA will not read the resource and \
                      will overwrite all of it: the driver then need not hand CUDA the texels GL left there. The lab \
                      breaks the promise: GL fills a 16 × 16 RGBA8 texture with 0x3c bytes, the texture is registered, \
                      GL clears it to 0xa5 bytes (its contents from then on), the map flags are set to WRITE_DISCARD, \
                      and CUDA maps it and copies its array to the host (interop::safe::image::copy_array_to_host). Every \
                      call returns CUDA_SUCCESS; what CUDA read decides: SUCCESS_WITH_CURRENT_DATA when it read GL's \
                      last texels (0xa5), SUCCESS_BUT_STALE_DATA when it read the ones of before (0x3c), \
                      SUCCESS_BUT_GARBLED_DATA when neither. The detail adds a second read of the same texture with \
                      the map flags NONE. interop passes the map flags through (GraphicsResource::set_map_flags) and \
                      cannot see whether a kernel reads. No other case reads under WRITE_DISCARD \
                      (write-read-only-registered breaks the opposite promise, READ_ONLY, on a buffer). It runs in a \
                      child process, as the other silent cases (its GL clears also change the viewport). Reference \
                      (cuGraphicsResourceSetMapFlags): CU_GRAPHICS_MAP_RESOURCE_FLAGS_WRITE_DISCARD “Specifies that \
                      CUDA kernels which access this resource will not read from this resource and will write over the \
                      entire contents of the resource, so none of the data previously stored in the resource will be \
                      preserved.” [cuda.h: cuGraphicsResourceSetMapFlags] What a read after such a map sees is not \
                      stated: any of the three answers is allowed, and none is a promise. \
                      H200: SUCCESS_WITH_CURRENT_DATA on driver 580.159: CUDA read the texels GL wrote last (256 of 256), as with the map flags NONE.",
        fix: "Set WRITE_DISCARD only on a resource the kernel overwrites entirely without reading it (the app's \
              --map-flags write-discard puts it on the buffer the step writes); a kernel that reads the texels needs \
              NONE (or READ_ONLY if it only reads).",
    },
    Case {
        name: "register-every-frame",
        call: "cuGraphicsGLRegisterImage + map + unmap + cuGraphicsUnregisterResource every frame (a texture, and a \
               buffer with cuGraphicsGLRegisterBuffer), timed against map + unmap of ones registered once, 200 frames",
        needs: Needs::GlInterop,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_SUCCESS)],
        explanation: "Registering every frame is not refused — every call returns CUDA_SUCCESS — it costs. The lab \
                      measures it over 200 frames: a 16 × 16 RGBA8 texture and a 256-byte buffer, each registered, \
                      mapped, unmapped and unregistered in a frame, against the same objects registered once and only \
                      mapped and unmapped. Each frame is timed on the host to the end of a cuStreamSynchronize (the \
                      map and the unmap are stream-ordered), with no GL work between the frames; the answer's text \
                      gives the medians and the detail the 99th percentiles, in µs. The objects are small: larger \
                      ones were not measured. interop does not stop it: nothing prevents making a GraphicsResource \
                      per frame. Reference (CUDA C++ Programming Guide, Graphics Interoperability, 12.x §6.2.15): \
                      \"Registering a resource is potentially high-overhead and therefore typically called only once \
                      per resource.\" and \"Once a resource is registered to CUDA, it can be mapped and unmapped as \
                      many times as necessary\" (13.x §4.19.1: \"registering a resource is costly and therefore \
                      ideally only called once per resource\"). The guide gives no figure; the cost is this driver's. \
                      H200: 0 CUDA_SUCCESS on driver 580.159; a frame that registers and unregisters took 373 µs against 278 µs for map + unmap alone (texture), 370 against 279 µs (buffer): about 90 µs a frame more, each frame ended by cuStreamSynchronize (medians of 200).",
        fix: "Register each GL object once (at setup, or again only when it is re-created) and keep its \
              GraphicsResource; each frame only maps and unmaps, as this project's map storage does with its two \
              buffers.",
    },
];
