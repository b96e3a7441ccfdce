//! The owner hierarchy: `FRAMEWORK@COMPONENT@PROCESS@DETAIL...` (docs/formats/memscope.md §5.3).
//!
//! The framework segment is dropped before grouping (`CANN@HCCL@x` → `[HCCL, x]`,
//! `PTA@weight` → `[weight]`); the level-1 group is the first remaining segment.

/// Framework labels that open an owner string and are dropped before grouping.
pub const FRAMEWORKS: &[&str] = &[
    "PTA",
    "PTA_WORKSPACE",
    "ATB",
    "MINDSPORE",
    "HAL",
    "HOST",
    "HOST_PINNED",
    "CANN",
];

/// The group name used when an owner has no level below its framework.
pub const UNLABELLED: &str = "(unlabelled)";

/// The framework segment of an owner (`PTA`, `CANN`, ...), if it opens with one.
pub fn framework(owner: &str) -> Option<&str> {
    let first = owner.split('@').next()?;
    FRAMEWORKS.contains(&first).then_some(first)
}

/// The levels of an owner after its framework segment. Empty segments are kept.
pub fn parts(owner: &str) -> Vec<&str> {
    if owner.is_empty() {
        return Vec::new();
    }
    let mut segments: Vec<&str> = owner.split('@').collect();
    if FRAMEWORKS.contains(&segments[0]) {
        segments.remove(0);
    }
    segments
}

/// The level-1 group: the first level after the framework, or [`UNLABELLED`].
pub fn group(owner: &str) -> &str {
    parts(owner).first().copied().unwrap_or(UNLABELLED)
}

/// Level `n` (1-based) after the framework, if present.
pub fn level(owner: &str, n: usize) -> Option<&str> {
    if n == 0 {
        return None;
    }
    parts(owner).get(n - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framework_is_dropped() {
        assert_eq!(parts("CANN@HCCL@x"), vec!["HCCL", "x"]);
        assert_eq!(parts("PTA@weight"), vec!["weight"]);
        assert_eq!(parts("weight@ops"), vec!["weight", "ops"]);
        assert_eq!(group("PTA@fsdp2@all_gather_output@ops"), "fsdp2");
        assert_eq!(group("HAL"), UNLABELLED);
        assert_eq!(group(""), UNLABELLED);
        assert_eq!(level("PTA@vllm@kv_cache@attn", 3), Some("attn"));
        assert_eq!(level("PTA@vllm", 2), None);
        assert_eq!(framework("CANN@APP"), Some("CANN"));
        assert_eq!(framework("weight"), None);
    }
}
