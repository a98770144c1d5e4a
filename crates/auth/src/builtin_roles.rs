//! MongoDB's built-in roles and the privileges each grants, as the MongoDB 7.0 manual lists
//! them ("Built-In Roles"), restricted to the actions this server knows. Database roles
//! exist in every database; the others only in `admin`.

use crate::privilege::{merge, Privilege, Resource};

const READ: &[&str] = &[
    "changeStream",
    "collStats",
    "dbHash",
    "dbStats",
    "find",
    "killCursors",
    "listCollections",
    "listIndexes",
    "listSearchIndexes",
    "planCacheRead",
];

const WRITE: &[&str] = &[
    "convertToCapped",
    "createCollection",
    "createIndex",
    "createSearchIndexes",
    "dropCollection",
    "dropIndex",
    "dropSearchIndex",
    "insert",
    "remove",
    "renameCollectionSameDB",
    "update",
    "updateSearchIndex",
];

const DB_ADMIN: &[&str] = &[
    "analyze",
    "bypassDocumentValidation",
    "collMod",
    "collStats",
    "compact",
    "convertToCapped",
    "createCollection",
    "createIndex",
    "dbStats",
    "dropCollection",
    "dropDatabase",
    "dropIndex",
    "enableProfiler",
    "listCollections",
    "listIndexes",
    "listSearchIndexes",
    "planCacheIndexFilter",
    "planCacheRead",
    "planCacheWrite",
    "reIndex",
    "renameCollectionSameDB",
    "storageDetails",
    "validate",
];

const PROFILE: &[&str] = &[
    "changeStream",
    "collStats",
    "convertToCapped",
    "createCollection",
    "dbHash",
    "dbStats",
    "dropCollection",
    "find",
    "killCursors",
    "listCollections",
    "listIndexes",
    "planCacheRead",
];

const USER_ADMIN: &[&str] = &[
    "changeCustomData",
    "changePassword",
    "createRole",
    "createUser",
    "dropRole",
    "dropUser",
    "grantRole",
    "revokeRole",
    "setAuthenticationRestriction",
    "viewRole",
    "viewUser",
];

const CLUSTER_MONITOR: &[&str] = &[
    "checkFreeMonitoringStatus",
    "connPoolStats",
    "getClusterParameter",
    "getCmdLineOpts",
    "getDefaultRWConcern",
    "getLog",
    "getParameter",
    "getShardMap",
    "hostInfo",
    "inprog",
    "listDatabases",
    "listSessions",
    "listShards",
    "netstat",
    "operationMetrics",
    "replSetGetConfig",
    "replSetGetStatus",
    "serverStatus",
    "shardingState",
    "top",
    "useUUID",
];

const HOST_MANAGER: &[&str] = &[
    "applicationMessage",
    "connPoolSync",
    "dropConnections",
    "flushRouterConfig",
    "fsync",
    "invalidateUserCache",
    "killAnyCursor",
    "killAnySession",
    "killop",
    "logRotate",
    "resync",
    "rotateCertificates",
    "setParameter",
    "shutdown",
    "touch",
    "unlock",
];

const CLUSTER_MANAGER: &[&str] = &[
    "addShard",
    "appendOplogNote",
    "applicationMessage",
    "checkMetadataConsistency",
    "cleanupOrphaned",
    "flushRouterConfig",
    "getDefaultRWConcern",
    "listSessions",
    "listShards",
    "removeShard",
    "replSetConfigure",
    "replSetGetConfig",
    "replSetGetStatus",
    "replSetStateChange",
    "resync",
    "setClusterParameter",
    "setDefaultRWConcern",
    "setFeatureCompatibilityVersion",
    "setUserWriteBlockMode",
];

const BACKUP_CLUSTER: &[&str] = &[
    "appendOplogNote",
    "getParameter",
    "listDatabases",
    "serverStatus",
    "setUserWriteBlockMode",
];

const BACKUP_ANY: &[&str] = &[
    "collStats",
    "dbHash",
    "dbStats",
    "find",
    "killCursors",
    "listCollections",
    "listIndexes",
];

const RESTORE: &[&str] = &[
    "bypassDocumentValidation",
    "changeCustomData",
    "changePassword",
    "collMod",
    "convertToCapped",
    "createCollection",
    "createIndex",
    "createRole",
    "createUser",
    "dropCollection",
    "dropRole",
    "dropUser",
    "grantRole",
    "insert",
    "listCollections",
    "listIndexes",
    "remove",
    "revokeRole",
    "update",
    "viewRole",
    "viewUser",
];

/// Roles that exist in every database.
pub const DATABASE_ROLES: &[&str] = &["dbAdmin", "dbOwner", "read", "readWrite", "userAdmin"];

/// Roles that exist only in `admin`.
pub const ADMIN_ROLES: &[&str] = &[
    "backup",
    "clusterAdmin",
    "clusterManager",
    "clusterMonitor",
    "dbAdminAnyDatabase",
    "hostManager",
    "readAnyDatabase",
    "readWriteAnyDatabase",
    "restore",
    "root",
    "userAdminAnyDatabase",
];

/// Whether `role@db` is a built-in role.
pub fn is_builtin(role: &str, db: &str) -> bool {
    DATABASE_ROLES.contains(&role) || (db == "admin" && ADMIN_ROLES.contains(&role))
}

/// The built-in roles of `db`, in MongoDB's order for `rolesInfo: {showBuiltinRoles: true}`.
pub fn builtin_roles_of(db: &str) -> Vec<&'static str> {
    let mut all: Vec<&'static str> = DATABASE_ROLES.to_vec();
    if db == "admin" {
        all.extend_from_slice(ADMIN_ROLES);
    }
    all.sort_unstable();
    all
}

fn both(a: &[&'static str], b: &[&'static str]) -> Vec<&'static str> {
    let mut v = a.to_vec();
    v.extend_from_slice(b);
    v
}

/// `read`/`readWrite` on a database pattern plus its time-series buckets.
fn data_access(db: Resource, buckets: Resource, actions: &[&'static str]) -> Vec<Privilege> {
    vec![
        Privilege::new(db, actions),
        Privilege::new(buckets, actions),
    ]
}

/// `actions` on each of the `admin` collections `colls`.
fn on_admin_collections(colls: &[&str], actions: &[&'static str]) -> Vec<Privilege> {
    colls
        .iter()
        .map(|c| Privilege::new(Resource::Namespace("admin".into(), c.to_string()), actions))
        .collect()
}

/// The privileges of built-in role `role@db`, or None when there is no such role.
pub fn builtin_privileges(role: &str, db: &str) -> Option<Vec<Privilege>> {
    if !is_builtin(role, db) {
        return None;
    }
    let database = || Resource::Database(db.to_string());
    let buckets = || Resource::SystemBuckets(db.to_string(), String::new());
    let any_buckets = || Resource::SystemBuckets(String::new(), String::new());
    let cluster = |a: &[&'static str]| Privilege::new(Resource::Cluster, a);
    let read_write = both(READ, WRITE);
    let privileges = match role {
        "read" => data_access(database(), buckets(), READ),
        "readWrite" => data_access(database(), buckets(), &read_write),
        "dbAdmin" => vec![
            Privilege::new(database(), DB_ADMIN),
            Privilege::new(buckets(), DB_ADMIN),
            Privilege::new(
                Resource::Namespace(db.into(), "system.profile".into()),
                PROFILE,
            ),
        ],
        "userAdmin" => vec![Privilege::new(database(), USER_ADMIN)],
        "dbOwner" => ["readWrite", "dbAdmin", "userAdmin"]
            .iter()
            .flat_map(|r| builtin_privileges(r, db).unwrap_or_default())
            .collect(),
        "readAnyDatabase" => {
            let mut p = data_access(Resource::AnyNormal, any_buckets(), READ);
            p.push(cluster(&["listDatabases"]));
            p
        }
        "readWriteAnyDatabase" => {
            let mut p = data_access(Resource::AnyNormal, any_buckets(), &read_write);
            p.push(cluster(&["listDatabases"]));
            p
        }
        "dbAdminAnyDatabase" => vec![
            Privilege::new(Resource::AnyNormal, DB_ADMIN),
            Privilege::new(any_buckets(), DB_ADMIN),
            Privilege::new(Resource::CollectionName("system.profile".into()), PROFILE),
            cluster(&["listDatabases"]),
        ],
        "userAdminAnyDatabase" => {
            let mut p = vec![
                Privilege::new(Resource::AnyNormal, USER_ADMIN),
                Privilege::new(Resource::AnyNormal, &["listCachedAndActiveUsers"]),
                cluster(&[
                    "authSchemaUpgrade",
                    "invalidateUserCache",
                    "listDatabases",
                    "viewUser",
                ]),
            ];
            p.extend(on_admin_collections(
                &["system.users", "system.roles"],
                &[
                    "collStats",
                    "createIndex",
                    "dbHash",
                    "dbStats",
                    "dropIndex",
                    "find",
                    "killCursors",
                    "planCacheRead",
                ],
            ));
            p
        }
        "clusterMonitor" => vec![
            cluster(CLUSTER_MONITOR),
            Privilege::new(
                Resource::AnyNormal,
                &[
                    "collStats",
                    "dbHash",
                    "dbStats",
                    "getShardVersion",
                    "indexStats",
                    "useUUID",
                ],
            ),
        ],
        "hostManager" => vec![
            cluster(HOST_MANAGER),
            Privilege::new(Resource::AnyNormal, &["killCursors"]),
        ],
        "clusterManager" => vec![
            cluster(CLUSTER_MANAGER),
            Privilege::new(
                Resource::AnyNormal,
                &["enableSharding", "moveChunk", "splitChunk", "splitVector"],
            ),
        ],
        "clusterAdmin" => {
            let mut p: Vec<Privilege> = ["clusterManager", "clusterMonitor", "hostManager"]
                .iter()
                .flat_map(|r| builtin_privileges(r, "admin").unwrap_or_default())
                .collect();
            p.push(Privilege::new(Resource::AnyNormal, &["dropDatabase"]));
            p
        }
        "backup" => {
            let mut p = vec![
                cluster(BACKUP_CLUSTER),
                Privilege::new(Resource::AnyNormal, BACKUP_ANY),
                Privilege::new(any_buckets(), BACKUP_ANY),
                Privilege::new(Resource::AnyResource, &["listCollections", "listIndexes"]),
            ];
            p.extend(on_admin_collections(
                &["system.users", "system.roles", "system.version"],
                BACKUP_ANY,
            ));
            p
        }
        "restore" => {
            let mut p = vec![
                cluster(&["getParameter"]),
                Privilege::new(Resource::AnyNormal, RESTORE),
                Privilege::new(any_buckets(), RESTORE),
            ];
            p.extend(on_admin_collections(
                &["system.users", "system.roles"],
                &[
                    "collStats",
                    "createCollection",
                    "createIndex",
                    "dropCollection",
                    "find",
                    "insert",
                    "remove",
                    "update",
                ],
            ));
            p
        }
        "root" => {
            let mut p: Vec<Privilege> = [
                "readWriteAnyDatabase",
                "dbAdminAnyDatabase",
                "userAdminAnyDatabase",
                "clusterAdmin",
                "restore",
                "backup",
            ]
            .iter()
            .flat_map(|r| builtin_privileges(r, "admin").unwrap_or_default())
            .collect();
            p.push(Privilege::new(Resource::AnyResource, &["validate"]));
            p
        }
        _ => return None,
    };
    Some(merge(privileges))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privilege::{allows, Target};

    #[test]
    fn admin_only_roles_do_not_exist_in_other_databases() {
        assert!(builtin_privileges("root", "admin").is_some());
        assert!(builtin_privileges("root", "test").is_none());
        assert!(builtin_privileges("read", "test").is_some());
        assert!(builtin_privileges("nope", "admin").is_none());
    }

    #[test]
    fn read_role_reads_its_database_and_its_buckets_only() {
        let p = builtin_privileges("read", "d").unwrap();
        assert!(allows(&p, "find", &Target::Namespace("d", "c")));
        assert!(allows(
            &p,
            "find",
            &Target::Namespace("d", "system.buckets.m")
        ));
        assert!(!allows(&p, "insert", &Target::Namespace("d", "c")));
        assert!(!allows(&p, "find", &Target::Namespace("e", "c")));
        assert!(!allows(&p, "find", &Target::Namespace("d", "system.users")));
    }

    #[test]
    fn db_admin_manages_but_does_not_read_documents() {
        let p = builtin_privileges("dbAdmin", "d").unwrap();
        assert!(allows(&p, "createIndex", &Target::Namespace("d", "c")));
        assert!(allows(&p, "dropDatabase", &Target::Database("d")));
        assert!(!allows(&p, "find", &Target::Namespace("d", "c")));
    }

    #[test]
    fn root_can_do_everything_a_client_asks_here() {
        let p = builtin_privileges("root", "admin").unwrap();
        for a in [
            "find",
            "insert",
            "createUser",
            "serverStatus",
            "setParameter",
            "dropDatabase",
            "killop",
        ] {
            let t = match a {
                "serverStatus" | "setParameter" | "killop" => Target::Cluster,
                _ => Target::Namespace("x", "y"),
            };
            assert!(allows(&p, a, &t), "{a}");
        }
        assert!(allows(
            &p,
            "find",
            &Target::Namespace("admin", "system.users")
        ));
    }
}
