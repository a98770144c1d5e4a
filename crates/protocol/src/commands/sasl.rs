//! Authentication: `saslStart`/`saslContinue` (SCRAM-SHA-1 and SCRAM-SHA-256),
//! `authenticate` (MONGODB-X509), `logout`, and the two handshake hooks `hello` uses:
//! `saslSupportedMechs` and `speculativeAuthenticate`. Every failure inside a conversation
//! reads "Authentication failed." (18), whatever the cause, as in MongoDB.

use super::Request;
use crate::access::session::{Conversation, Step};
use crate::access::store::{self, Kind, Name};
use crate::error::{CmdResult, CommandError};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use hourglass_auth::{ClientFirst, Credential, Mechanism, ServerConversation};

pub const X509: &str = "MONGODB-X509";

/// MongoDB numbers every conversation 1.
const CONVERSATION_ID: i32 = 1;

fn auth_failed() -> CommandError {
    CommandError::new(18, "Authentication failed.")
}

/// Fails the attempt: logged with the real reason, answered with the generic one after
/// `authFailedDelayMs` (waited by the connection's task).
fn failed(req: &Request, user: &Name, mechanism: &str, why: &str) -> CommandError {
    tracing::info!(conn = req.conn.id, peer = %req.conn.peer, user = %user, mechanism, reason = why, "Authentication failed");
    let delay = req.state.params.get_i64("authFailedDelayMs", 0).max(0) as u64;
    req.conn.delay_reply(delay);
    auth_failed()
}

/// A payload as the client sent it: BinData, or a base64 string.
struct Payload {
    bytes: Vec<u8>,
    base64: bool,
}

fn payload(body: &Document, command: &str) -> Result<Payload, CommandError> {
    match body.get("payload") {
        Some(Bson::Binary(b)) => Ok(Payload {
            bytes: b.bytes.clone(),
            base64: false,
        }),
        Some(Bson::String(s)) => Ok(Payload {
            bytes: B64
                .decode(s)
                .map_err(|_| CommandError::bad_value("Invalid base64 SASL payload"))?,
            base64: true,
        }),
        None => Err(CommandError::missing_field(&format!("{command}.payload"))),
        Some(_) => Err(CommandError::type_mismatch(format!(
            "BSON field '{command}.payload' is the wrong type, expected types '[string, binData]'"
        ))),
    }
}

fn reply_payload(bytes: Vec<u8>, base64: bool) -> Bson {
    if base64 {
        return Bson::String(B64.encode(bytes));
    }
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

/// The credential stored for `name` and `mechanism`, or None.
fn credential(
    req: &Request,
    name: &Name,
    mechanism: Mechanism,
) -> Result<Option<Credential>, CommandError> {
    Ok(store::get(&req.state, Kind::User, name)?.and_then(|u| store::credential(&u, mechanism)))
}

fn not_enabled(name: &str) -> CommandError {
    CommandError::new(
        334,
        format!("Received authentication for mechanism {name} which is not enabled"),
    )
}

/// The SCRAM mechanism `saslStart` names.
fn mechanism_of(body: &Document, db: &str) -> Result<Mechanism, CommandError> {
    let name = match body.get("mechanism") {
        Some(Bson::String(s)) => s.as_str(),
        None => return Err(CommandError::missing_field("saslStart.mechanism")),
        Some(_) => {
            return Err(CommandError::type_mismatch(
                "BSON field 'saslStart.mechanism' is the wrong type, expected type 'string'",
            ))
        }
    };
    if name == X509 || (db == "$external" && Mechanism::parse(name).is_some()) {
        return Err(CommandError::new(
            334,
            format!("Unsupported mechanism '{name}' on authentication database '{db}'"),
        ));
    }
    Mechanism::parse(name).ok_or_else(|| not_enabled(name))
}

/// The first step of a SCRAM conversation, for `saslStart` and `speculativeAuthenticate`.
fn start(req: &Request, db: &str, body: &Document) -> CmdResult {
    let mechanism = mechanism_of(body, db)?;
    let skip_empty = match body
        .get_document("options")
        .ok()
        .and_then(|o| o.get("skipEmptyExchange"))
    {
        None => false,
        Some(Bson::Boolean(b)) => *b,
        Some(_) => return Err(CommandError::bad_value("skipEmptyExchange must be boolean")),
    };
    let client_first = payload(body, "saslStart")?;
    // A new conversation ends any earlier one, failed or not.
    req.conn.session.lock().take_conversation();
    let first = ClientFirst::parse(&client_first.bytes)
        .map_err(|e| failed(req, &Name::new("", db), mechanism.name(), &e.to_string()))?;
    let name = Name::new(&first.user, db);
    let Some(credential) = credential(req, &name, mechanism)? else {
        return Err(failed(
            req,
            &name,
            mechanism.name(),
            "no such user with this mechanism",
        ));
    };
    let (scram, server_first) = ServerConversation::start(mechanism, &first, credential);
    req.conn.session.lock().begin(Conversation {
        mechanism,
        user: name,
        step: Step::Proof(Box::new(scram), skip_empty),
        base64: client_first.base64,
    });
    Ok(doc! {
        "conversationId": CONVERSATION_ID,
        "done": false,
        "payload": reply_payload(server_first, client_first.base64),
    })
}

pub fn sasl_start(req: &Request) -> CmdResult {
    req.check_fields(&["mechanism", "payload", "autoAuthorize", "options"])?;
    start(req, &req.db, &req.body)
}

pub fn sasl_continue(req: &Request) -> CmdResult {
    req.check_fields(&["conversationId", "payload"])?;
    let id = match req.body.get("conversationId") {
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        Some(Bson::Double(d)) if d.fract() == 0.0 => *d as i64,
        _ => return Err(CommandError::missing_field("saslContinue.conversationId")),
    };
    let message = payload(&req.body, "saslContinue")?;
    let Some(mut conv) = req.conn.session.lock().take_conversation() else {
        return Err(CommandError::new(17, "No SASL session state found"));
    };
    if id != i64::from(CONVERSATION_ID) {
        return Err(CommandError::new(17, "sasl: Mismatched conversation id"));
    }
    let mechanism = conv.mechanism.name();
    let reply = |done: bool, bytes: Vec<u8>| {
        doc! {"conversationId": CONVERSATION_ID, "done": done, "payload": reply_payload(bytes, conv.base64)}
    };
    match &conv.step {
        Step::Proof(scram, skip_empty) => {
            let server_final = scram
                .finish(&message.bytes)
                .map_err(|e| failed(req, &conv.user, mechanism, &e.to_string()))?;
            if *skip_empty {
                login(req, conv.user.clone(), mechanism)?;
                return Ok(reply(true, server_final));
            }
            let out = reply(false, server_final);
            conv.step = Step::Finished;
            req.conn.session.lock().begin(conv);
            Ok(out)
        }
        Step::Finished => {
            login(req, conv.user.clone(), mechanism)?;
            Ok(reply(true, Vec::new()))
        }
    }
}

fn login(req: &Request, user: Name, mechanism: &str) -> Result<(), CommandError> {
    req.conn.session.lock().login(user.clone())?;
    tracing::info!(conn = req.conn.id, peer = %req.conn.peer, user = %user, mechanism, "Successfully authenticated");
    Ok(())
}

/// `authenticate`: MONGODB-X509 with the client's verified TLS certificate.
pub fn authenticate(req: &Request) -> CmdResult {
    req.check_fields(&["mechanism", "user"])?;
    x509(req, &req.db, &req.body)
}

/// MONGODB-X509. Errors other than 11 and 17 read "Authentication failed.", as in MongoDB.
fn x509(req: &Request, db: &str, body: &Document) -> CmdResult {
    let mechanism = body.get_str("mechanism").unwrap_or_default();
    let name = Name::new(body.get_str("user").unwrap_or_default(), db);
    if mechanism != X509 {
        if !mechanism.is_empty() && Mechanism::parse(mechanism).is_none() {
            return Err(not_enabled(mechanism));
        }
        return Err(failed(
            req,
            &name,
            mechanism,
            "authenticate supports MONGODB-X509 only",
        ));
    }
    let Some(subject) = req.conn.certificate_subject.clone() else {
        return Err(failed(
            req,
            &name,
            X509,
            "No verified subject name available from client",
        ));
    };
    if db != "$external" {
        return Err(CommandError::new(
            17,
            "X.509 authentication must always use the $external database.",
        ));
    }
    if !name.name.is_empty() && name.name != subject {
        return Err(failed(
            req,
            &name,
            X509,
            "the user is not the certificate's subject",
        ));
    }
    let name = Name::new(&subject, "$external");
    if store::get(&req.state, Kind::User, &name)?.is_none() {
        return Err(CommandError::new(
            11,
            format!("Could not find user \"{subject}\" for db \"$external\""),
        ));
    }
    login(req, name, X509)?;
    Ok(doc! {"dbname": "$external", "user": subject})
}

pub fn logout(req: &Request) -> CmdResult {
    tracing::warn!(
        "The logout command has been deprecated, clients should end their session instead"
    );
    let mut session = req.conn.session.lock();
    if session.user().is_some_and(|u| u.db == req.db) {
        session.logout();
    }
    Ok(Document::new())
}

/// `hello`'s `saslSupportedMechs: "<db>.<user>"`: the user's mechanisms, or None when there
/// is no such user.
pub fn supported_mechanisms(req: &Request) -> Result<Option<Bson>, CommandError> {
    let Ok(spec) = req.body.get_str("saslSupportedMechs") else {
        return Ok(None);
    };
    let (db, user) = spec.split_once('.').ok_or_else(|| {
        CommandError::bad_value("UserName must contain a '.' separated database.user pair")
    })?;
    let Some(doc) = store::get(&req.state, Kind::User, &Name::new(user, db))? else {
        return Ok(None);
    };
    Ok(Some(Bson::Array(mechanisms_of(&doc))))
}

/// The SCRAM mechanisms a stored user has credentials for.
pub fn mechanisms_of(user: &Document) -> Vec<Bson> {
    let Ok(c) = user.get_document("credentials") else {
        return Vec::new();
    };
    if c.get_bool("external") == Ok(true) {
        return vec![Bson::String("external".into())];
    }
    Mechanism::ALL
        .iter()
        .filter(|m| c.contains_key(m.name()))
        .map(|m| Bson::String(m.name().into()))
        .collect()
}

/// `hello`'s `speculativeAuthenticate`: the first step of the conversation it carries, or
/// None when that step fails (the client then authenticates the ordinary way).
pub fn speculative(req: &Request) -> Result<Option<Document>, CommandError> {
    let Some(spec) = req.body.get("speculativeAuthenticate") else {
        return Ok(None);
    };
    let spec = match spec {
        Bson::Document(d) if !d.is_empty() => d,
        _ => {
            return Err(CommandError::bad_value(
                "hello.speculativeAuthenticate must be a non-empty Object",
            ))
        }
    };
    let command = spec.keys().next().map(String::as_str).unwrap_or_default();
    let outcome = match command {
        "saslStart" => match spec.get_str("db") {
            Ok(db) => start(req, db, spec),
            Err(_) => return Ok(None),
        },
        "authenticate" => x509(req, spec.get_str("db").unwrap_or("$external"), spec),
        other => {
            return Err(CommandError::new(
                51769,
                format!("hello.speculativeAuthenticate unknown command: {other}"),
            ))
        }
    };
    // A speculative failure is silent and must not hold the handshake back.
    req.conn.take_reply_delay();
    Ok(outcome.ok())
}
