//! The `failCommand` fail point that the drivers' specification tests set with
//! `configureFailPoint` (a test command: only with `enableTestCommands`): the next matching
//! commands fail with an error code, get a `writeConcernError`, wait first
//! (`blockConnection`), or have their connection closed instead of answered.

use crate::error::CommandError;
use bson::{Bson, Document};
use parking_lot::Mutex;

/// How often the fail point fires: always, or the next `n` matching commands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    Off,
    AlwaysOn,
    Times(i64),
}

#[derive(Debug, Clone)]
struct Config {
    mode: Mode,
    commands: Vec<String>,
    error_code: Option<i32>,
    error_labels: Option<Bson>,
    close_connection: bool,
    write_concern_error: Option<Document>,
    block_ms: Option<u64>,
    app_name: Option<String>,
}

/// What a firing fail point does to one command.
#[derive(Debug, Default)]
pub struct Action {
    /// Answer with this error instead of running the command.
    pub error: Option<Document>,
    /// Run the command, then add this to its reply.
    pub write_concern_error: Option<Document>,
    /// Close the connection instead of replying.
    pub close_connection: bool,
}

#[derive(Default)]
pub struct FailCommand {
    config: Mutex<Option<Config>>,
    /// Times the fail point fired since it was last configured.
    entered: std::sync::atomic::AtomicI64,
    /// Whether a configuration is set (commands skip the lock when it is not).
    armed: std::sync::atomic::AtomicBool,
}

impl FailCommand {
    /// `configureFailPoint: "failCommand"` with `mode` and `data`; returns the times the
    /// previous configuration fired.
    pub fn configure(&self, mode: &Bson, data: Option<&Document>) -> Result<i64, CommandError> {
        let mode = match mode {
            Bson::String(s) if s == "off" => Mode::Off,
            Bson::String(s) if s == "alwaysOn" => Mode::AlwaysOn,
            Bson::Document(d) => match d.get("times").and_then(as_i64) {
                Some(n) if n > 0 => Mode::Times(n),
                Some(_) => Mode::Off,
                None => {
                    return Err(CommandError::bad_value(format!(
                    "unsupported fail point mode {d}: expected 'off', 'alwaysOn' or {{times: n}}"
                )))
                }
            },
            other => {
                return Err(CommandError::bad_value(format!(
                    "invalid fail point mode {other}"
                )))
            }
        };
        let config = match (mode, data) {
            (Mode::Off, _) => None,
            (_, None) => return Err(CommandError::bad_value("failCommand needs 'data'")),
            (mode, Some(d)) => Some(parse_data(mode, d)?),
        };
        let before = self.entered.swap(0, std::sync::atomic::Ordering::Relaxed);
        self.armed
            .store(config.is_some(), std::sync::atomic::Ordering::Relaxed);
        *self.config.lock() = config;
        Ok(before)
    }

    /// Whether the fail point is set at all.
    pub fn armed(&self) -> bool {
        self.armed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What the fail point does to command `name` from a client of `app_name`, if it
    /// fires (counting it), and how long to wait first.
    pub fn check(&self, name: &str, app_name: Option<&str>) -> Option<(Action, Option<u64>)> {
        let mut guard = self.config.lock();
        let config = guard.as_mut()?;
        if !config.commands.iter().any(|c| c == name) {
            return None;
        }
        if let Some(app) = &config.app_name {
            if app_name != Some(app.as_str()) {
                return None;
            }
        }
        let fire = config.clone();
        match &mut config.mode {
            Mode::Times(n) => {
                *n -= 1;
                if *n <= 0 {
                    *guard = None;
                    self.armed
                        .store(false, std::sync::atomic::Ordering::Relaxed);
                }
            }
            Mode::AlwaysOn => {}
            Mode::Off => return None,
        }
        drop(guard);
        self.entered
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let error = fire.error_code.map(|code| {
            let mut reply =
                CommandError::new(code, "Failing command via 'failCommand' failpoint").to_reply();
            if let Some(labels) = &fire.error_labels {
                reply.insert("errorLabels", labels.clone());
            }
            reply
        });
        let action = Action {
            error,
            write_concern_error: fire.write_concern_error.clone(),
            close_connection: fire.close_connection,
        };
        Some((action, fire.block_ms))
    }
}

fn as_i64(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 => Some(*d as i64),
        _ => None,
    }
}

fn parse_data(mode: Mode, d: &Document) -> Result<Config, CommandError> {
    let mut c = Config {
        mode,
        commands: Vec::new(),
        error_code: None,
        error_labels: None,
        close_connection: false,
        write_concern_error: None,
        block_ms: None,
        app_name: None,
    };
    let mut block = false;
    for (k, v) in d {
        match k.as_str() {
            "failCommands" => {
                let Bson::Array(a) = v else {
                    return Err(CommandError::bad_value(
                        "'failCommands' must be an array of command names",
                    ));
                };
                c.commands = a
                    .iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect();
            }
            "errorCode" => c.error_code = as_i64(v).and_then(|n| i32::try_from(n).ok()),
            "errorLabels" => c.error_labels = Some(v.clone()),
            "closeConnection" => c.close_connection = v.as_bool().unwrap_or(false),
            "writeConcernError" => c.write_concern_error = v.as_document().cloned(),
            "blockConnection" => block = v.as_bool().unwrap_or(false),
            "blockTimeMS" => c.block_ms = as_i64(v).and_then(|n| u64::try_from(n).ok()),
            "appName" => c.app_name = v.as_str().map(str::to_string),
            // Internal clients do not exist here: nothing to exempt or include.
            "failInternalCommands" => {}
            other => {
                return Err(CommandError::bad_value(format!(
                    "failCommand option '{other}' is not supported by this server"
                )))
            }
        }
    }
    if c.commands.is_empty() {
        return Err(CommandError::bad_value(
            "failCommand needs a non-empty 'failCommands'",
        ));
    }
    if !block {
        c.block_ms = None;
    }
    Ok(c)
}

/// A write concern error as the fail point's data gives it, for a reply.
pub fn write_concern_error(d: &Document) -> Document {
    let mut out = d.clone();
    if !out.contains_key("errmsg") {
        out.insert("errmsg", "");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn times_mode_fires_that_many_times_for_the_named_commands_only() {
        let fp = FailCommand::default();
        let data = doc! {"failCommands": ["insert"], "errorCode": 91};
        assert_eq!(
            fp.configure(&doc! {"times": 2}.into(), Some(&data)).ok(),
            Some(0)
        );
        assert!(fp.check("find", None).is_none());
        for _ in 0..2 {
            let (action, _) = fp.check("insert", None).unwrap_or_default();
            assert_eq!(action.error.and_then(|e| e.get_i32("code").ok()), Some(91));
        }
        assert!(fp.check("insert", None).is_none());
        assert_eq!(fp.configure(&"off".into(), None).ok(), Some(2));
    }
}
