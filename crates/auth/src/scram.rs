//! The server side of SCRAM (RFC 5802) with SHA-1 and SHA-256 (RFC 7677), as MongoDB runs
//! it: SCRAM-SHA-1 hashes the password as hex(MD5("user:mongo:pwd")) first, SCRAM-SHA-256
//! prepares it with SASLprep. Only the stored key and server key are kept; a login costs
//! the server two HMACs and a hash, while the iterated PBKDF2 is paid when a password is set.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{KeyInit, Mac};
use md5::Digest;
use rand::RngCore;
use subtle::ConstantTimeEq;

/// A SCRAM mechanism MongoDB supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    Sha1,
    Sha256,
}

/// Why a conversation failed. `ProofMismatch` and `UnknownUser` must read the same to the
/// client (AuthenticationFailed); the others are protocol errors.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScramError {
    #[error("{0}")]
    Malformed(String),
    #[error("Unsupported SCRAM feature: {0}")]
    Unsupported(String),
    #[error("Authentication failed.")]
    ProofMismatch,
    #[error("nonce mismatch")]
    NonceMismatch,
    #[error("SASLprep failed on the password: {0}")]
    SaslPrep(String),
}

pub type Result<T> = std::result::Result<T, ScramError>;

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha1, Mechanism::Sha256];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "SCRAM-SHA-1",
            Mechanism::Sha256 => "SCRAM-SHA-256",
        }
    }

    pub fn parse(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Salt length MongoDB uses: the hash's output length minus the 4 bytes of PBKDF2's
    /// block counter.
    pub fn salt_len(self) -> usize {
        match self {
            Mechanism::Sha1 => 16,
            Mechanism::Sha256 => 28,
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => sha1::Sha1::digest(data).to_vec(),
            Mechanism::Sha256 => sha2::Sha256::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes keys of any length, so new_from_slice cannot fail.
        match self {
            Mechanism::Sha1 => {
                let mut m = hmac::Hmac::<sha1::Sha1>::new_from_slice(key)
                    .expect("HMAC accepts any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            Mechanism::Sha256 => {
                let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(key)
                    .expect("HMAC accepts any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => {
                pbkdf2::pbkdf2_hmac_array::<sha1::Sha1, 20>(password, salt, iterations).to_vec()
            }
            Mechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<sha2::Sha256, 32>(password, salt, iterations).to_vec()
            }
        }
    }

    /// The password as this mechanism feeds it to PBKDF2: hex(MD5("user:mongo:pwd")) for
    /// SHA-1 (MongoDB's legacy digest), SASLprep(pwd) for SHA-256.
    pub fn prepare_password(self, user: &str, password: &str) -> Result<String> {
        match self {
            Mechanism::Sha1 => Ok(hex::encode(md5::Md5::digest(
                format!("{user}:mongo:{password}").as_bytes(),
            ))),
            Mechanism::Sha256 => stringprep::saslprep(password)
                .map(|p| p.into_owned())
                .map_err(|e| ScramError::SaslPrep(e.to_string())),
        }
    }
}

/// What the server stores for one user and mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub iteration_count: u32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl Credential {
    /// Derives the credential of `user` with `password` and a fresh random salt.
    pub fn derive(mech: Mechanism, user: &str, password: &str, iterations: u32) -> Result<Self> {
        let prepared = mech.prepare_password(user, password)?;
        let mut salt = vec![0u8; mech.salt_len()];
        rand::rng().fill_bytes(&mut salt);
        Ok(Credential::from_prepared(
            mech,
            prepared.as_bytes(),
            salt,
            iterations,
        ))
    }

    /// The credential of an already prepared password with a given salt.
    pub fn from_prepared(mech: Mechanism, prepared: &[u8], salt: Vec<u8>, iterations: u32) -> Self {
        let salted = mech.salted_password(prepared, &salt, iterations);
        let client_key = mech.hmac(&salted, b"Client Key");
        Credential {
            iteration_count: iterations,
            salt,
            stored_key: mech.hash(&client_key),
            server_key: mech.hmac(&salted, b"Server Key"),
        }
    }

    /// Whether `password` is the password of `user` this credential was made from (for
    /// clients that send a password instead of a SCRAM proof, such as HTTP Basic). Costs
    /// one PBKDF2 run; the comparison takes constant time.
    pub fn verify_password(&self, mech: Mechanism, user: &str, password: &str) -> bool {
        let Ok(prepared) = mech.prepare_password(user, password) else {
            return false;
        };
        let again = Credential::from_prepared(
            mech,
            prepared.as_bytes(),
            self.salt.clone(),
            self.iteration_count,
        );
        bool::from(again.stored_key.ct_eq(&self.stored_key))
    }

    pub fn salt_b64(&self) -> String {
        B64.encode(&self.salt)
    }
    pub fn stored_key_b64(&self) -> String {
        B64.encode(&self.stored_key)
    }
    pub fn server_key_b64(&self) -> String {
        B64.encode(&self.server_key)
    }

    /// Reads back the base64 fields MongoDB stores.
    pub fn from_b64(
        iterations: u32,
        salt: &str,
        stored_key: &str,
        server_key: &str,
    ) -> Option<Self> {
        Some(Credential {
            iteration_count: iterations,
            salt: B64.decode(salt).ok()?,
            stored_key: B64.decode(stored_key).ok()?,
            server_key: B64.decode(server_key).ok()?,
        })
    }
}

/// The parsed client-first message.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientFirst {
    /// The user name, with `=2C` and `=3D` decoded.
    pub user: String,
    gs2_header: String,
    bare: String,
    nonce: String,
}

fn malformed(what: &str) -> ScramError {
    ScramError::Malformed(format!("Incorrect SCRAM client|first message: {what}"))
}

fn utf8(payload: &[u8]) -> Result<&str> {
    std::str::from_utf8(payload)
        .map_err(|_| ScramError::Malformed("SCRAM message is not UTF-8".into()))
}

/// Decodes a SCRAM `saslname` (RFC 5802 section 5.1).
fn decode_saslname(s: &str) -> Result<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3);
        match code {
            Some("2C") => out.push(','),
            Some("3D") => out.push('='),
            _ => return Err(malformed("invalid escape in the user name")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

impl ClientFirst {
    pub fn parse(payload: &[u8]) -> Result<ClientFirst> {
        let text = utf8(payload)?;
        let mut parts = text.splitn(3, ',');
        let cbind = parts.next().unwrap_or_default();
        let authzid = parts
            .next()
            .ok_or_else(|| malformed("missing the GS2 header"))?;
        let bare = parts
            .next()
            .ok_or_else(|| malformed("missing the user name"))?;
        match cbind {
            "n" | "y" => {}
            c if c.starts_with("p=") => {
                return Err(ScramError::Unsupported("channel binding".into()))
            }
            _ => return Err(malformed("unknown GS2 channel binding flag")),
        }
        if !authzid.is_empty() && !authzid.starts_with("a=") {
            return Err(malformed("bad authorization identity"));
        }
        let mut user = None;
        let mut nonce = None;
        for (i, attr) in bare.split(',').enumerate() {
            match (i, attr.split_at_checked(2)) {
                (0, Some(("n=", v))) => user = Some(decode_saslname(v)?),
                (0, Some(("m=", _))) => {
                    return Err(ScramError::Unsupported("mandatory extension".into()))
                }
                (1, Some(("r=", v))) if !v.is_empty() => nonce = Some(v.to_string()),
                (0 | 1, _) => return Err(malformed(&format!("unexpected attribute '{attr}'"))),
                _ => {}
            }
        }
        let user = user.ok_or_else(|| malformed("missing the user name"))?;
        let nonce = nonce.ok_or_else(|| malformed("missing the client nonce"))?;
        if user.is_empty() {
            return Err(malformed("empty user name"));
        }
        if !authzid.is_empty() && authzid != format!("a={user}") {
            return Err(ScramError::Unsupported(
                "an authorization identity other than the user".into(),
            ));
        }
        Ok(ClientFirst {
            user,
            gs2_header: format!("{cbind},{authzid},"),
            bare: bare.to_string(),
            nonce,
        })
    }
}

/// A conversation between the server-first and client-final messages.
#[derive(Debug)]
pub struct ServerConversation {
    mech: Mechanism,
    credential: Credential,
    gs2_header: String,
    auth_prefix: String,
    nonce: String,
}

impl ServerConversation {
    /// Answers `first` with a fresh server nonce; returns the conversation and the
    /// server-first message.
    pub fn start(mech: Mechanism, first: &ClientFirst, credential: Credential) -> (Self, Vec<u8>) {
        let mut raw = [0u8; 24];
        rand::rng().fill_bytes(&mut raw);
        ServerConversation::start_with_nonce(mech, first, credential, &B64.encode(raw))
    }

    /// As `start`, with the server's part of the nonce given (for the RFC test vectors).
    pub fn start_with_nonce(
        mech: Mechanism,
        first: &ClientFirst,
        credential: Credential,
        server_nonce: &str,
    ) -> (Self, Vec<u8>) {
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            credential.salt_b64(),
            credential.iteration_count
        );
        let conv = ServerConversation {
            mech,
            credential,
            gs2_header: first.gs2_header.clone(),
            auth_prefix: format!("{},{server_first}", first.bare),
            nonce,
        };
        (conv, server_first.into_bytes())
    }

    /// Checks the client-final message's proof; returns the server-final message.
    pub fn finish(&self, payload: &[u8]) -> Result<Vec<u8>> {
        let text = utf8(payload)?;
        let bad = |what: &str| {
            ScramError::Malformed(format!("Incorrect SCRAM client|final message: {what}"))
        };
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or_else(|| bad("missing the proof"))?;
        let mut attrs = without_proof.split(',');
        let cbind = attrs
            .next()
            .and_then(|a| a.strip_prefix("c="))
            .ok_or_else(|| bad("missing the channel binding"))?;
        let nonce = attrs
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .ok_or_else(|| bad("missing the nonce"))?;
        if B64.decode(cbind).ok().as_deref() != Some(self.gs2_header.as_bytes()) {
            return Err(bad("the channel binding does not match the GS2 header"));
        }
        if nonce != self.nonce {
            return Err(ScramError::NonceMismatch);
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| bad("the proof is not base64"))?;
        let auth_message = format!("{},{without_proof}", self.auth_prefix);
        let signature = self
            .mech
            .hmac(&self.credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err(ScramError::ProofMismatch);
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let stored = self.mech.hash(&client_key);
        if !bool::from(stored.ct_eq(&self.credential.stored_key)) {
            return Err(ScramError::ProofMismatch);
        }
        let server_signature = self
            .mech
            .hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_signature)).into_bytes())
    }
}

#[cfg(test)]
#[path = "scram_test.rs"]
mod tests;
