//! Server parameters (`--setParameter`, `getParameter`, `setParameter`): a fixed table of
//! known names with typed defaults; unknown names are rejected as MongoDB does.

use bson::{doc, Bson, Document};
use parking_lot::RwLock;
use std::collections::BTreeMap;

/// Known parameters and their defaults.
fn defaults() -> BTreeMap<&'static str, Bson> {
    BTreeMap::from([
        (
            "featureCompatibilityVersion",
            Bson::Document(doc! {"version": "7.0"}),
        ),
        ("cursorTimeoutMillis", Bson::Int64(600_000)),
        // An open transaction older than this is aborted.
        ("transactionLifetimeLimitSeconds", Bson::Int32(60)),
        ("ttlMonitorSleepSecs", Bson::Int32(60)),
        ("ttlMonitorEnabled", Bson::Boolean(true)),
        // The archive mover (time-series `archive` rules): seconds between passes, and
        // the buckets one pass over a collection moves at most (a pass that leaves more
        // runs again at once).
        ("archiveMoverIntervalSecs", Bson::Int32(60)),
        ("archiveMoverMaxBucketsPerPass", Bson::Int32(1000)),
        ("timeseriesBucketMaxCount", Bson::Int32(1000)),
        ("timeseriesBucketMaxSize", Bson::Int32(125 * 1024)),
        // MongoDB's rule: 0 or less is 5% of the machine's memory, 1 to 100 a percentage
        // of it, more a number of bytes (see `idle_bucket_threshold_bytes`).
        (
            "timeseriesIdleBucketExpiryMemoryUsageThreshold",
            Bson::Int64(0),
        ),
        ("logLevel", Bson::Int32(0)),
        // A frame whose bytes stop arriving for this long closes its connection.
        ("frameReadTimeoutMillis", Bson::Int64(30_000)),
        // Memory all requests in flight may hold together (frames and their decoded
        // documents, estimated at 4x the frame); larger requests wait. Startup only.
        ("maxInFlightRequestBytes", Bson::Int64(1 << 30)),
        ("quiet", Bson::Boolean(false)),
        ("maxBSONObjectSize", Bson::Int32(16 * 1024 * 1024)),
        (
            "internalQueryMaxBlockingSortMemoryUsageBytes",
            Bson::Int64(100 * 1024 * 1024),
        ),
        (
            "internalDocumentSourceGroupMaxMemoryBytes",
            Bson::Int64(100 * 1024 * 1024),
        ),
        // Whether a command that does not say `allowDiskUse` may spill blocking stages to
        // files under the dbpath (MongoDB 6.0 and later: yes).
        ("allowDiskUseByDefault", Bson::Boolean(true)),
        // The HTTP writes (InfluxDB line protocol, Prometheus remote write): whether a
        // write to an unknown database creates it (else 404, as InfluxDB answers), the
        // granularity of the time-series collections they create, and the largest body
        // (InfluxDB's `max-body-size`).
        ("httpAutoCreateDatabase", Bson::Boolean(false)),
        ("httpIngestGranularity", Bson::String("seconds".into())),
        ("httpMaxBodyBytes", Bson::Int64(25_000_000)),
        // Authentication: PBKDF2 rounds of new credentials (MongoDB's defaults and
        // minimum 5000), the localhost exception, and how long a failed attempt waits
        // before its reply (on the connection's task, not a server thread).
        ("scramIterationCount", Bson::Int32(10_000)),
        ("scramSHA256IterationCount", Bson::Int32(15_000)),
        ("enableLocalhostAuthBypass", Bson::Boolean(true)),
        // Reported as every mongod does (the drivers' test runners read it). No test-only
        // command exists here, so turning it on at startup adds none.
        ("enableTestCommands", Bson::Boolean(false)),
        ("authFailedDelayMs", Bson::Int32(100)),
    ])
}

/// Physical memory of the machine (MemTotal), 0 when unknown.
pub fn system_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// `timeseriesIdleBucketExpiryMemoryUsageThreshold` in bytes, by MongoDB's rule: a value of
/// 0 or less means 5% of the machine's memory, 1 to 100 that percentage of it, and a
/// larger value a number of bytes.
pub fn idle_bucket_threshold_bytes(value: i64) -> usize {
    let memory = system_memory_bytes().max(1 << 30);
    let bytes = match value {
        i64::MIN..=0 => memory / 20,
        1..=100 => memory / 100 * value as u64,
        _ => value as u64,
    };
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// Parameters a client may not change at run time.
const READ_ONLY: &[&str] = &[
    "enableLocalhostAuthBypass",
    "enableTestCommands",
    "featureCompatibilityVersion",
    "maxBSONObjectSize",
    "maxInFlightRequestBytes",
];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParamError {
    #[error("attempted to set unrecognized parameter [{0}], use help:true to see options")]
    Unknown(String),
    #[error("Invalid value for parameter {name}: {reason}")]
    BadValue { name: String, reason: String },
    #[error("not allowed to change [{0}] at runtime")]
    ReadOnly(String),
}

pub struct Parameters {
    values: RwLock<BTreeMap<&'static str, Bson>>,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            values: RwLock::new(defaults()),
        }
    }
}

impl Parameters {
    fn coerce(name: &str, current: &Bson, value: &Bson) -> Result<Bson, ParamError> {
        let bad = |reason: &str| ParamError::BadValue {
            name: name.to_string(),
            reason: reason.to_string(),
        };
        let as_i64 = match value {
            Bson::Int32(i) => Some(i64::from(*i)),
            Bson::Int64(i) => Some(*i),
            Bson::Double(d) if d.fract() == 0.0 => Some(*d as i64),
            Bson::String(s) => s.trim().parse::<i64>().ok(),
            _ => None,
        };
        if name.starts_with("scram") && as_i64.is_some_and(|i| i < 5000) {
            return Err(bad("must be greater than or equal to 5000"));
        }
        if name == "authFailedDelayMs" && as_i64.is_some_and(|i| !(0..=5000).contains(&i)) {
            return Err(bad("must be between 0 and 5000"));
        }
        if name.starts_with("archiveMover") && as_i64.is_some_and(|i| i < 1) {
            return Err(bad("must be greater than or equal to 1"));
        }
        match current {
            Bson::Int32(_) => as_i64
                .and_then(|i| i32::try_from(i).ok())
                .map(Bson::Int32)
                .ok_or_else(|| bad("expected a 32-bit integer")),
            Bson::Int64(_) => as_i64
                .map(Bson::Int64)
                .ok_or_else(|| bad("expected an integer")),
            Bson::Boolean(_) => match value {
                Bson::Boolean(b) => Ok(Bson::Boolean(*b)),
                Bson::String(s) if s == "true" || s == "1" => Ok(Bson::Boolean(true)),
                Bson::String(s) if s == "false" || s == "0" => Ok(Bson::Boolean(false)),
                Bson::Int32(i) => Ok(Bson::Boolean(*i != 0)),
                _ => Err(bad("expected a boolean")),
            },
            Bson::String(_) => match value {
                Bson::String(v) if name != "httpIngestGranularity" => Ok(Bson::String(v.clone())),
                Bson::String(v) if ["seconds", "minutes", "hours"].contains(&v.as_str()) => {
                    Ok(Bson::String(v.clone()))
                }
                _ => Err(bad("expected one of \"seconds\", \"minutes\", \"hours\"")),
            },
            _ => Ok(value.clone()),
        }
    }

    /// Sets `name` (from the command line or `setParameter`); returns the previous value.
    pub fn set(&self, name: &str, value: &Bson, at_startup: bool) -> Result<Bson, ParamError> {
        let mut values = self.values.write();
        let Some((key, current)) = values.get_key_value(name).map(|(k, v)| (*k, v.clone())) else {
            return Err(ParamError::Unknown(name.to_string()));
        };
        if !at_startup && READ_ONLY.contains(&key) {
            return Err(ParamError::ReadOnly(name.to_string()));
        }
        let new = Self::coerce(name, &current, value)?;
        values.insert(key, new);
        Ok(current)
    }

    pub fn get(&self, name: &str) -> Option<Bson> {
        self.values.read().get(name).cloned()
    }

    /// The parameter as an integer (for numeric settings), or `default`.
    pub fn get_i64(&self, name: &str, default: i64) -> i64 {
        match self.get(name) {
            Some(Bson::Int32(i)) => i64::from(i),
            Some(Bson::Int64(i)) => i,
            _ => default,
        }
    }

    /// The parameter as a boolean, or `default`.
    pub fn get_bool(&self, name: &str, default: bool) -> bool {
        match self.get(name) {
            Some(Bson::Boolean(b)) => b,
            _ => default,
        }
    }

    /// The parameter as a string, or `default`.
    pub fn get_string(&self, name: &str, default: &str) -> String {
        match self.get(name) {
            Some(Bson::String(s)) => s,
            _ => default.to_string(),
        }
    }

    /// Every parameter, for `getParameter: "*"`.
    pub fn all(&self) -> Document {
        self.values
            .read()
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_coerces_to_the_parameter_type_and_rejects_unknown_names() {
        let p = Parameters::default();
        p.set("ttlMonitorSleepSecs", &Bson::String("1".into()), true)
            .unwrap();
        assert_eq!(p.get("ttlMonitorSleepSecs"), Some(Bson::Int32(1)));
        assert!(matches!(
            p.set("nope", &Bson::Int32(1), true),
            Err(ParamError::Unknown(_))
        ));
        assert!(p
            .set("ttlMonitorSleepSecs", &Bson::String("x".into()), false)
            .is_err());
        assert!(p
            .set("featureCompatibilityVersion", &Bson::Int32(1), false)
            .is_err());
    }
}
