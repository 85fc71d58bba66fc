//! Sizes on the command line: `8`, `64`, `1K`, `4KiB`, `16M`, `4G`.

/// Parses a message size: a plain number of bytes or one with a `K`/`KiB`
/// or `M`/`MiB` suffix (binary multiples): `8`, `64`, `1K`, `4KiB`, `64K`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mult) = if let Some(n) = lower
        .strip_suffix("kib")
        .or_else(|| lower.strip_suffix("kb"))
        .or_else(|| lower.strip_suffix('k'))
    {
        (n, 1024)
    } else if let Some(n) = lower
        .strip_suffix("mib")
        .or_else(|| lower.strip_suffix("mb"))
        .or_else(|| lower.strip_suffix('m'))
    {
        (n, 1024 * 1024)
    } else if let Some(n) = lower
        .strip_suffix("gib")
        .or_else(|| lower.strip_suffix("gb"))
        .or_else(|| lower.strip_suffix('g'))
    {
        (n, 1024 * 1024 * 1024)
    } else if let Some(n) = lower.strip_suffix('b') {
        (n, 1)
    } else {
        (lower.as_str(), 1)
    };
    let v: usize = num
        .trim()
        .parse()
        .map_err(|_| format!("bad size {t:?}: expected e.g. 8, 64, 1K, 4K, 64K"))?;
    let v = v
        .checked_mul(mult)
        .ok_or_else(|| format!("size {t:?} is too large"))?;
    if v == 0 {
        return Err(format!("size {t:?} must be at least 1 byte"));
    }
    Ok(v)
}

/// Formats a size the way `parse_size` reads it back: `64`, `4K`, `64K`.
pub fn fmt_size(n: usize) -> String {
    if n >= 1024 * 1024 && n.is_multiple_of(1024 * 1024) {
        format!("{}M", n / (1024 * 1024))
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{}K", n / 1024)
    } else {
        n.to_string()
    }
}
