use super::*;

/// RFC 5802 section 5 (SCRAM-SHA-1, password "pencil" used as is).
#[test]
fn sha1_conversation_matches_rfc5802_test_vector() {
    let first = ClientFirst::parse(b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL").unwrap();
    assert_eq!(first.user, "user");
    let salt = B64.decode("QSXCR+Q6sek8bf92").unwrap();
    let cred = Credential::from_prepared(Mechanism::Sha1, b"pencil", salt, 4096);
    let (conv, server_first) =
        ServerConversation::start_with_nonce(Mechanism::Sha1, &first, cred, "3rfcNHYJY1ZVvWVs7j");
    assert_eq!(
        server_first,
        b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    );
    let server_final = conv
        .finish(
            b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        )
        .unwrap();
    assert_eq!(server_final, b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=");
}

/// RFC 7677 section 3 (SCRAM-SHA-256).
#[test]
fn sha256_conversation_matches_rfc7677_test_vector() {
    let first = ClientFirst::parse(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
    let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let prepared = Mechanism::Sha256
        .prepare_password("user", "pencil")
        .unwrap();
    let cred = Credential::from_prepared(Mechanism::Sha256, prepared.as_bytes(), salt, 4096);
    let (conv, server_first) = ServerConversation::start_with_nonce(
        Mechanism::Sha256,
        &first,
        cred,
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    );
    assert_eq!(
        server_first,
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let server_final = conv
        .finish(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        .unwrap();
    assert_eq!(
        server_final,
        b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    );
}

#[test]
fn wrong_proof_is_proof_mismatch() {
    let first = ClientFirst::parse(b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL").unwrap();
    let salt = B64.decode("QSXCR+Q6sek8bf92").unwrap();
    let cred = Credential::from_prepared(Mechanism::Sha1, b"not-pencil", salt, 4096);
    let (conv, _) =
        ServerConversation::start_with_nonce(Mechanism::Sha1, &first, cred, "3rfcNHYJY1ZVvWVs7j");
    assert_eq!(
        conv.finish(
            b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
        ),
        Err(ScramError::ProofMismatch)
    );
}

#[test]
fn client_final_with_another_nonce_is_refused() {
    let first = ClientFirst::parse(b"n,,n=user,r=abc").unwrap();
    let cred = Credential::from_prepared(Mechanism::Sha256, b"x", vec![1; 28], 4096);
    let (conv, _) = ServerConversation::start_with_nonce(Mechanism::Sha256, &first, cred, "def");
    assert_eq!(
        conv.finish(b"c=biws,r=abcXXX,p=AAAA"),
        Err(ScramError::NonceMismatch)
    );
}

#[test]
fn user_names_decode_scram_escapes() {
    let first = ClientFirst::parse(b"n,,n=a=2Cb=3Dc,r=n").unwrap();
    assert_eq!(first.user, "a,b=c");
    assert!(matches!(
        ClientFirst::parse(b"n,,n=a=2Xb,r=n"),
        Err(ScramError::Malformed(_))
    ));
}

#[test]
fn malformed_client_first_messages_are_refused() {
    for bad in [
        &b""[..],
        b"n,,",
        b"n,,r=abc",
        b"x,,n=u,r=abc",
        b"n,,n=u",
        b"n,,n=,r=abc",
        b"\xff\xfe",
    ] {
        assert!(
            matches!(ClientFirst::parse(bad), Err(ScramError::Malformed(_))),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    assert!(matches!(
        ClientFirst::parse(b"p=tls-unique,,n=u,r=abc"),
        Err(ScramError::Unsupported(_))
    ));
}

#[test]
fn sha1_password_is_mongodb_md5_digest() {
    // hex(MD5("user:mongo:pencil")), as every MongoDB driver computes it.
    assert_eq!(
        Mechanism::Sha1.prepare_password("user", "pencil").unwrap(),
        "1c33006ec1ffd90f9cadcbcc0e118200"
    );
}

#[test]
fn sha256_password_is_saslprepped() {
    // RFC 4013: the soft hyphen maps to nothing, non-ASCII spaces to a space.
    assert_eq!(
        Mechanism::Sha256
            .prepare_password("u", "I\u{00AD}X")
            .unwrap(),
        "IX"
    );
    assert!(Mechanism::Sha256
        .prepare_password("u", "a\u{0007}")
        .is_err());
}

#[test]
fn derived_credentials_have_mongodb_salt_lengths_and_differ_per_call() {
    let a = Credential::derive(Mechanism::Sha256, "u", "p", 4096).unwrap();
    let b = Credential::derive(Mechanism::Sha256, "u", "p", 4096).unwrap();
    assert_eq!(a.salt.len(), 28);
    assert_ne!(a.salt, b.salt);
    assert_eq!(
        Credential::derive(Mechanism::Sha1, "u", "p", 4096)
            .unwrap()
            .salt
            .len(),
        16
    );
    let back = Credential::from_b64(
        4096,
        &a.salt_b64(),
        &a.stored_key_b64(),
        &a.server_key_b64(),
    );
    assert_eq!(back, Some(a));
}

#[test]
fn verify_password_accepts_only_the_password_the_credential_was_made_from() {
    let c = Credential::derive(Mechanism::Sha256, "u", "right", 4096).unwrap();
    assert!(c.verify_password(Mechanism::Sha256, "u", "right"));
    assert!(!c.verify_password(Mechanism::Sha256, "u", "wrong"));
    let c = Credential::derive(Mechanism::Sha1, "u", "right", 4096).unwrap();
    assert!(c.verify_password(Mechanism::Sha1, "u", "right"));
    assert!(!c.verify_password(Mechanism::Sha1, "other", "right"));
}
