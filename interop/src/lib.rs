//! CUDA driver API loaded at run time (in progress).
