//! Privileges as MongoDB defines them: a resource pattern and a set of actions. A command
//! asks for actions on a target (the cluster, a database, or one namespace); a privilege
//! grants them when its pattern covers the target.

use std::collections::BTreeSet;
use std::fmt;

/// MongoDB's action types (a name unknown here is refused when a role names it).
pub const ACTIONS: &[&str] = &[
    "addShard",
    "analyze",
    "appendOplogNote",
    "applicationMessage",
    "applyOps",
    "authSchemaUpgrade",
    "bypassDocumentValidation",
    "bypassWriteBlockingMode",
    "changeCustomData",
    "changeOwnCustomData",
    "changeOwnPassword",
    "changePassword",
    "changeStream",
    "checkFreeMonitoringStatus",
    "checkMetadataConsistency",
    "cleanupOrphaned",
    "closeAllDatabases",
    "collMod",
    "collStats",
    "compact",
    "connPoolStats",
    "connPoolSync",
    "convertToCapped",
    "cpuProfiler",
    "createCollection",
    "createIndex",
    "createRole",
    "createSearchIndexes",
    "createUser",
    "dbCheck",
    "dbHash",
    "dbStats",
    "dropAllRolesFromDatabase",
    "dropAllUsersFromDatabase",
    "dropCollection",
    "dropConnections",
    "dropDatabase",
    "dropIndex",
    "dropRole",
    "dropSearchIndex",
    "dropUser",
    "enableProfiler",
    "enableSharding",
    "find",
    "flushRouterConfig",
    "fsync",
    "getClusterParameter",
    "getCmdLineOpts",
    "getDefaultRWConcern",
    "getLog",
    "getParameter",
    "getShardMap",
    "getShardVersion",
    "grantRole",
    "hostInfo",
    "indexStats",
    "inprog",
    "insert",
    "internal",
    "invalidateUserCache",
    "killAnyCursor",
    "killAnySession",
    "killCursors",
    "killop",
    "listCachedAndActiveUsers",
    "listCollections",
    "listCursors",
    "listDatabases",
    "listIndexes",
    "listSearchIndexes",
    "listSessions",
    "listShards",
    "logRotate",
    "moveChunk",
    "netstat",
    "operationMetrics",
    "planCacheIndexFilter",
    "planCacheRead",
    "planCacheWrite",
    "reIndex",
    "refineCollectionShardKey",
    "remove",
    "removeShard",
    "renameCollection",
    "renameCollectionSameDB",
    "replSetConfigure",
    "replSetGetConfig",
    "replSetGetStatus",
    "replSetHeartbeat",
    "replSetResizeOplog",
    "replSetStateChange",
    "reshardCollection",
    "resync",
    "revokeRole",
    "rotateCertificates",
    "serverStatus",
    "setAuthenticationRestriction",
    "setClusterParameter",
    "setDefaultRWConcern",
    "setFeatureCompatibilityVersion",
    "setParameter",
    "setUserWriteBlockMode",
    "shardCollection",
    "shardingState",
    "shutdown",
    "splitChunk",
    "splitVector",
    "storageDetails",
    "top",
    "touch",
    "unlock",
    "update",
    "updateSearchIndex",
    "useUUID",
    "validate",
    "viewRole",
    "viewUser",
];

/// The name of a known action, or None.
pub fn action(name: &str) -> Option<&'static str> {
    ACTIONS.iter().copied().find(|a| *a == name)
}

/// A set of actions (names from `ACTIONS`).
pub type Actions = BTreeSet<&'static str>;

/// MongoDB's resource patterns, as roles write them (`{db, collection}`, `{cluster: true}`,
/// `{anyResource: true}`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    Cluster,
    AnyResource,
    /// `{db: "", collection: ""}`: every collection but system ones, in every database.
    AnyNormal,
    /// `{db: d, collection: ""}`: the database and its collections but system ones.
    Database(String),
    /// `{db: "", collection: c}`: collection `c` in every database.
    CollectionName(String),
    /// `{db: d, collection: c}`.
    Namespace(String, String),
    /// `{db: d, system_buckets: c}` (`""` for any): the buckets of time-series collections.
    SystemBuckets(String, String),
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::Cluster => write!(f, "cluster"),
            Resource::AnyResource => write!(f, "any resource"),
            Resource::AnyNormal => write!(f, "any normal resource"),
            Resource::Database(d) => write!(f, "database {d}"),
            Resource::CollectionName(c) => write!(f, "collection {c} in any database"),
            Resource::Namespace(d, c) => write!(f, "{d}.{c}"),
            Resource::SystemBuckets(d, c) => write!(f, "buckets {c} of {d}"),
        }
    }
}

/// What a command acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target<'a> {
    Cluster,
    /// Every normal collection (only `AnyNormal` and `AnyResource` cover it).
    AnyNormal,
    Database(&'a str),
    Namespace(&'a str, &'a str),
}

/// Whether `coll` is a "normal" collection, one that database-wide patterns cover.
pub fn is_normal_collection(coll: &str) -> bool {
    !coll.starts_with("system.")
}

/// Whether `any normal resource` reaches database `db` (not `local` or `config`).
fn is_normal_database(db: &str) -> bool {
    db != "local" && db != "config"
}

impl Resource {
    /// Whether this pattern covers `target`.
    pub fn covers(&self, target: &Target<'_>) -> bool {
        match (self, target) {
            (Resource::AnyResource, _) => true,
            (Resource::Cluster, Target::Cluster) => true,
            (Resource::AnyNormal, Target::AnyNormal) => true,
            (Resource::AnyNormal, Target::Database(d)) => is_normal_database(d),
            (Resource::AnyNormal, Target::Namespace(d, c)) => {
                is_normal_database(d) && is_normal_collection(c)
            }
            (Resource::Database(d), Target::Database(t)) => d == t,
            (Resource::Database(d), Target::Namespace(t, c)) => d == t && is_normal_collection(c),
            (Resource::CollectionName(c), Target::Namespace(_, t)) => c == t,
            (Resource::Namespace(d, c), Target::Namespace(td, tc)) => d == td && c == tc,
            (Resource::SystemBuckets(d, c), Target::Namespace(td, tc)) => tc
                .strip_prefix("system.buckets.")
                .is_some_and(|b| (d.is_empty() || d == td) && (c.is_empty() || c == b)),
            _ => false,
        }
    }

    /// The database a pattern names, if one.
    pub fn database(&self) -> Option<&str> {
        match self {
            Resource::Database(d) | Resource::Namespace(d, _) => Some(d),
            Resource::SystemBuckets(d, _) if !d.is_empty() => Some(d),
            _ => None,
        }
    }
}

/// Actions granted on a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Privilege {
    pub resource: Resource,
    pub actions: Actions,
}

impl Privilege {
    pub fn new(resource: Resource, actions: &[&'static str]) -> Privilege {
        Privilege {
            resource,
            actions: actions.iter().copied().collect(),
        }
    }
}

/// Privileges merged per resource, as `rolesInfo`/`connectionStatus` show them.
pub fn merge(privileges: impl IntoIterator<Item = Privilege>) -> Vec<Privilege> {
    let mut out: Vec<Privilege> = Vec::new();
    for p in privileges {
        match out.iter_mut().find(|q| q.resource == p.resource) {
            Some(q) => q.actions.extend(p.actions),
            None => out.push(p),
        }
    }
    out
}

/// Whether `privileges` grant `action` on `target`.
pub fn allows(privileges: &[Privilege], action: &str, target: &Target<'_>) -> bool {
    privileges
        .iter()
        .any(|p| p.actions.contains(action) && p.resource.covers(target))
}

/// Whether `privileges` grant anything at all on database `db` (for the filtered
/// `listDatabases` of users without the `listDatabases` action).
pub fn any_on_database(privileges: &[Privilege], db: &str) -> bool {
    privileges.iter().any(|p| match &p.resource {
        Resource::AnyResource | Resource::AnyNormal => true,
        r => r.database() == Some(db),
    })
}

/// Whether `privileges` grant any action on namespace `db.coll` (for listCollections'
/// `authorizedCollections`).
pub fn any_on_namespace(privileges: &[Privilege], db: &str, coll: &str) -> bool {
    let t = Target::Namespace(db, coll);
    privileges
        .iter()
        .any(|p| !p.actions.is_empty() && p.resource.covers(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_patterns_cover_normal_collections_but_not_system_ones() {
        let r = Resource::Database("d".into());
        assert!(r.covers(&Target::Namespace("d", "c")));
        assert!(r.covers(&Target::Database("d")));
        assert!(!r.covers(&Target::Namespace("d", "system.users")));
        assert!(!r.covers(&Target::Namespace("e", "c")));
        assert!(!r.covers(&Target::Cluster));
    }

    #[test]
    fn any_normal_resource_skips_system_collections_and_the_cluster() {
        assert!(Resource::AnyNormal.covers(&Target::Namespace("x", "y")));
        assert!(!Resource::AnyNormal.covers(&Target::Namespace("x", "system.buckets.y")));
        assert!(!Resource::AnyNormal.covers(&Target::Cluster));
        assert!(Resource::AnyResource.covers(&Target::Cluster));
    }

    #[test]
    fn system_buckets_pattern_covers_bucket_collections_only() {
        let any = Resource::SystemBuckets(String::new(), String::new());
        assert!(any.covers(&Target::Namespace("d", "system.buckets.m")));
        assert!(!any.covers(&Target::Namespace("d", "m")));
        let one = Resource::SystemBuckets("d".into(), "m".into());
        assert!(one.covers(&Target::Namespace("d", "system.buckets.m")));
        assert!(!one.covers(&Target::Namespace("d", "system.buckets.n")));
    }

    #[test]
    fn allows_needs_the_action_on_a_covering_resource() {
        let p = vec![Privilege::new(Resource::Database("d".into()), &["find"])];
        assert!(allows(&p, "find", &Target::Namespace("d", "c")));
        assert!(!allows(&p, "insert", &Target::Namespace("d", "c")));
        assert!(!allows(&p, "find", &Target::Namespace("e", "c")));
    }
}
