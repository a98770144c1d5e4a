//! The time field of a time-series import, turned into a BSON date from what the input
//! holds: RFC 3339 text, epoch seconds/milliseconds/microseconds/nanoseconds, or text in a
//! strftime format (`--timeFormat`).

use super::typed::parse_date;
use bson::{Bson, DateTime, Document};

#[derive(Debug, Clone, PartialEq)]
pub enum TimeFormat {
    /// RFC 3339 (or `YYYY-MM-DD[ HH:MM:SS[.f]]` as UTC) text; epoch numbers whose unit is
    /// told by their size.
    Auto,
    Rfc3339,
    /// Nanoseconds per unit of an epoch number.
    Epoch(i64),
    Strftime(String),
}

impl TimeFormat {
    pub fn parse(s: &str) -> TimeFormat {
        match s {
            "auto" => TimeFormat::Auto,
            "rfc3339" | "iso8601" => TimeFormat::Rfc3339,
            "epoch_s" | "epoch" | "s" => TimeFormat::Epoch(1_000_000_000),
            "epoch_ms" | "ms" => TimeFormat::Epoch(1_000_000),
            "epoch_us" | "us" => TimeFormat::Epoch(1_000),
            "epoch_ns" | "ns" => TimeFormat::Epoch(1),
            other => TimeFormat::Strftime(other.to_string()),
        }
    }
}

pub struct TimeField {
    name: String,
    format: TimeFormat,
}

impl TimeField {
    pub fn new(name: &str, format: &str) -> anyhow::Result<TimeField> {
        let format = TimeFormat::parse(format);
        if let TimeFormat::Strftime(f) = &format {
            if !f.contains('%') {
                anyhow::bail!(
                    "invalid --timeFormat '{f}': expected auto, rfc3339, epoch_s, epoch_ms, epoch_us, epoch_ns or a strftime format"
                );
            }
        }
        Ok(TimeField {
            name: name.to_string(),
            format,
        })
    }

    /// The (top-level) field that holds the time.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Replaces the document's time value with a date.
    pub fn convert(&self, doc: &mut Document) -> Result<(), String> {
        let Some(value) = doc.get_mut(&self.name) else {
            return Err(self.missing());
        };
        *value = self.date(value)?;
        Ok(())
    }

    /// The error of a row without the time field.
    pub fn missing(&self) -> String {
        format!("no time field '{}'", self.name)
    }

    /// `value` as a date.
    pub fn date(&self, value: &Bson) -> Result<Bson, String> {
        if matches!(value, Bson::DateTime(_)) {
            return Ok(value.clone());
        }
        to_date(value, &self.format)
            .map(Bson::DateTime)
            .ok_or_else(|| {
                format!(
                    "cannot read {} as a time for field '{}'",
                    value.clone().into_relaxed_extjson(),
                    self.name
                )
            })
    }
}

fn to_date(v: &Bson, format: &TimeFormat) -> Option<DateTime> {
    let number = match v {
        Bson::Int32(i) => Some(*i as f64),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        Bson::String(s) if matches!(format, TimeFormat::Epoch(_) | TimeFormat::Auto) => {
            s.trim().parse::<f64>().ok()
        }
        _ => None,
    };
    if let Some(n) = number {
        let unit_ns = match format {
            TimeFormat::Epoch(u) => *u,
            TimeFormat::Auto => auto_unit(n),
            _ => return None,
        };
        let ms = n * unit_ns as f64 / 1e6;
        if !ms.is_finite() || ms.abs() > 8.64e15 {
            return None;
        }
        // Exact for integers: floats only for fractional epochs.
        let ms = match v {
            Bson::Int64(i) if unit_ns >= 1_000_000 => i.checked_mul(unit_ns / 1_000_000)?,
            Bson::Int64(i) => i.div_euclid(1_000_000 / unit_ns),
            _ => ms.floor() as i64,
        };
        return Some(DateTime::from_millis(ms));
    }
    let Bson::String(s) = v else { return None };
    let s = s.trim();
    match format {
        TimeFormat::Rfc3339 => rfc3339(s),
        TimeFormat::Auto => rfc3339(s).or_else(|| {
            ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d"]
                .iter()
                .find_map(|f| parse_date(s, f))
        }),
        TimeFormat::Strftime(f) => parse_date(s, f),
        TimeFormat::Epoch(_) => None,
    }
}

fn rfc3339(s: &str) -> Option<DateTime> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| DateTime::from_millis(t.timestamp_millis()))
}

/// The unit of an epoch number by its size: seconds up to 1e11 (year 5138), then
/// milliseconds, microseconds, nanoseconds.
fn auto_unit(n: f64) -> i64 {
    match n.abs() {
        a if a < 1e11 => 1_000_000_000,
        a if a < 1e14 => 1_000_000,
        a if a < 1e17 => 1_000,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    const T: i64 = 1_451_606_400_000; // 2016-01-01T00:00:00Z

    fn conv(v: Bson, format: &str) -> Result<Bson, String> {
        let mut d = doc! {"t": v};
        TimeField::new("t", format)
            .map_err(|e| e.to_string())?
            .convert(&mut d)?;
        Ok(d.get("t").cloned().unwrap_or(Bson::Null))
    }

    #[test]
    fn epoch_numbers_of_every_unit_become_the_same_date() {
        let want = Ok(Bson::DateTime(DateTime::from_millis(T)));
        assert_eq!(conv(Bson::Int64(T / 1000), "epoch_s"), want);
        assert_eq!(conv(Bson::Int64(T), "epoch_ms"), want);
        assert_eq!(conv(Bson::Int64(T * 1000), "epoch_us"), want);
        assert_eq!(conv(Bson::Int64(T * 1_000_000), "epoch_ns"), want);
        for v in [T / 1000, T, T * 1000, T * 1_000_000] {
            assert_eq!(conv(Bson::Int64(v), "auto"), want, "{v}");
        }
        assert_eq!(conv(Bson::String(T.to_string()), "epoch_ms"), want);
    }

    #[test]
    fn text_times_read_as_rfc3339_or_a_format() {
        let want = Ok(Bson::DateTime(DateTime::from_millis(T + 1500)));
        assert_eq!(conv("2016-01-01T00:00:01.5Z".into(), "auto"), want);
        assert_eq!(
            conv("2016-01-01T01:00:01.500+01:00".into(), "rfc3339"),
            want
        );
        assert_eq!(conv("2016-01-01 00:00:01.5".into(), "auto"), want);
        assert_eq!(
            conv("01/01/2016 00:00:01.5".into(), "%d/%m/%Y %H:%M:%S%.f"),
            want
        );
        assert!(conv("yesterday".into(), "auto").is_err());
        assert!(conv(Bson::Int64(T), "rfc3339").is_err());
    }
}
