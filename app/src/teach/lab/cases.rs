//! The mistake lab's one table: every case with its call, what it needs, the answers the driver
//! may give and why (see [`super`] for how a case runs).

use interop::sys::{CUdriverProcAddressQueryResult, CuResult};

use super::{Case, Data, Expect, Needs};

/// Codes seen on driver 580 (H200, 2026-11-30): buffer name 0 gives CUDA_ERROR_INVALID_VALUE, a
/// deleted buffer CUDA_ERROR_INVALID_HANDLE.
const BUFFER_ZERO: &[Expect] = &[Expect::Cu(CuResult::CUDA_ERROR_INVALID_VALUE)];
const DELETED_BUFFER: &[Expect] = &[Expect::Cu(CuResult::CUDA_ERROR_INVALID_HANDLE)];
const NOT_MAPPED: &[Expect] = &[Expect::Cu(CuResult::CUDA_ERROR_NOT_MAPPED)];

/// Every case, with its expected answers (the one table: `BUFFER`, then the image workflow's
/// `image_cases::IMAGE`). Each explanation says what happens and why, then, apart, what
/// NVIDIA's reference says (`Reference (<function>): …`: the CUDA headers quoted as
/// `“…” [HEADER: FUNCTION]`, the form `.ci/claims.py check` finds in the pinned headers, or the
/// Programming Guide with its section) and what the H200 showed (`H200: …`; driver 580.159,
/// `lab.jsonl`). Cases added after that run say so ("not yet recorded") until a GPU run
/// fills them in. `isolated` cases run in a child process (`lab::child`).
pub const CASES: &[Case] = &ALL;

/// The two parts of the table, in order.
const ALL: [Case; 33] = concat::<21, 12, 33>(BUFFER, super::image_cases::IMAGE);

/// `a` then `b` (`N` must be `A + B`: checked when the constant is evaluated, at compile time).
const fn concat<const A: usize, const B: usize, const N: usize>(a: [Case; A], b: [Case; B]) -> [Case; N] {
    assert!(A + B == N && A > 0, "the table's parts do not add up");
    let mut out = [a[0]; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < A { a[i] } else { b[i - A] };
        i += 1;
    }
    out
}

/// The buffer workflow's cases, the entry-point lookups, modules and events.
const BUFFER: [Case; 21] = [
    Case {
        name: "map-already-mapped",
        call: "cuGraphicsMapResources on a resource that is already mapped",
        needs: Needs::GlInterop,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_ALREADY_MAPPED)],
        explanation: "A registered buffer belongs to GL or to CUDA, never both: the map hands it to CUDA until the \
                      unmap, and a second map before that is refused. interop::map_resources makes this mistake a \
                      compile error (the Mapping borrows the resources mutably), so the lab calls the raw \
                      Api::cuGraphicsMapResources to show the driver's answer. Reference (cuGraphicsMapResources): “If \
                      any of resources are presently mapped for access by CUDA then CUDA_ERROR_ALREADY_MAPPED is \
                      returned.” [cuda.h: cuGraphicsMapResources] H200: 208 CUDA_ERROR_ALREADY_MAPPED.",
        fix: "Map once per frame, unmap (drop the Mapping) before the next map, and map all the frame's resources \
              in one call.",
    },
    Case {
        name: "pointer-of-unmapped",
        call: "cuGraphicsResourceGetMappedPointer on a registered resource that is not mapped",
        needs: Needs::GlInterop,
        isolated: false,
        expected: NOT_MAPPED,
        explanation: "A GL buffer has a CUDA device address only between map and unmap. interop hands out a MappedPtr \
                      only from a live Mapping, borrowing it, so this cannot be written with the safe types; the lab \
                      calls the raw Api method. Reference (cuGraphicsResourceGetMappedPointer): “If resource is not \
                      mapped then CUDA_ERROR_NOT_MAPPED is returned.” [cuda.h: cuGraphicsResourceGetMappedPointer] and \
                      “The value set in pPointer may change every time that resource is mapped.” [cuda.h: \
                      cuGraphicsResourceGetMappedPointer] H200: 211 CUDA_ERROR_NOT_MAPPED.",
        fix: "Map first, then ask for the pointer after every map; never keep a mapped pointer across frames.",
    },
    Case {
        name: "unmap-twice",
        call: "cuGraphicsUnmapResources on a resource that was already unmapped",
        needs: Needs::GlInterop,
        isolated: false,
        expected: NOT_MAPPED,
        explanation: "Unmapping gives the buffer back to GL; a second unmap finds nothing mapped. Mapping::unmap \
                      consumes the guard and its Drop unmaps only if that did not happen, so the safe types unmap \
                      exactly once; the lab calls the raw Api method a second time. Reference \
                      (cuGraphicsUnmapResources): “If any of resources are not presently mapped for access by CUDA \
                      then CUDA_ERROR_NOT_MAPPED is returned.” [cuda.h: cuGraphicsUnmapResources] \
                      H200: 211 CUDA_ERROR_NOT_MAPPED.",
        fix: "Unmap exactly once per map: let the guard do it (Mapping::unmap to see the error, or drop).",
    },
    Case {
        name: "map-same-resource-twice",
        call: "cuGraphicsMapResources(2, [r, r], stream): the same resource twice in one array",
        needs: Needs::GlInterop,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_INVALID_HANDLE), Expect::Cu(CuResult::CUDA_ERROR_ALREADY_MAPPED)],
        explanation: "One map call takes all of a frame's resources, but each of them once: a repeat is refused, with \
                      the code the reference names or, on the H200, the one for mapping a mapped resource. \
                      interop::map_resources takes a slice of GraphicsResource values, each owning its own \
                      registration, so the same handle cannot appear twice; the lab builds the raw array. Reference \
                      (cuGraphicsMapResources): “If resources includes any duplicate entries then \
                      CUDA_ERROR_INVALID_HANDLE is returned.” [cuda.h: cuGraphicsMapResources] \
                      H200: on driver 580.159 (2026-12-02), CUDA_ERROR_ALREADY_MAPPED, not the INVALID_HANDLE the reference names. The lab reads only the code, not which check gave it: a code the reference names is a promise about an error, not always the code one gets.",
        fix: "Map each registered resource once per call: collect the frame's distinct resources (the two ping-pong \
              buffers are two resources) and map them together.",
    },
    Case {
        name: "set-map-flags-while-mapped",
        call: "cuGraphicsResourceSetMapFlags(READ_ONLY) on a resource that is mapped",
        needs: Needs::GlInterop,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_ALREADY_MAPPED)],
        explanation: "Map flags (read-only, write-discard) are a promise about the next map and take effect when the \
                      resource is mapped; while it is mapped the driver refuses to change them. \
                      GraphicsResource::set_map_flags takes &mut self and a live Mapping borrows the resource, so the \
                      safe types make this a compile error; the lab calls the raw Api method. Reference \
                      (cuGraphicsResourceSetMapFlags): “Changes to flags will take effect the next time resource is \
                      mapped.” [cuda.h: cuGraphicsResourceSetMapFlags] and “If resource is presently mapped for access \
                      by CUDA then CUDA_ERROR_ALREADY_MAPPED is returned.” [cuda.h: cuGraphicsResourceSetMapFlags] \
                      H200: on driver 580.159 (2026-12-02), CUDA_ERROR_ALREADY_MAPPED, as documented.",
        fix: "Set the map flags before the map (once at setup if they never change: the renderer's source READ_ONLY, \
              a buffer the kernel overwrites WRITE_DISCARD), and unmap before changing them.",
    },
    Case {
        name: "unregister-while-mapped",
        call: "cuGraphicsUnregisterResource on a resource that is mapped",
        needs: Needs::GlInterop,
        isolated: true,
        expected: &[
            Expect::Cu(CuResult::CUDA_SUCCESS),
            Expect::Cu(CuResult::CUDA_ERROR_ALREADY_MAPPED),
            Expect::Cu(CuResult::CUDA_ERROR_UNKNOWN),
            Expect::Crash,
        ],
        explanation: "Unregistering ends CUDA's access to the GL buffer; doing it while the buffer is mapped leaves \
                      the mapping's device pointer, and the unmap that should follow, without a resource. In safe code \
                      the Mapping borrows the GraphicsResource, so the resource cannot be dropped (unregistered) while \
                      it is mapped; the lab calls the raw Api methods, in a child process, because after a successful \
                      unregister the handle must not be touched again (the lab then skips the unmap). Reference \
                      (cuGraphicsUnregisterResource): “Unregisters the graphics resource resource so it is not \
                      accessible by CUDA unless registered again.” [cuda.h: cuGraphicsUnregisterResource] Its listed \
                      returns are “CUDA_SUCCESS, CUDA_ERROR_DEINITIALIZED, CUDA_ERROR_NOT_INITIALIZED, \
                      CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_UNKNOWN” [cuda.h: \
                      cuGraphicsUnregisterResource]; it says nothing of a mapped resource, so a driver may unmap it on \
                      the way (CUDA_SUCCESS), refuse as cuGraphicsResourceSetMapFlags does for a mapped resource \
                      (CUDA_ERROR_ALREADY_MAPPED), fail (CUDA_ERROR_UNKNOWN), or leave the process to crash \
                      (PROCESS_KILLED_BY_A_SIGNAL), the reason the case runs in a child process. \
                      H200: on driver 580.159 (2026-12-02), CUDA_ERROR_ALREADY_MAPPED, the refusal. After a refusal the lab leaves the resource mapped and registered and the child process's exit releases it: the documentation of cuGraphicsUnmapResources and cuGraphicsUnregisterResource does not say what either does to a resource whose unregister was refused.",
        fix: "Unmap (drop the Mapping) before unregistering (dropping the GraphicsResource): the teardown order is \
              unmap, unregister, then glDeleteBuffers.",
    },
    Case {
        name: "map-wrong-context",
        call: "cuGraphicsMapResources with a second context current (cuCtxCreate on the same device, pushed) on a \
               resource registered under the first",
        needs: Needs::GlInterop,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_INVALID_CONTEXT), Expect::Cu(CuResult::CUDA_ERROR_INVALID_HANDLE)],
        explanation: "A registration belongs to the CUDA context that was current at cuGraphicsGLRegisterBuffer (here \
                      the GL device's primary context). Another context on the same device — a library's own context, \
                      or one a thread pushed — has its own registrations and does not know this one. interop's calls \
                      act on the context that is current and never switch behind the caller's back \
                      (Context::make_current, Context::push), so this mistake is possible with the safe types too. \
                      Reference (CUDA C++ Programming Guide, Graphics Interoperability, 13.x §4.19.1): \"for each CUDA \
                      context which intends to use the resource, it is required to register the resource separately\" \
                      (12.x §6.2.15: \"Each CUDA context which intends to use the resource is required to register it \
                      separately.\") — a stated rule. Only the code is undocumented: cuGraphicsMapResources lists \
                      “CUDA_SUCCESS, CUDA_ERROR_DEINITIALIZED, CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_INVALID_CONTEXT, \
                      CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_ALREADY_MAPPED, CUDA_ERROR_UNKNOWN” [cuda.h: \
                      cuGraphicsMapResources] without saying which a resource registered under another context gets \
                      (cuGraphicsUnregisterResource: “If resource is invalid then CUDA_ERROR_INVALID_HANDLE is \
                      returned.” [cuda.h: cuGraphicsUnregisterResource]). \
                      H200: on driver 580.159 (2026-12-02), CUDA_ERROR_INVALID_HANDLE: under the second context the registration's handle names nothing.",
        fix: "Map, launch and unmap with the context that registered the resources current: make it current on the \
              render thread once, or push and pop it around the interop calls where several contexts are used; a \
              second context that must use the buffer registers it itself (one registration per context).",
    },
    Case {
        name: "register-buffer-zero",
        call: "cuGraphicsGLRegisterBuffer(buffer = 0)",
        needs: Needs::GlInterop,
        isolated: false,
        expected: BUFFER_ZERO,
        explanation: "GL name 0 means \"no buffer\", and the driver refuses it. The safe \
                      GraphicsResource::register_gl_buffer takes any GLuint, so this mistake is possible with it; it \
                      returns the driver's error. Reference (cuGraphicsGLRegisterBuffer): the returns listed are \
                      “CUDA_SUCCESS, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_ALREADY_MAPPED, CUDA_ERROR_INVALID_CONTEXT, \
                      CUDA_ERROR_OPERATING_SYSTEM” [cudaGL.h: cuGraphicsGLRegisterBuffer]; it does not say what a name \
                      that is no buffer gets. \
                      H200: 1 CUDA_ERROR_INVALID_VALUE, a code that list does not name (another driver may answer differently).",
        fix: "Register a name from glGenBuffers whose storage exists (glBufferData) in the GL context that is \
              current, on a CUDA device that shares it (cuGLGetDevices).",
    },
    Case {
        name: "register-deleted-buffer",
        call: "cuGraphicsGLRegisterBuffer of a buffer deleted with glDeleteBuffers",
        needs: Needs::GlInterop,
        isolated: false,
        expected: DELETED_BUFFER,
        explanation: "After glDeleteBuffers the name is free again and names no buffer object, and the driver \
                      refuses it. The reverse order — glDeleteBuffers on a buffer that is still registered — is \
                      another mistake, which no lab case makes and whose outcome the driver reference does not \
                      describe; teardown follows the Programming Guide's sample, which calls \
                      cudaGraphicsUnregisterResource before glDeleteBuffers. Reference (cuGraphicsGLRegisterBuffer): \
                      CUDA_ERROR_INVALID_HANDLE is among the listed returns, but the reference does not say which \
                      code a deleted name gets. H200: 400 CUDA_ERROR_INVALID_HANDLE (name 0 got \
                      CUDA_ERROR_INVALID_VALUE instead).",
        fix: "Register after glGenBuffers + glBufferData; unregister (drop the GraphicsResource) before \
              glDeleteBuffers, and register again after re-creating the buffer.",
    },
    Case {
        name: "register-no-gl-context",
        call: "cuGraphicsGLRegisterBuffer of a live buffer on a thread with no GL context current (a spawned \
               thread, with the CUDA context made current there)",
        needs: Needs::GlInterop,
        isolated: true,
        expected: &[
            Expect::Cu(CuResult::CUDA_ERROR_INVALID_GRAPHICS_CONTEXT),
            Expect::Cu(CuResult::CUDA_ERROR_INVALID_CONTEXT),
            Expect::Cu(CuResult::CUDA_ERROR_INVALID_VALUE),
        ],
        explanation: "A GL buffer name means something only in a GL context (names belong to a context and its share \
                      group), and GL contexts are current per thread: a thread without one cannot say which buffer the \
                      number names. interop's Gl token is not Send, so GL calls stay on the thread that owns the \
                      context, but cuGraphicsGLRegisterBuffer takes only a number: a worker thread with the CUDA \
                      context current can still make the call. The lab makes it on a spawned thread, in a child \
                      process in case the driver does not check. Reference (CUDA C++ Programming Guide, OpenGL \
                      Interoperability, 12.x §6.2.15.1, 13.x §4.19.1.1): \"The OpenGL context whose resources are \
                      being shared has to be current to the host thread making any OpenGL interoperability API calls\" \
                      — a stated rule, for the register, map, unmap and unregister calls alike (the deprecated \
                      cuGLRegisterBufferObject's reference says it too: “There must be a valid OpenGL context bound to \
                      the current thread when this function is called, and the buffer name is resolved by that \
                      context.” [cudaGL.h: cuGLRegisterBufferObject]). Only the code is undocumented: \
                      cuGraphicsGLRegisterBuffer's listed returns are “CUDA_SUCCESS, CUDA_ERROR_INVALID_HANDLE, \
                      CUDA_ERROR_ALREADY_MAPPED, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_OPERATING_SYSTEM” [cudaGL.h: \
                      cuGraphicsGLRegisterBuffer], none said to be the answer to a thread without a current GL \
                      context. A driver may answer CUDA_ERROR_INVALID_GRAPHICS_CONTEXT (cuda.h: \"an error with OpenGL \
                      or DirectX context\"), CUDA_ERROR_INVALID_CONTEXT, or, as for a name it cannot resolve, \
                      CUDA_ERROR_INVALID_VALUE. \
                      H200: on driver 580.159 (2026-12-02), CUDA_ERROR_INVALID_VALUE on the thread without a GL context; the same buffer name on the GL thread registered with CUDA_SUCCESS.",
        fix: "Make every interop call (register, map, unmap, unregister) on a thread where the GL context that owns \
              the buffer is current — in this project the render thread, which holds the Gl token.",
    },
    Case {
        name: "buffer-data-on-registered",
        call: "glBufferData (256 → 1024 bytes) on a registered buffer, then map and \
               cuGraphicsResourceGetMappedPointer",
        needs: Needs::GlInterop,
        isolated: true,
        expected: &[Expect::Silent(Data::Stale), Expect::Silent(Data::Current)],
        explanation: "glBufferData gives a buffer new storage — a resize is a new allocation — while the CUDA \
                      registration was made for the old one. Nothing in interop stops it: a GraphicsResource keeps \
                      only the name. The lab maps before and after the resize and compares the pointer and size \
                      cuGraphicsResourceGetMappedPointer reports, and reads a few words through the pointer (GL filled \
                      the new storage with 0x5a bytes). Every call returns CUDA_SUCCESS; the size decides: \
                      SUCCESS_BUT_STALE_DATA when it is still the old 256 bytes (CUDA's view of the buffer is out of \
                      date: the \"resize bug\"), SUCCESS_WITH_CURRENT_DATA when it is the new 1024. The case runs in a \
                      child process because the old storage may be gone. Reference (cuGraphicsGLRegisterBuffer): it \
                      describes only the registration (“Registers the buffer object specified by buffer for access by \
                      CUDA.” [cudaGL.h: cuGraphicsGLRegisterBuffer]), and cuGraphicsResourceGetMappedPointer says “The \
                      value set in pPointer may change every time that resource is mapped.” [cuda.h: \
                      cuGraphicsResourceGetMappedPointer]; neither says what a re-specified buffer gives. \
                      H200: on driver 580.159 (2026-12-02), every call succeeded; after the glBufferData the mapped pointer moved (to the new storage, which CUDA read as GL's new contents) but the mapped size stayed 256 bytes: CUDA sees only the old size of the new buffer.",
        fix: "Unregister before re-specifying a buffer with glBufferData and register it again after; to change only \
              the contents use glBufferSubData, or write from CUDA through the mapping.",
    },
    Case {
        name: "proc-address-old-version",
        call: "cuGetProcAddress(\"cuMemAllocAsync\", 11010, CU_GET_PROC_ADDRESS_LEGACY_STREAM)",
        needs: Needs::Driver,
        isolated: false,
        expected: &[Expect::Status(CUdriverProcAddressQueryResult::VERSION_NOT_SUFFICIENT)],
        explanation: "cuMemAllocAsync first appeared in CUDA 11.2 (its typedef is PFN_cuMemAllocAsync_v11020). \
                      cuGetProcAddress returns the newest variant whose version is ≤ the one asked; asking below the \
                      function's first version finds none. The call itself succeeds: the answer is in the null pointer \
                      and symbolStatus. Reference (cuGetProcAddress): “The API will return CUDA_SUCCESS and set the \
                      returned pfn to NULL if … no ABI compatible driver function exists for the specified \
                      cudaVersion” [cuda.h: cuGetProcAddress], with symbolStatus \
                      “CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT - The requested symbol was found but is not \
                      supported by cudaVersion specified” [cuda.h: cuGetProcAddress]. \
                      H200: CUDA_SUCCESS, a null pointer and symbolStatus 2 (VERSION_NOT_SUFFICIENT); asked at 11020 it is found. The per-thread form of this mistake, cuLaunchKernel at 4000 with per-thread flags (the _ptsz variants start at 7000), is the case ptsz-at-4000.",
        fix: "Ask with the version of the PFN_<name>_v<version> typedef your signature copies (cudaTypedefs.h) — \
              never older than the function, never above the driver's version (the reference: \
              CUDA_ERROR_INVALID_VALUE; the bug of passing a newer header's CUDA_VERSION: case proc-address-above-driver), \
              and never the driver's version itself (which silently returns a newer signature: cuCtxCreate has \
              3020, 11040 and 12050: case ctx-create-versions).",
    },
    Case {
        name: "proc-address-misspelt",
        call: "cuGetProcAddress(\"cuLaunchKernal\", 4000, CU_GET_PROC_ADDRESS_LEGACY_STREAM)",
        needs: Needs::Driver,
        isolated: false,
        expected: &[Expect::Status(CUdriverProcAddressQueryResult::SYMBOL_NOT_FOUND)],
        explanation: "The driver has no function of that name. As for a too-old version, the call succeeds and the \
                      answer is a null pointer with a symbolStatus; calling that pointer would crash, so interop \
                      stores each entry as an Option and refuses to call a missing one. Reference (cuGetProcAddress): \
                      CUDA_SUCCESS and pfn set to NULL “if the driver symbol is invalid” [cuda.h: cuGetProcAddress], \
                      with symbolStatus “CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND - The requested symbol was not found” \
                      [cuda.h: cuGetProcAddress]. \
                      H200: CUDA_SUCCESS, a null pointer and symbolStatus 1 (SYMBOL_NOT_FOUND).",
        fix: "Take names from one table checked against the headers (tests/interop_headers.rs), and turn a null \
              pointer into an error that names the function, its version and the status.",
    },
    Case {
        name: "proc-address-above-driver",
        call: "cuGetProcAddress(\"cuMemAlloc\", cuDriverGetVersion + 1000, CU_GET_PROC_ADDRESS_LEGACY_STREAM): a \
               newer header's CUDA_VERSION",
        needs: Needs::Driver,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_INVALID_VALUE)],
        explanation: "A program built with a newer toolkit that passes its CUDA_VERSION to every lookup asks for \
                      versions the installed driver has never heard of. The lab asks for cuMemAlloc (there since 3020) \
                      at the driver's version + 1000. Unlike a too-old version or a misspelt name, this is refused by \
                      the call's own result, not through symbolStatus (the lab reports the CUresult; the symbolStatus \
                      and pointer are in the detail). Reference (cuGetProcAddress, the CUDA 13 reference): \"If the \
                      specified CUDA version is greater than the driver version, the API will return \
                      CUDA_ERROR_INVALID_VALUE.\" That sentence is not in the CUDA 12.0 and 12.2 references nor in the \
                      comment of the 12.9 cuda.h, which lists “CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, \
                      CUDA_ERROR_NOT_SUPPORTED” [cuda.h: cuGetProcAddress] without saying when each comes, so what a \
                      CUDA 12 driver answers is not documented and may differ. \
                      H200: on driver 580.159 (2026-12-02), CUDA_ERROR_INVALID_VALUE, symbolStatus not found and a null pointer for cuMemAlloc at 14000; at 3020 the same lookup succeeds.",
        fix: "Ask each function with the version of the typedef your declaration copies (a constant per function), \
              never CUDA_VERSION; read cuDriverGetVersion at start-up and name what a too-old driver lacks \
              (interop::Api::load does).",
    },
    Case {
        name: "ctx-create-versions",
        call: "cuGetProcAddress(\"cuCtxCreate\", 3020) and (\"cuCtxCreate\", 13000), addresses compared (neither \
               called)",
        needs: Needs::Driver,
        isolated: false,
        expected: &[
            Expect::Status(CUdriverProcAddressQueryResult::SUCCESS),
            Expect::Cu(CuResult::CUDA_ERROR_INVALID_VALUE),
        ],
        explanation: "The version asked picks the signature. cudaTypedefs.h (12.9) has three cuCtxCreate variants: \
                      PFN_cuCtxCreate_v3020 (pctx, flags, dev; the export cuCtxCreate_v2), PFN_cuCtxCreate_v11040 \
                      (pctx, CUexecAffinityParam *paramsArray, int numParams, flags, dev; cuCtxCreate_v3) and \
                      PFN_cuCtxCreate_v12050 (pctx, CUctxCreateParams *ctxCreateParams, flags, dev; cuCtxCreate_v4, \
                      CUDA 12.5). Asked at 3020 the driver returns the three-parameter function interop declares; \
                      asked at 13000 — a CUDA 13 header's CUDA_VERSION — it returns the 12050 variant, whose second \
                      parameter is a CUctxCreateParams pointer: a caller with the three-parameter signature would pass \
                      its flags there. The lab reports the 13000 lookup and compares both addresses with the library's \
                      exports; it calls neither. Reference (cuGetProcAddress): “if the specified CUDA version is \
                      greater than or equal to the CUDA version in which the driver symbol was introduced, this API \
                      will return the function pointer to the corresponding versioned function” [cuda.h: \
                      cuGetProcAddress] and “The pointer returned by the API should be cast to a function pointer \
                      matching the requested driver function's definition in the API header file.” [cuda.h: \
                      cuGetProcAddress]: on a driver of CUDA 13.0 or newer both lookups give \
                      CU_GET_PROC_ADDRESS_SUCCESS. On an older driver 13000 is above the driver's version: the CUDA 13 \
                      reference says such a lookup returns CUDA_ERROR_INVALID_VALUE (\"If the specified CUDA version \
                      is greater than the driver version, the API will return CUDA_ERROR_INVALID_VALUE\"), the CUDA 12 \
                      references do not say what it returns (case proc-address-above-driver); the lab accepts \
                      CUDA_ERROR_INVALID_VALUE there. \
                      H200: on driver 580.159 (2026-12-02), both lookups succeed, at different addresses: 3020 gives the export cuCtxCreate_v2, 13000 gives cuCtxCreate_v4 (the CUctxCreateParams* signature).",
        fix: "Declare each function with the version of the PFN_<name>_v<version> typedef whose signature you copy \
              (interop's table: cuCtxCreate @ 3020), never the driver's version or CUDA_VERSION; check the table \
              against the headers (tests/interop_headers.rs).",
    },
    Case {
        name: "ptsz-at-4000",
        call: "cuGetProcAddress(\"cuLaunchKernel\", 4000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM): \
               per-thread semantics before the _ptsz exports existed",
        needs: Needs::Driver,
        isolated: false,
        expected: &[
            Expect::Status(CUdriverProcAddressQueryResult::VERSION_NOT_SUFFICIENT),
            Expect::Status(CUdriverProcAddressQueryResult::SUCCESS),
        ],
        explanation: "The per-thread-default-stream exports appeared in CUDA 7.0, for the launch and for the other \
                      stream-ordered functions alike: cudaTypedefs.h has PFN_cuLaunchKernel_v7000_ptsz (the legacy one \
                      PFN_cuLaunchKernel_v4000), and PFN_cuGraphicsMapResources_v7000_ptsz and \
                      PFN_cuGraphicsUnmapResources_v7000_ptsz (legacy _v3000) for the map and the unmap. Asking for \
                      per-thread semantics at 4000 asks for something that did not exist then; interop asks every \
                      _ptsz/_ptds entry at 7000 or later (interop::driver::entry::PER_THREAD_VERSION). The detail names the \
                      export the returned address is, and what 7000 gives. Reference (cuGetProcAddress): \
                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM “will enable the search for all driver symbols \
                      that match the requested driver symbol name including the per-thread versions.” [cuda.h: \
                      cuGetProcAddress] and “If a per-thread version is not found, the API will return the legacy \
                      version of the driver function.” [cuda.h: cuGetProcAddress] That allows \
                      CU_GET_PROC_ADDRESS_SUCCESS with the legacy cuLaunchKernel (its null stream then silently means \
                      the legacy stream), while the version rule (pfn NULL when “no ABI compatible driver function \
                      exists for the specified cudaVersion” [cuda.h: cuGetProcAddress]) gives \
                      CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, which an earlier version of this table saw on driver \
                      580. \
                      H200: on driver 580.159 (2026-12-02), CUDA_SUCCESS with symbolStatus VERSION_NOT_SUFFICIENT and a null pointer at 4000 (no fallback to the legacy export); at 7000 the per-thread lookup gives cuLaunchKernel_ptsz.",
        fix: "Ask a _ptsz/_ptds variant at the version of its own typedef (7000 or later), and check that the lookup \
              resolved the per-thread export (the --trace field \"export\" shows cuLaunchKernel_ptsz).",
    },
    Case {
        name: "ptx-version-too-new",
        call: "cuModuleLoadDataEx of PTX with `.version 99.0`",
        needs: Needs::Context,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION)],
        explanation: "PTX is compiled by the driver's JIT at load time, and the JIT refuses a PTX ISA version newer \
                      than it knows; the JIT error log says why. It is the classic symptom of PTX built with a newer \
                      toolkit than the driver. Reference (cuModuleLoadDataEx): its returns list \
                      “CUDA_ERROR_INVALID_PTX, CUDA_ERROR_UNSUPPORTED_PTX_VERSION” [cuda.h: cuModuleLoadDataEx], and \
                      that code \"indicates that the provided PTX was compiled with an unsupported toolchain\". \
                      H200: 222 CUDA_ERROR_UNSUPPORTED_PTX_VERSION, JIT log \"Unsupported .version 99.0; current version is '9.0'\" (driver 580, CUDA 13.0, knows PTX ISA 9.0).",
        fix: "Generate PTX with a toolkit no newer than the oldest driver you support (kernels/nbody.ptx is ISA 7.8), \
              or ship a cubin/fatbin for the target GPUs; always print the JIT error log.",
    },
    Case {
        name: "elapsed-time-not-ready",
        call: "cuEventElapsedTime(start, end) before `end` has completed (a 100 ms spin kernel between them)",
        needs: Needs::Context,
        isolated: false,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_NOT_READY)],
        explanation: "An event gets its GPU timestamp when the stream reaches it; until then there is no time to \
                      subtract — not a failure of the work. interop's Event::elapsed_ms turns this code into Ok(None), \
                      so the lab calls the raw Api method to show the real code. Reference (cuEventElapsedTime): “If \
                      cuEventRecord() has been called on both events but one or both of them has not yet been \
                      completed … CUDA_ERROR_NOT_READY is returned.” [cuda.h: cuEventElapsedTime] \
                      H200: 600 CUDA_ERROR_NOT_READY; after cuEventSynchronize(end) the elapsed time was 100.0 ms, the spin's length (an event's time is the GPU's clock when the stream reaches it, so host work between the records counts too: with the spin's PTX loaded between the records it read 116.8 ms).",
        fix: "Wait for the end event (cuEventSynchronize, or poll cuEventQuery) before cuEventElapsedTime; in a frame \
              loop read the events of an earlier frame instead of stalling.",
    },
    Case {
        name: "map-stream-mismatch",
        call: "map on stream A, cuMemsetD32Async through the mapped pointer on stream B (behind a 20 ms spin kernel, \
               not ordered with A), unmap on A, then glGetBufferSubData",
        needs: Needs::GlInterop,
        isolated: true,
        expected: &[Expect::Silent(Data::Stale), Expect::Silent(Data::Garbled), Expect::Silent(Data::Current)],
        explanation: "The map and the unmap order GL with the stream they are given: GL work before the map finishes \
                      before later work on A, and work on A before the unmap finishes before later GL work. A write on \
                      another stream B, ordered with neither, may land after the unmap has handed the buffer back to \
                      GL. What is needed is ordering, not one stream: B's work is covered once B waits for an event \
                      recorded on A after the map and A waits, before the unmap, for an event recorded on B after the \
                      write (the wait is then work issued in A before the unmap); this case leaves B unordered. Every \
                      call returns CUDA_SUCCESS; it is a race, and GL may read the old contents \
                      (SUCCESS_BUT_STALE_DATA), part of the write (SUCCESS_BUT_GARBLED_DATA) or all of it \
                      (SUCCESS_WITH_CURRENT_DATA, if the driver orders more than it promises). The spin kernel on B \
                      widens the window; the detail shows what GL read and what it reads after cuStreamSynchronize(B). \
                      interop's Mapping unmaps on the stream it mapped on, but a launch on another stream through its \
                      pointer still compiles. The case runs in a child process because the late write goes to memory \
                      that is no longer mapped. Reference (cuGraphicsUnmapResources): “This function provides the \
                      synchronization guarantee that any CUDA work issued in stream before cuGraphicsUnmapResources() \
                      will complete before any subsequently issued graphics work begins.” [cuda.h: \
                      cuGraphicsUnmapResources] (cuGraphicsMapResources): “any graphics calls issued before \
                      cuGraphicsMapResources() will complete before any subsequent CUDA work issued in stream begins.” \
                      [cuda.h: cuGraphicsMapResources] Both name the stream passed in; work on another stream is \
                      covered only as far as it is ordered with that one. \
                      H200: on driver 580.159 (2026-12-02), every call succeeded and GL read the old contents, both right after the unmap and after stream B had finished its write. The lab reads only what GL sees; where B's write went was not checked.",
        fix: "Map, launch and unmap on one stream (pass the Mapping's stream to the launch), or order the other \
              stream between them: after the map, cuEventRecord on A and cuStreamWaitEvent on B; after B's last \
              write, cuEventRecord on B and cuStreamWaitEvent on A, then the unmap on A.",
    },
    Case {
        name: "gl-read-while-mapped",
        call: "glGetBufferSubData of a buffer while CUDA holds it mapped (after a cuMemsetD32Async through the mapped \
               pointer completed)",
        needs: Needs::GlInterop,
        isolated: true,
        expected: &[Expect::Silent(Data::Stale), Expect::Silent(Data::Garbled), Expect::Silent(Data::Current)],
        explanation: "While a buffer is mapped it is CUDA's: a GL read then is ordered with nothing CUDA does and need \
                      not see CUDA's memory at all. This project's renderer never reads a mapped buffer (in step mode \
                      it draws a copy taken before the map). The lab writes a pattern through the mapped pointer, \
                      waits for the stream, reads with glGetBufferSubData before the unmap (glGetError is in the \
                      detail), and again after it. Every CUDA call returns CUDA_SUCCESS; what GL read decides: \
                      SUCCESS_BUT_STALE_DATA, SUCCESS_BUT_GARBLED_DATA or SUCCESS_WITH_CURRENT_DATA — any of them is \
                      allowed, the result is undefined. It runs in a child process in case the GL driver does not \
                      survive it. Reference (cuGraphicsMapResources): “The graphics API from which resources were \
                      registered should not access any resources while they are mapped by CUDA.” [cuda.h: \
                      cuGraphicsMapResources] and “If an application does so, the results are undefined.” [cuda.h: \
                      cuGraphicsMapResources] \
                      H200: on driver 580.159 (2026-12-02), GL read what CUDA wrote, while mapped and after the unmap. That is what this driver did once; another GPU or driver may differ, as the reference's \"undefined\" allows.",
        fix: "Let GL touch the buffer only after the unmap (drop the Mapping first); if GL must draw while CUDA works \
              on it, draw a copy taken before the map (as step mode does) or double-buffer.",
    },
    Case {
        name: "write-read-only-registered",
        call: "register with CU_GRAPHICS_REGISTER_FLAGS_READ_ONLY, map, cuMemsetD32Async through the pointer, unmap, \
               then glGetBufferSubData",
        needs: Needs::GlInterop,
        isolated: true,
        expected: &[Expect::Silent(Data::Stale), Expect::Silent(Data::Current)],
        explanation: "READ_ONLY is the application's promise, for as long as the buffer stays registered, that CUDA \
                      will not write. The lab breaks it: it writes through the mapped pointer, unmaps and reads the \
                      buffer back in GL. Every call returns CUDA_SUCCESS; what GL reads decides: \
                      SUCCESS_BUT_STALE_DATA when the writes did not reach GL's buffer, SUCCESS_WITH_CURRENT_DATA when \
                      they did. interop passes the register flags through (GraphicsResource::register_gl_buffer), and \
                      a write through the pointer of a read-only resource compiles. It runs in a child process in case \
                      the write faults (an error that would spoil the context for the cases after it). Reference \
                      (cuGraphicsGLRegisterBuffer): “CU_GRAPHICS_REGISTER_FLAGS_READ_ONLY: Specifies that CUDA will \
                      not write to this resource.” [cudaGL.h: cuGraphicsGLRegisterBuffer] It does not say what a write \
                      that breaks the promise does. \
                      H200: on driver 580.159 (2026-12-02), every call succeeded and GL read the old contents after the unmap: the writes did not show in GL's buffer.",
        fix: "Register READ_ONLY only buffers CUDA never writes (the renderer's source, never the kernel's output); \
              a buffer the kernel overwrites entirely is WRITE_DISCARD, anything else NONE.",
    },
];
