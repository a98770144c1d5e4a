//! Approximate memory accounting for blocking stages and the per-stage limit
//! (MongoDB's 100 MB default; error 292 without `allowDiskUse`).

use bson::{Bson, Document};

use crate::error::QueryError;

/// Bytes a value takes in place (the `Bson` enum itself).
const VALUE: u64 = std::mem::size_of::<Bson>() as u64;

/// Bytes a document field takes besides its value and name bytes: the key's `String`
/// header and the map's hash and index slots.
const FIELD: u64 = std::mem::size_of::<String>() as u64 + 16;

/// Approximate in-memory size of a value in bytes: what the allocator really holds, so
/// that a 100 MB limit is hit near 100 MB of process memory.
pub fn approx_size(v: &Bson) -> u64 {
    VALUE
        + match v {
            Bson::String(s) => s.len() as u64,
            Bson::Document(d) => doc_size(d),
            Bson::Array(a) => a.iter().map(approx_size).sum(),
            Bson::Binary(b) => b.bytes.len() as u64,
            Bson::RegularExpression(r) => (r.pattern.len() + r.options.len()) as u64,
            Bson::JavaScriptCode(c) => c.len() as u64,
            _ => 8,
        }
}

/// Approximate in-memory size of a document in bytes.
pub fn doc_size(d: &Document) -> u64 {
    64 + d
        .iter()
        .map(|(k, v)| FIELD + k.len() as u64 + approx_size(v))
        .sum::<u64>()
}

/// Memory limits of one pipeline run.
#[derive(Debug, Clone, Copy)]
pub struct MemLimits {
    /// Bytes a `$group`-like stage may hold (`internalDocumentSourceGroupMaxMemoryBytes`).
    pub group_bytes: u64,
    /// Bytes a blocking `$sort` may hold (`internalQueryMaxBlockingSortMemoryUsageBytes`).
    pub sort_bytes: u64,
    /// Whether blocking stages may use the disk (`allowDiskUse`, by default
    /// `allowDiskUseByDefault`): `$sort` and `$group` then spill past their limits
    /// (see the `spill` module); the stages that cannot spill hold up to a ceiling.
    pub allow_disk_use: bool,
}

/// MongoDB's default per-stage limit: 100 MB.
pub const DEFAULT_LIMIT: u64 = 100 * 1024 * 1024;

impl Default for MemLimits {
    fn default() -> Self {
        MemLimits {
            group_bytes: DEFAULT_LIMIT,
            sort_bytes: DEFAULT_LIMIT,
            allow_disk_use: false,
        }
    }
}

/// What a stage that cannot spill may hold with `allowDiskUse: true` (`$bucketAuto`,
/// `$setWindowFields`, `$facet`, a top-k sort, a group's held states, a sort run without a
/// spill directory): the per-stage limit lifted up to this ceiling (10x the limit, at
/// least 1 GiB) instead of letting one query take all the memory; past it the stage fails
/// with 146 ExceededMemoryLimit, as MongoDB's stages that cannot spill do.
fn disk_use_ceiling(limit: u64) -> u64 {
    limit.saturating_mul(10).max(1 << 30)
}

fn cannot_spill(stage: &str, used: u64, limit: u64) -> QueryError {
    QueryError::Coded(146, format!("{stage} used {used} bytes, more than it may hold in memory even with allowDiskUse ({limit} bytes), and cannot spill to disk"),
    )
}

impl MemLimits {
    /// Fails with code 292 when a grouping stage holds more than its limit (146 past the
    /// ceiling with `allowDiskUse`).
    pub fn check_group(&self, stage: &str, used: u64) -> Result<(), QueryError> {
        if used <= self.group_bytes {
            return Ok(());
        }
        if self.allow_disk_use {
            let ceiling = disk_use_ceiling(self.group_bytes);
            return if used <= ceiling {
                Ok(())
            } else {
                Err(cannot_spill(stage, used, ceiling))
            };
        }
        Err(QueryError::QueryExceededMemoryLimitNoDiskUseAllowed(
            format!("Exceeded memory limit for {stage}, but didn't allow external sort. Pass allowDiskUse:true to opt in."),
        ))
    }

    /// Fails with code 292 when a blocking sort holds more than its limit (146 past the
    /// ceiling with `allowDiskUse`).
    pub fn check_sort(&self, used: u64) -> Result<(), QueryError> {
        if used <= self.sort_bytes {
            return Ok(());
        }
        if self.allow_disk_use {
            let ceiling = disk_use_ceiling(self.sort_bytes);
            return if used <= ceiling {
                Ok(())
            } else {
                Err(cannot_spill("$sort", used, ceiling))
            };
        }
        Err(QueryError::QueryExceededMemoryLimitNoDiskUseAllowed(
            format!(
                "Sort exceeded memory limit of {} bytes, but did not opt in to external sorting.",
                self.sort_bytes
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_disk_use_lifts_the_limit_up_to_a_ceiling_then_fails_with_146() {
        let tight = MemLimits {
            group_bytes: 1000,
            sort_bytes: 1000,
            allow_disk_use: false,
        };
        assert_eq!(tight.check_group("$group", 2000).unwrap_err().code(), 292);
        let opted = MemLimits {
            allow_disk_use: true,
            ..tight
        };
        assert!(opted.check_group("$group", 2000).is_ok());
        assert!(opted.check_sort(1 << 29).is_ok());
        assert_eq!(
            opted
                .check_group("$group", (1 << 30) + 1)
                .unwrap_err()
                .code(),
            146
        );
        assert_eq!(opted.check_sort((1 << 30) + 1).unwrap_err().code(), 146);
    }
}
