//! A driver client for `--uri`, or for `--host`/`--port` and the authentication flags.

use crate::cli::Connection;
use anyhow::Context;
use mongodb::options::{ClientOptions, ServerAddress};
use mongodb::Client;

pub async fn client(c: &Connection) -> anyhow::Result<Client> {
    let mut options = match &c.uri {
        Some(uri) => ClientOptions::parse(uri)
            .await
            .with_context(|| format!("error parsing --uri {uri}"))?,
        None => {
            let address = if c.host.contains(':') && !c.host.starts_with('[') {
                ServerAddress::parse(&c.host)
            } else {
                ServerAddress::parse(format!("{}:{}", c.host, c.port))
            }
            .with_context(|| format!("error parsing --host {}", c.host))?;
            let mut o = ClientOptions::default();
            o.hosts = vec![address];
            o.direct_connection = Some(true);
            o
        }
    };
    if let Some(user) = &c.username {
        let mut cred = options.credential.take().unwrap_or_default();
        cred.username = Some(user.clone());
        cred.password = c.password.clone();
        if let Some(db) = &c.authentication_database {
            cred.source = Some(db.clone());
        }
        options.credential = Some(cred);
    } else if let (Some(db), Some(cred)) = (&c.authentication_database, &mut options.credential) {
        cred.source = Some(db.clone());
    }
    options.app_name = Some("hourglass-tools".to_string());
    let client = Client::with_options(options).context("error connecting")?;
    client
        .database("admin")
        .run_command(bson::doc! {"ping": 1})
        .await
        .context("error connecting to the server")?;
    Ok(client)
}

/// The database of `--db` (default `test`) or of the connection string.
pub fn database_name(c: &Connection) -> String {
    if let Some(db) = &c.db {
        return db.clone();
    }
    c.uri
        .as_deref()
        .and_then(uri_database)
        .unwrap_or_else(|| "test".to_string())
}

fn uri_database(uri: &str) -> Option<String> {
    let rest = uri.split_once("://")?.1;
    let path = rest.split_once('/')?.1;
    let db = path.split('?').next()?;
    (!db.is_empty()).then(|| db.to_string())
}
