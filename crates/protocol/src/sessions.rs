//! The logical sessions this server has seen, as mongod's local session cache keeps them:
//! every command that carries an `lsid` (and `startSession`) records it with its last use
//! and user; `endSessions`, `killSessions` and `killAllSessions` remove them; the
//! `$listLocalSessions` stage lists them.

use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};
use parking_lot::Mutex;
use std::collections::HashMap;

/// Sessions the cache holds at most (mongod's `maxSessions` default); later ones are not
/// recorded.
const MAX_SESSIONS: usize = 1_000_000;

struct Entry {
    last_use: bson::DateTime,
    /// `name@db` of the authenticated user, if any.
    user: Option<String>,
}

/// The local session cache.
#[derive(Default)]
pub struct LocalSessions {
    sessions: Mutex<HashMap<Vec<u8>, Entry>>,
}

/// The UUID bytes of an `lsid` document (`{id: UUID}`).
pub fn session_id(lsid: &Bson) -> Option<Vec<u8>> {
    match lsid {
        Bson::Document(d) => match d.get("id") {
            Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid => Some(b.bytes.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// mongod's `uid` of a user: the SHA-256 of its `name@db` (of "" without one).
fn uid(user: Option<&str>) -> Binary {
    use sha2::Digest;
    Binary {
        subtype: BinarySubtype::Generic,
        bytes: sha2::Sha256::digest(user.unwrap_or("").as_bytes()).to_vec(),
    }
}

/// Which sessions `$listLocalSessions` lists.
pub enum Listing {
    /// Every session (`allUsers: true`).
    All,
    /// The sessions of these users (`name@db`; `None` is no user).
    Users(Vec<Option<String>>),
}

impl LocalSessions {
    /// Records the use of the session `lsid` (a command's `lsid` field) now.
    pub fn touch(&self, lsid: &Bson, user: Option<String>) {
        let Some(id) = session_id(lsid) else {
            return;
        };
        let mut sessions = self.sessions.lock();
        if sessions.len() >= MAX_SESSIONS && !sessions.contains_key(&id) {
            return;
        }
        sessions.insert(
            id,
            Entry {
                last_use: bson::DateTime::now(),
                user,
            },
        );
    }

    /// Forgets the sessions `lsids` (`endSessions`).
    pub fn end(&self, lsids: &[Bson]) {
        let mut sessions = self.sessions.lock();
        for id in lsids.iter().filter_map(session_id) {
            sessions.remove(&id);
        }
    }

    /// The `lsid`s (`{id: UUID}`) of the sessions `which` selects (`killSessions`,
    /// `killAllSessions`).
    pub fn ids(&self, which: &Listing) -> Vec<Bson> {
        self.sessions
            .lock()
            .iter()
            .filter(|(_, e)| match which {
                Listing::All => true,
                Listing::Users(users) => users.contains(&e.user),
            })
            .map(|(id, _)| {
                Bson::Document(
                    doc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: id.clone() }},
                )
            })
            .collect()
    }

    /// The sessions `which` selects, as `$listLocalSessions` outputs them.
    pub fn list(&self, which: &Listing) -> Vec<Document> {
        let sessions = self.sessions.lock();
        let mut out: Vec<(bson::DateTime, Document)> = sessions
            .iter()
            .filter(|(_, e)| match which {
                Listing::All => true,
                Listing::Users(users) => users.contains(&e.user),
            })
            .map(|(id, e)| {
                let lsid = Binary {
                    subtype: BinarySubtype::Uuid,
                    bytes: id.clone(),
                };
                let mut d = doc! {
                    "_id": {"id": lsid, "uid": uid(e.user.as_deref())},
                    "lastUse": e.last_use,
                };
                if let Some(u) = &e.user {
                    d.insert("user", doc! {"name": u});
                }
                (e.last_use, d)
            })
            .collect();
        out.sort_by_key(|(t, _)| *t);
        out.into_iter().map(|(_, d)| d).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsid(n: u8) -> Bson {
        Bson::Document(doc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![n; 16] }})
    }

    #[test]
    fn sessions_are_listed_by_user_until_ended() {
        let s = LocalSessions::default();
        s.touch(&lsid(1), None);
        s.touch(&lsid(2), Some("ann@admin".into()));
        s.touch(&Bson::Int32(3), None);
        assert_eq!(s.list(&Listing::All).len(), 2);
        let anns = s.list(&Listing::Users(vec![Some("ann@admin".into())]));
        assert_eq!(anns.len(), 1);
        assert_eq!(
            anns[0].get_document("user").unwrap(),
            &doc! {"name": "ann@admin"}
        );
        let uid = anns[0]
            .get_document("_id")
            .unwrap()
            .get_binary_generic("uid")
            .unwrap();
        assert_eq!(uid.len(), 32);
        s.end(&[lsid(2)]);
        assert_eq!(s.list(&Listing::All).len(), 1);
    }

    #[test]
    fn ids_select_sessions_by_user_as_lsids() {
        let s = LocalSessions::default();
        s.touch(&lsid(1), None);
        s.touch(&lsid(2), Some("ann@admin".into()));
        assert_eq!(s.ids(&Listing::All).len(), 2);
        let anns = s.ids(&Listing::Users(vec![Some("ann@admin".into())]));
        assert_eq!(anns, vec![lsid(2)]);
        s.end(&anns);
        assert_eq!(s.ids(&Listing::All), vec![lsid(1)]);
    }
}
