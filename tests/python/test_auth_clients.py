"""Access control (`--auth`) through the Node.js driver and mongosh, which do their own SCRAM
conversations (mechanism negotiation through hello's saslSupportedMechs, SCRAM-SHA-1 and
SCRAM-SHA-256), unlike pymongo in test_auth.py.

One server (`--auth`) serves the module; its first user (root on admin) is made through the
localhost exception, then a readWrite user on NODE_DB with only SCRAM-SHA-1 credentials and
another with only SCRAM-SHA-256. The Node driver and mongosh come from .tools/node_modules
(scripts/test.sh installs them); the tests skip, saying why, when they are missing."""

import itertools
import json
import os
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT, auth_server
from test_auth import connect

ROOT_USER, ROOT_PWD = "hg_root", "root-secret"
NODE_DB = "nodedb"
PWD = "node-secret"
USERS = {"SCRAM-SHA-1": "node_sha1", "SCRAM-SHA-256": "node_sha256"}
NODE_MODULES = REPO_ROOT / ".tools" / "node_modules"
NODE_DRIVER = NODE_MODULES / "mongodb"
MONGOSH = NODE_MODULES / ".bin" / "mongosh"
ENV = dict(os.environ, MONGOSH_NO_UPDATE_CHECK="1", DO_NOT_TRACK="1")

_names = itertools.count()


def unique(prefix):
    return f"{prefix}_{next(_names)}"


@pytest.fixture(scope="module")
def port():
    with auth_server(user=ROOT_USER, pwd=ROOT_PWD) as (_, port, _):
        root = connect(port, ROOT_USER, ROOT_PWD)
        for mechanism, user in USERS.items():
            root[NODE_DB].command("createUser", user, pwd=PWD, mechanisms=[mechanism],
                                  roles=[{"role": "readWrite", "db": NODE_DB}])
        root.close()
        yield port


@pytest.fixture(scope="module")
def root(port):
    c = connect(port, ROOT_USER, ROOT_PWD)
    yield c
    c.close()


# --------------------------------------------------------------------------- Node driver

NODE_SCRIPT = r"""
const { MongoClient } = require(process.env.HG_NODE_DRIVER);
(async () => {
  const client = new MongoClient(process.env.HG_URI, { serverSelectionTimeoutMS: 5000 });
  const out = {};
  try {
    await client.connect();
    const coll = client.db(process.env.HG_DB).collection(process.env.HG_COLL);
    const ins = await coll.insertOne({ token: process.env.HG_TOKEN, n: 1 });
    out.acknowledged = ins.acknowledged;
    out.docs = await coll.find({ token: process.env.HG_TOKEN }, { projection: { _id: 0 } })
      .toArray();
    const status = await client.db(process.env.HG_DB).command({ connectionStatus: 1 });
    out.users = status.authInfo.authenticatedUsers;
    out.ok = true;
  } catch (e) {
    Object.assign(out, { ok: false, name: e.name, code: e.code, codeName: e.codeName,
                         message: e.message });
  } finally {
    await client.close();
  }
  console.log(JSON.stringify(out));
})();
"""


def node_binary():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: cannot run the Node.js driver")
    if not (NODE_DRIVER / "package.json").exists():
        pytest.skip(f"the Node.js driver is not installed at {NODE_DRIVER} (scripts/test.sh "
                    "installs it with mongosh)")
    return node


def node_insert_and_find(uri, coll, token):
    """Runs NODE_SCRIPT: connects with `uri`, inserts {token, n: 1} into NODE_DB.coll, reads it
    back and runs connectionStatus; returns the script's JSON report."""
    env = dict(ENV, HG_NODE_DRIVER=str(NODE_DRIVER), HG_URI=uri, HG_DB=NODE_DB, HG_COLL=coll,
               HG_TOKEN=token)
    proc = subprocess.run([node_binary(), "-e", NODE_SCRIPT], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr
    return json.loads(lines[-1])


def user_uri(port, user, password, mechanism=None):
    uri = f"mongodb://{user}:{password}@127.0.0.1:{port}/?authSource={NODE_DB}"
    if mechanism is not None:
        uri += f"&authMechanism={mechanism}"
    return uri


@pytest.mark.parametrize("mechanism", sorted(USERS))
def test_node_driver_logs_in_with_the_users_mechanism_inserts_and_reads_back(port, root,
                                                                            mechanism):
    user, coll, token = USERS[mechanism], unique("node"), unique("tok")
    report = node_insert_and_find(user_uri(port, user, PWD, mechanism), coll, token)
    assert report["ok"] is True, report
    assert report["acknowledged"] is True
    assert report["docs"] == [{"token": token, "n": 1}]
    assert report["users"] == [{"user": user, "db": NODE_DB}]
    assert [{k: d[k] for k in ("token", "n")} for d in root[NODE_DB][coll].find()] == [
        {"token": token, "n": 1}]


@pytest.mark.parametrize("mechanism", sorted(USERS))
def test_node_driver_negotiates_the_mechanism_the_user_has(port, root, mechanism):
    # no authMechanism: the driver asks hello for saslSupportedMechs and must pick `mechanism`
    user, coll, token = USERS[mechanism], unique("negotiated"), unique("tok")
    report = node_insert_and_find(user_uri(port, user, PWD), coll, token)
    assert report["ok"] is True, report
    assert report["docs"] == [{"token": token, "n": 1}]
    assert report["users"] == [{"user": user, "db": NODE_DB}]


@pytest.mark.parametrize("mechanism", sorted(USERS))
def test_node_driver_wrong_password_fails_with_authentication_failed(port, root, mechanism):
    coll = unique("wrongpwd")
    report = node_insert_and_find(user_uri(port, USERS[mechanism], "not-the-password", mechanism),
                                  coll, unique("tok"))
    assert report["ok"] is False, report
    assert report["code"] == 18, report
    assert "Authentication failed" in report["message"], report
    assert coll not in root[NODE_DB].list_collection_names()


@pytest.mark.parametrize("mechanism,other", [("SCRAM-SHA-1", "SCRAM-SHA-256"),
                                             ("SCRAM-SHA-256", "SCRAM-SHA-1")])
def test_node_driver_mechanism_the_user_lacks_fails_with_authentication_failed(port, root,
                                                                               mechanism, other):
    coll = unique("wrongmech")
    report = node_insert_and_find(user_uri(port, USERS[mechanism], PWD, other), coll,
                                  unique("tok"))
    assert report["ok"] is False, report
    assert report["code"] == 18, report
    assert coll not in root[NODE_DB].list_collection_names()


# --------------------------------------------------------------------------- mongosh


def mongosh(uri, script):
    """Runs `mongosh --quiet --norc uri --eval script`; returns the CompletedProcess."""
    if not MONGOSH.exists():
        pytest.skip(f"mongosh is not installed at {MONGOSH} (scripts/test.sh installs it)")
    if shutil.which("node") is None:
        pytest.skip("node is not installed: cannot run mongosh")
    return subprocess.run([str(MONGOSH), "--quiet", "--norc", uri, "--eval", script], env=ENV,
                          capture_output=True, text=True, timeout=120)


def mongosh_json(uri, script):
    """Runs `script`, which must print one JSON line last, and returns it parsed."""
    proc = mongosh(uri, script)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stdout.strip().splitlines()
    assert lines, (proc.stdout, proc.stderr)
    return json.loads(lines[-1])


def shell_uri(port, user, password, db=NODE_DB, source=NODE_DB):
    return (f"mongodb://{user}:{password}@127.0.0.1:{port}/{db}?authSource={source}"
            "&directConnection=true&serverSelectionTimeoutMS=5000")


def root_uri(port, db="admin"):
    return shell_uri(port, ROOT_USER, ROOT_PWD, db=db, source="admin")


@pytest.mark.parametrize("mechanism", sorted(USERS))
def test_mongosh_as_read_write_user_inserts_and_counts(port, root, mechanism):
    coll = unique("sh")
    script = (f"db.{coll}.insertMany([{{i: 1}}, {{i: 2}}, {{i: 3}}]);"
              f"print(JSON.stringify({{count: db.{coll}.countDocuments({{}}),"
              " db: db.getName(),"
              " users: db.runCommand({connectionStatus: 1}).authInfo.authenticatedUsers}))")
    out = mongosh_json(shell_uri(port, USERS[mechanism], PWD), script)
    assert out == {"count": 3, "db": NODE_DB,
                   "users": [{"user": USERS[mechanism], "db": NODE_DB}]}
    assert sorted(d["i"] for d in root[NODE_DB][coll].find()) == [1, 2, 3]


def test_mongosh_wrong_password_fails_with_authentication_failed(port, root):
    coll = unique("shbad")
    proc = mongosh(shell_uri(port, USERS["SCRAM-SHA-256"], "not-the-password"),
                   f"db.{coll}.insertOne({{i: 1}})")
    assert proc.returncode != 0, proc.stdout
    assert "Authentication failed" in proc.stdout + proc.stderr, (proc.stdout, proc.stderr)
    assert coll not in root[NODE_DB].list_collection_names()


def test_mongosh_get_users_as_root_lists_the_databases_users(port):
    script = ("const r = db.getSiblingDB('nodedb').getUsers();"
              "print(JSON.stringify(r.users.map(u => ({user: u.user, db: u.db,"
              " mechanisms: u.mechanisms, roles: u.roles}))))")
    users = mongosh_json(root_uri(port), script)
    assert sorted(users, key=lambda u: u["user"]) == sorted(
        [{"user": user, "db": NODE_DB, "mechanisms": [mechanism],
          "roles": [{"role": "readWrite", "db": NODE_DB}]} for mechanism, user in USERS.items()],
        key=lambda u: u["user"])


def test_mongosh_get_users_on_admin_lists_root(port):
    script = "print(JSON.stringify(db.getUsers().users.map(u => u.user)))"
    assert ROOT_USER in mongosh_json(root_uri(port), script)


def test_mongosh_show_users_as_root_prints_the_databases_users(port):
    proc = mongosh(root_uri(port, db=NODE_DB), "show users")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    for user in USERS.values():
        assert f"'{user}'" in proc.stdout, proc.stdout
    assert f"'{ROOT_USER}'" not in proc.stdout  # root lives in admin


def test_mongosh_get_users_as_read_write_user_is_unauthorized(port):
    script = ("try { db.getUsers(); print(JSON.stringify({ok: true})) }"
              " catch (e) { print(JSON.stringify({code: e.code, codeName: e.codeName})) }")
    assert mongosh_json(shell_uri(port, USERS["SCRAM-SHA-256"], PWD), script) == {
        "code": 13, "codeName": "Unauthorized"}


def test_mongosh_get_roles_with_builtin_roles_lists_read_and_read_write(port, root):
    custom = unique("noderole")
    root[NODE_DB].command("createRole", custom, roles=[{"role": "read", "db": NODE_DB}],
                          privileges=[])
    # mongosh's getRoles returns the rolesInfo reply ({roles: [...], ok: 1})
    script = ("const roles = db.getSiblingDB('nodedb').getRoles({showBuiltinRoles: true}).roles;"
              "print(JSON.stringify(roles.map(r => ({role: r.role, db: r.db,"
              " isBuiltin: r.isBuiltin}))))")
    roles = {r["role"]: r for r in mongosh_json(root_uri(port), script)}
    for builtin in ("read", "readWrite", "dbAdmin", "dbOwner", "userAdmin"):
        assert roles.get(builtin) == {"role": builtin, "db": NODE_DB, "isBuiltin": True}, roles
    assert roles.get(custom) == {"role": custom, "db": NODE_DB, "isBuiltin": False}, roles
    # cluster-wide roles belong to admin only
    assert "root" not in roles and "clusterMonitor" not in roles


def test_mongosh_get_roles_without_builtin_roles_lists_user_defined_roles_only(port, root):
    custom = unique("plainrole")
    root[NODE_DB].command("createRole", custom, roles=[], privileges=[])
    script = ("print(JSON.stringify(db.getSiblingDB('nodedb').getRoles()"
              ".roles.map(r => r.role)))")
    names = mongosh_json(root_uri(port), script)
    assert custom in names
    assert not {"read", "readWrite", "dbOwner"} & set(names), names
