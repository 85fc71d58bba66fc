//! Shared by the JIVE fuzz targets.

/// Number of parameters of a descriptor such as `(IIB)V` when all are
/// int-like, else `None`.
pub fn int_params(descriptor: &str) -> Option<usize> {
    let params = descriptor.strip_prefix('(')?.split(')').next()?;
    params
        .chars()
        .all(|c| matches!(c, 'I' | 'S' | 'B' | 'Z'))
        .then_some(params.len())
}
