//! A one-member replica set (`--replSet <name>`, config `replication.replSetName`): the
//! server describes itself as the primary of a replica set whose only member it is, so
//! that clients configured for a replica set (`?replicaSet=<name>`, applications that look
//! for `setName` before using transactions) connect and work. Nothing is replicated.
//!
//! The member's address is the one each client reached the server on (its connection's
//! local address): drivers replace their seed list with the primary's `hosts`, which must
//! therefore be reachable by that client.

use bson::oid::ObjectId;
use bson::{doc, Binary, Bson, Document, Timestamp};
use std::sync::atomic::{AtomicU64, Ordering};

pub struct ReplSet {
    pub name: String,
    election_id: ObjectId,
    started: bson::DateTime,
    /// The last cluster time handed out (seconds << 32 | increment).
    last_time: AtomicU64,
}

/// The current operation time (seconds since the epoch, no increment: nothing is
/// replicated, so no member needs to order writes within a second).
fn op_time() -> Document {
    let secs = u32::try_from(bson::DateTime::now().timestamp_millis() / 1000).unwrap_or(u32::MAX);
    doc! {"ts": Timestamp { time: secs, increment: 1 }, "t": 1_i64}
}

impl ReplSet {
    pub fn new(name: String) -> ReplSet {
        ReplSet {
            name,
            election_id: ObjectId::new(),
            started: bson::DateTime::now(),
            last_time: AtomicU64::new(0),
        }
    }

    /// The latest cluster time, without handing out a new one: the last one handed out, or
    /// the current second when it is later.
    pub fn current_time(&self) -> Timestamp {
        let now = (bson::DateTime::now().timestamp_millis() / 1000).max(0) as u64;
        let t = (now << 32).max(self.last_time.load(Ordering::Relaxed));
        Timestamp {
            time: (t >> 32) as u32,
            increment: t as u32,
        }
    }

    /// A new cluster time: the current second, with an increment that keeps every time
    /// handed out after the one before. Every read sees every write acknowledged before it,
    /// so a client's `afterClusterTime` is always already reached.
    pub fn cluster_time(&self) -> Timestamp {
        let now = (bson::DateTime::now().timestamp_millis() / 1000).max(0) as u64;
        let mut last = self.last_time.load(Ordering::Relaxed);
        loop {
            let next = (now << 32).max(last + 1);
            match self.last_time.compare_exchange_weak(
                last,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Timestamp {
                        time: (next >> 32) as u32,
                        increment: next as u32,
                    }
                }
                Err(seen) => last = seen,
            }
        }
    }

    /// Adds `operationTime` and `$clusterTime` to a reply, as a replica set member does
    /// (drivers gossip the cluster time and read causally after the operation time). The
    /// signature is empty: there are no keys to sign with.
    pub fn stamp(&self, reply: &mut Document) {
        let t = self.cluster_time();
        reply.insert("operationTime", t);
        reply.insert(
            "$clusterTime",
            doc! {
                "clusterTime": t,
                "signature": {
                    "hash": Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0; 20] },
                    "keyId": 0_i64,
                },
            },
        );
    }

    /// The fields `hello` adds for the primary of this set, as seen from a client that
    /// reached it at `me`.
    pub fn hello_fields(&self, me: &str) -> Document {
        let now = bson::DateTime::now();
        let opt = op_time();
        doc! {
            "hosts": [me],
            "setName": &self.name,
            "setVersion": 1,
            "secondary": false,
            "primary": me,
            "me": me,
            "electionId": self.election_id,
            "lastWrite": {
                "opTime": opt.clone(), "lastWriteDate": now,
                "majorityOpTime": opt, "majorityWriteDate": now,
            },
        }
    }

    /// `replSetGetConfig`'s `config`.
    pub fn config(&self, me: &str) -> Document {
        doc! {
            "_id": &self.name,
            "version": 1,
            "term": 1,
            "members": [{
                "_id": 0, "host": me, "arbiterOnly": false, "buildIndexes": true,
                "hidden": false, "priority": 1.0, "tags": {}, "secondaryDelaySecs": 0_i64,
                "votes": 1,
            }],
            "protocolVersion": 1_i64,
            "writeConcernMajorityJournalDefault": true,
            "settings": {"chainingAllowed": true, "electionTimeoutMillis": 10000_i64},
        }
    }

    /// `replSetGetStatus`.
    pub fn status(&self, me: &str) -> Document {
        let now = bson::DateTime::now();
        let uptime = (now.timestamp_millis() - self.started.timestamp_millis()) / 1000;
        let opt = op_time();
        doc! {
            "set": &self.name,
            "date": now,
            "myState": 1,
            "term": 1_i64,
            "heartbeatIntervalMillis": 2000_i64,
            "majorityVoteCount": 1,
            "writeMajorityCount": 1,
            "votingMembersCount": 1,
            "writableVotingMembersCount": 1,
            "optimes": {
                "lastCommittedOpTime": opt.clone(), "appliedOpTime": opt.clone(),
                "durableOpTime": opt.clone(), "lastCommittedWallTime": now,
            },
            "members": [{
                "_id": 0, "name": me, "health": 1.0, "state": 1, "stateStr": "PRIMARY",
                "uptime": Bson::Int64(uptime), "optime": opt, "optimeDate": now,
                "electionId": self.election_id, "configVersion": 1, "configTerm": 1_i64,
                "self": true,
            }],
        }
    }
}
