//! mongod's YAML configuration file (`--config FILE`, `-f FILE`): the settings Hourglass
//! has, by mongod's names. Options given on the command line win over the file, as with
//! mongod. An option Hourglass does not know, or one it cannot honour, is an error
//! naming it, so that a setting is never silently dropped.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

/// What a configuration file sets (`None`: not set there).
#[derive(Debug, Default, PartialEq)]
pub struct FileSettings {
    pub port: Option<u16>,
    pub bind_ip: Option<String>,
    pub bind_ip_all: bool,
    pub max_conns: Option<i64>,
    pub http_port: Option<u16>,
    pub db_path: Option<PathBuf>,
    /// `storage.wiredTiger.engineConfig.cacheSizeGB`.
    pub cache_size_gb: Option<f64>,
    pub log_path: Option<PathBuf>,
    pub log_append: bool,
    pub fork: bool,
    pub pid_file_path: Option<PathBuf>,
    pub quiet: bool,
    pub verbosity: u8,
    /// `setParameter` entries, as `name=value`.
    pub set_parameter: Vec<String>,
    /// `security.authorization: enabled`.
    pub auth: bool,
    /// `replication.replSetName`.
    pub repl_set_name: Option<String>,
    pub tls_mode: Option<String>,
    pub tls_certificate_key_file: Option<PathBuf>,
    pub tls_ca_file: Option<PathBuf>,
    pub tls_allow_connections_without_certificates: bool,
    pub tls_disabled_protocols: Option<String>,
}

/// The smallest and largest cache mongod accepts, in GB.
pub const MIN_CACHE_GB: f64 = 0.25;
const MAX_CACHE_GB: f64 = 10_000.0;

/// A cache size in GB, checked against mongod's range.
pub fn cache_size_gb(gb: f64) -> anyhow::Result<f64> {
    if !(MIN_CACHE_GB..=MAX_CACHE_GB).contains(&gb) {
        bail!("cacheSizeGB must be between {MIN_CACHE_GB} and {MAX_CACHE_GB}, got {gb}");
    }
    Ok(gb)
}

/// Reads and checks the file at `path`.
pub fn load(path: &Path) -> anyhow::Result<FileSettings> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    parse(&text).with_context(|| format!("bad config file {}", path.display()))
}

fn parse(text: &str) -> anyhow::Result<FileSettings> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut out = FileSettings::default();
    let Some(root) = docs.into_iter().next() else {
        return Ok(out);
    };
    let mut entries = Vec::new();
    flatten("", &root, &mut entries)?;
    for (key, value) in entries {
        apply(&mut out, &key, &value)?;
    }
    Ok(out)
}

/// Leaves of the tree as (dotted key, value); `setParameter` keeps its entries whole.
fn flatten(prefix: &str, node: &Yaml, out: &mut Vec<(String, Yaml)>) -> anyhow::Result<()> {
    match node {
        Yaml::Hash(h) => {
            for (k, v) in h {
                let Some(k) = k.as_str() else {
                    bail!("option names must be strings, found {k:?}");
                };
                let key = if prefix.is_empty() {
                    k.to_string()
                } else {
                    format!("{prefix}.{k}")
                };
                if key == "setParameter" {
                    out.push((key, v.clone()));
                } else {
                    flatten(&key, v, out)?;
                }
            }
            Ok(())
        }
        Yaml::Null if prefix.is_empty() => Ok(()),
        other => {
            out.push((prefix.to_string(), other.clone()));
            Ok(())
        }
    }
}

fn scalar(key: &str, v: &Yaml) -> anyhow::Result<String> {
    Ok(match v {
        Yaml::String(s) | Yaml::Real(s) => s.clone(),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Boolean(b) => b.to_string(),
        _ => bail!("{key} must be a scalar value"),
    })
}

fn boolean(key: &str, v: &Yaml) -> anyhow::Result<bool> {
    match v {
        Yaml::Boolean(b) => Ok(*b),
        _ => bail!("{key} must be true or false"),
    }
}

fn integer(key: &str, v: &Yaml) -> anyhow::Result<i64> {
    match v {
        Yaml::Integer(i) => Ok(*i),
        _ => bail!("{key} must be an integer"),
    }
}

fn port(key: &str, v: &Yaml) -> anyhow::Result<u16> {
    u16::try_from(integer(key, v)?).with_context(|| format!("{key} must be a port number"))
}

fn apply(out: &mut FileSettings, key: &str, v: &Yaml) -> anyhow::Result<()> {
    match key {
        "net.port" => out.port = Some(port(key, v)?),
        "net.bindIp" => out.bind_ip = Some(scalar(key, v)?),
        "net.bindIpAll" => out.bind_ip_all = boolean(key, v)?,
        "net.maxIncomingConnections" => out.max_conns = Some(integer(key, v)?),
        "net.http.port" => out.http_port = Some(port(key, v)?),
        "storage.dbPath" => out.db_path = Some(PathBuf::from(scalar(key, v)?)),
        "storage.wiredTiger.engineConfig.cacheSizeGB" => {
            let gb = match v {
                Yaml::Integer(i) => *i as f64,
                Yaml::Real(r) => r.parse().with_context(|| format!("{key} must be a number"))?,
                _ => bail!("{key} must be a number"),
            };
            out.cache_size_gb = Some(cache_size_gb(gb)?);
        }
        "replication.replSetName" => out.repl_set_name = Some(scalar(key, v)?),
        "storage.journal.enabled" => {
            if !boolean(key, v)? {
                bail!("storage.journal.enabled: false is not supported (every write is journaled)")
            }
        }
        "systemLog.destination" => match scalar(key, v)?.as_str() {
            "file" => {}
            other => bail!("systemLog.destination: {other} is not supported (use file, or no systemLog to log to standard output)"),
        },
        "systemLog.path" => out.log_path = Some(PathBuf::from(scalar(key, v)?)),
        "systemLog.logAppend" => out.log_append = boolean(key, v)?,
        "systemLog.quiet" => out.quiet = boolean(key, v)?,
        "systemLog.verbosity" => {
            out.verbosity = u8::try_from(integer(key, v)?.clamp(0, 5)).unwrap_or(0)
        }
        "setParameter" => {
            let Yaml::Hash(h) = v else {
                bail!("setParameter must be a map of parameter names to values");
            };
            for (name, value) in h {
                let name = scalar("setParameter", name)?;
                out.set_parameter
                    .push(format!("{name}={}", scalar(&name, value)?));
            }
        }
        "security.authorization" => match scalar(key, v)?.as_str() {
            "disabled" => out.auth = false,
            "enabled" => out.auth = true,
            other => bail!("security.authorization must be enabled or disabled, not '{other}'"),
        },
        "net.tls.mode" | "net.ssl.mode" => out.tls_mode = Some(scalar(key, v)?),
        "net.tls.certificateKeyFile" | "net.ssl.PEMKeyFile" => {
            out.tls_certificate_key_file = Some(PathBuf::from(scalar(key, v)?))
        }
        "net.tls.CAFile" | "net.ssl.CAFile" => out.tls_ca_file = Some(PathBuf::from(scalar(key, v)?)),
        "net.tls.allowConnectionsWithoutCertificates"
        | "net.ssl.allowConnectionsWithoutCertificates" => {
            out.tls_allow_connections_without_certificates = boolean(key, v)?
        }
        "net.tls.disabledProtocols" | "net.ssl.disabledProtocols" => {
            out.tls_disabled_protocols = Some(scalar(key, v)?)
        }
        "processManagement.fork" => out.fork = boolean(key, v)?,
        "processManagement.pidFilePath" => out.pid_file_path = Some(PathBuf::from(scalar(key, v)?)),
        _ => bail!("Unrecognized option: {key}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mongod_settings_are_read_by_their_names() {
        let s = parse(
            "net:\n  port: 27018\n  bindIp: 127.0.0.1,::1\n  maxIncomingConnections: 20\n  http:\n    port: 8086\n\
             storage:\n  dbPath: /tmp/x\n\
             systemLog:\n  destination: file\n  path: /tmp/x.log\n  logAppend: true\n  verbosity: 2\n\
             setParameter:\n  ttlMonitorSleepSecs: 1\n  httpAutoCreateDatabase: true\n\
             processManagement:\n  fork: true\n  pidFilePath: /tmp/x.pid\n",
        )
        .unwrap();
        assert!(s.fork);
        assert_eq!(s.pid_file_path, Some(PathBuf::from("/tmp/x.pid")));
        assert_eq!(s.port, Some(27018));
        assert_eq!(s.bind_ip.as_deref(), Some("127.0.0.1,::1"));
        assert_eq!(s.max_conns, Some(20));
        assert_eq!(s.http_port, Some(8086));
        assert_eq!(s.db_path, Some(PathBuf::from("/tmp/x")));
        assert_eq!(s.log_path, Some(PathBuf::from("/tmp/x.log")));
        assert!(s.log_append);
        assert_eq!(s.verbosity, 2);
        assert_eq!(
            s.set_parameter,
            vec!["ttlMonitorSleepSecs=1", "httpAutoCreateDatabase=true"]
        );
    }

    #[test]
    fn unknown_and_unsupported_options_are_errors_naming_them() {
        let err = |t: &str| format!("{:#}", parse(t).unwrap_err());
        assert!(err("net:\n  prot: 1\n").contains("Unrecognized option: net.prot"));
        assert!(err("security:\n  authorization: maybe\n").contains("security.authorization"));
        assert!(parse("security:\n  authorization: enabled\n").unwrap().auth);
        assert!(err("processManagement:\n  fork: yes please\n").contains("processManagement.fork"));
        assert!(err("net:\n  port: 99999\n").contains("net.port"));
        assert_eq!(parse("").unwrap(), FileSettings::default());
    }

    #[test]
    fn the_cache_size_is_read_in_gb_within_mongods_range() {
        let cache = |t: &str| {
            parse(&format!(
                "storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: {t}\n"
            ))
        };
        assert_eq!(cache("1.5").unwrap().cache_size_gb, Some(1.5));
        assert_eq!(cache("2").unwrap().cache_size_gb, Some(2.0));
        for bad in ["0.1", "20000", "lots"] {
            assert!(
                format!("{:#}", cache(bad).unwrap_err()).contains("cacheSizeGB"),
                "{bad}"
            );
        }
    }
}
