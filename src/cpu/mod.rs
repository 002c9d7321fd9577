//! Pure-CPU code: the f64 reference used to check every kernel, and the
//! multi-threaded fallback used when there is no GPU.

pub mod backend;
pub mod oracle;
