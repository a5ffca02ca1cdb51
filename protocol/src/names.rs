//! Names of the objects groundskeeper makes, which are also label values (a Job's name, a task's
//! label): at most 63 characters, cut short with a stable hash so that two long names never
//! collide. The controller makes them, the kubectl plugin finds objects by them.

/// Longest name Kubernetes accepts for an object whose name is also a label value.
pub const MAX_NAME_LEN: usize = 63;

/// `<base><suffix>`, or, when longer than [`MAX_NAME_LEN`], `base` cut short with a hash of the
/// whole of it before the suffix, so that two long names sharing a beginning do not collide.
pub fn bounded_name(base: &str, suffix: &str) -> String {
    if base.len() + suffix.len() <= MAX_NAME_LEN {
        return format!("{base}{suffix}");
    }
    let hash = format!("-{:08x}", fnv1a(base));
    let mut keep = MAX_NAME_LEN.saturating_sub(suffix.len() + hash.len());
    while !base.is_char_boundary(keep) {
        keep -= 1;
    }
    let prefix = base[..keep].trim_end_matches(['-', '.']);
    format!("{prefix}{hash}{suffix}")
}

/// Eight hex digits of a stable hash of `text`, to keep derived names apart.
pub fn name_hash(text: &str) -> String {
    format!("{:08x}", fnv1a(text))
}

/// FNV-1a, 32 bits: stable across versions and platforms, unlike `std`'s hasher.
fn fnv1a(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5_u32, |hash, byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193))
}
