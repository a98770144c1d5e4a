"""Access control (`--auth`) as MongoDB 7.0 has it, through pymongo and the raw wire protocol:
SCRAM-SHA-1 / SCRAM-SHA-256 logins (AuthenticationFailed 18), Unauthorized 13, the localhost
exception, hello's saslSupportedMechs and speculativeAuthenticate, logout, connectionStatus,
the user management commands (createUser 51003, dropUser 11, unknown roles 31, usersInfo,
updateUser, grantRolesToUser / revokeRolesFromUser on open connections), the role management
commands (createRole 51002, rolesInfo, grant/revokePrivileges, grant/revokeRolesToRole,
updateRole, dropRole, dropAllRolesFromDatabase) and a matrix of built-in roles against
operations on a regular and a time-series collection.

One server (`--auth`) serves the module; its first user (root on admin) is made through the
localhost exception. Every test makes its own users and names, so tests do not depend on each
other's order."""

import base64
import datetime
import hashlib
import hmac
import itertools
import os
import socket
import struct
import time
import uuid

import bson
import pytest
from bson.binary import Binary
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import auth_server, running_server

ADMIN_USER, ADMIN_PWD = "hg_root", "root-secret"
PWD = "user-secret"
LOGIN_DB = "authz_login"
MATRIX_DB = "authz_matrix"
OTHER_DB = "authz_other"
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
TIMESERIES = {"timeField": "t", "metaField": "h"}

_names = itertools.count()


def unique(prefix):
    return f"{prefix}_{next(_names)}"


def connect(port, user=None, password=None, source="admin", mechanism=None, **kwargs):
    options = {"directConnection": True, "serverSelectionTimeoutMS": 5000}
    if user is not None:
        options.update(username=user, password=password, authSource=source)
    if mechanism is not None:
        options["authMechanism"] = mechanism
    options.update(kwargs)
    return MongoClient("127.0.0.1", port, **options)


def assert_error(excinfo, code, code_name):
    err = excinfo.value
    assert (err.code, err.details.get("codeName")) == (code, code_name), err.details


def assert_unauthorized(excinfo):
    assert_error(excinfo, 13, "Unauthorized")


def make_user(admin, roles, db="admin", password=PWD, **extra):
    name = unique("user")
    admin[db].command("createUser", name, pwd=password, roles=roles, **extra)
    return name


def make_role(admin, db, privileges=(), roles=()):
    name = unique("role")
    admin[db].command("createRole", name, privileges=list(privileges), roles=list(roles))
    return name


# --------------------------------------------------------------------------- raw wire client


class Wire:
    """One socket speaking OP_MSG: every command runs on this very connection."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.request_id = 0

    def _recv(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("server closed the connection")
            data += chunk
        return data

    def command(self, db, body):
        doc = dict(body)
        doc["$db"] = db
        payload = struct.pack("<I", 0) + b"\x00" + bson.encode(doc)
        self.request_id += 1
        self.sock.sendall(struct.pack("<iiii", 16 + len(payload), self.request_id, 0, 2013) + payload)
        length, _, response_to, opcode = struct.unpack("<iiii", self._recv(16))
        rest = self._recv(length - 16)
        assert (opcode, response_to) == (2013, self.request_id)
        assert rest[4] == 0, "reply must start with a body section"
        size = struct.unpack("<i", rest[5:9])[0]
        return bson.decode(rest[5:5 + size])

    def close(self):
        self.sock.close()


class Scram:
    """The client side of SCRAM-SHA-1 / SCRAM-SHA-256 as MongoDB drivers speak it (RFC 5802,
    RFC 7677; SCRAM-SHA-1 hashes the password as md5("user:mongo:pwd") first)."""

    def __init__(self, mechanism, user, password):
        self.mechanism, self.user, self.password = mechanism, user, password
        self.digest = hashlib.sha1 if mechanism == "SCRAM-SHA-1" else hashlib.sha256
        self.nonce = base64.b64encode(os.urandom(24)).decode()
        escaped = user.replace("=", "=3D").replace(",", "=2C")
        self.first_bare = f"n={escaped},r={self.nonce}"
        self.server_signature = None

    def client_first(self):
        return ("n,," + self.first_bare).encode()

    def client_final(self, server_first):
        server_first = bytes(server_first).decode()
        fields = dict(kv.split("=", 1) for kv in server_first.split(","))
        assert fields["r"].startswith(self.nonce), "server nonce must extend the client nonce"
        salted = salted_password(self.mechanism, self.user, self.password,
                                 base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", self.digest).digest()
        stored_key = self.digest(client_key).digest()
        without_proof = "c=biws,r=" + fields["r"]
        auth_message = ",".join([self.first_bare, server_first, without_proof]).encode()
        signature = hmac.new(stored_key, auth_message, self.digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", self.digest).digest()
        self.server_signature = base64.b64encode(
            hmac.new(server_key, auth_message, self.digest).digest()).decode()
        return (without_proof + ",p=" + base64.b64encode(proof).decode()).encode()

    def check_server_final(self, server_final):
        fields = dict(kv.split("=", 1) for kv in bytes(server_final).decode().split(","))
        assert fields.get("v") == self.server_signature, "server signature must verify"


def salted_password(mechanism, user, password, salt, iterations):
    if mechanism == "SCRAM-SHA-1":
        hashed = hashlib.md5(f"{user}:mongo:{password}".encode()).hexdigest().encode()
        return hashlib.pbkdf2_hmac("sha1", hashed, salt, iterations)
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)


def finish_scram(wire, db, scram, first_reply):
    assert first_reply["ok"] == 1, first_reply
    assert first_reply["done"] is False
    reply = wire.command(db, {"saslContinue": 1, "conversationId": first_reply["conversationId"],
                              "payload": Binary(scram.client_final(first_reply["payload"]))})
    assert reply["ok"] == 1, reply
    scram.check_server_final(reply["payload"])
    while not reply["done"]:
        reply = wire.command(db, {"saslContinue": 1, "conversationId": reply["conversationId"],
                                  "payload": Binary(b"")})
        assert reply["ok"] == 1, reply
    return reply


def wire_login(wire, db, user, password, mechanism="SCRAM-SHA-256"):
    scram = Scram(mechanism, user, password)
    first = wire.command(db, {"saslStart": 1, "mechanism": mechanism,
                              "payload": Binary(scram.client_first()), "autoAuthorize": 1})
    return finish_scram(wire, db, scram, first)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def port():
    with auth_server(user=ADMIN_USER, pwd=ADMIN_PWD) as (_, port, _):
        yield port


@pytest.fixture(scope="module")
def admin(port):
    c = connect(port, ADMIN_USER, ADMIN_PWD)
    c[LOGIN_DB].c.insert_one({"seed": True})
    yield c
    c.close()


@pytest.fixture
def clients(port):
    """Opens clients on the module's server (same arguments as `connect` after the port) and
    closes them after the test."""
    opened = []

    def open_client(*args, **kwargs):
        c = connect(port, *args, **kwargs)
        opened.append(c)
        return c

    yield open_client
    for c in opened:
        c.close()


@pytest.fixture
def wires(port):
    opened = []

    def open_wire():
        w = Wire(port)
        opened.append(w)
        return w

    yield open_wire
    for w in opened:
        w.close()


# --------------------------------------------------------------------------- logins


@pytest.mark.parametrize("mechanism", [None, "SCRAM-SHA-1", "SCRAM-SHA-256"],
                         ids=["negotiated", "SCRAM-SHA-1", "SCRAM-SHA-256"])
def test_scram_login_succeeds_and_can_run_a_find(admin, clients, mechanism):
    token = unique("doc")
    admin[LOGIN_DB].c.insert_one({"token": token})
    user = make_user(admin, [{"role": "read", "db": LOGIN_DB}])
    c = clients(user, PWD, mechanism=mechanism)
    assert [d["token"] for d in c[LOGIN_DB].c.find({"token": token})] == [token]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-1", "SCRAM-SHA-256"])
def test_wrong_password_fails_with_authentication_failed(admin, clients, mechanism):
    user = make_user(admin, [{"role": "read", "db": LOGIN_DB}])
    c = clients(user, "not-the-password", mechanism=mechanism)
    with pytest.raises(OperationFailure) as e:
        c[LOGIN_DB].c.find_one()
    assert_error(e, 18, "AuthenticationFailed")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-1", "SCRAM-SHA-256"])
def test_unknown_user_fails_with_authentication_failed(clients, mechanism):
    c = clients(unique("nobody"), PWD, mechanism=mechanism)
    with pytest.raises(OperationFailure) as e:
        c[LOGIN_DB].c.find_one()
    assert_error(e, 18, "AuthenticationFailed")


def test_user_created_for_scram_sha_256_only_is_refused_with_scram_sha_1(admin, clients):
    user = make_user(admin, [{"role": "read", "db": LOGIN_DB}], mechanisms=["SCRAM-SHA-256"])
    clients(user, PWD, mechanism="SCRAM-SHA-256")[LOGIN_DB].c.find_one()  # the user exists
    c = clients(user, PWD, mechanism="SCRAM-SHA-1")
    with pytest.raises(OperationFailure) as e:
        c[LOGIN_DB].c.find_one()
    assert_error(e, 18, "AuthenticationFailed")


def test_unauthenticated_find_fails_with_unauthorized(admin, clients):
    with pytest.raises(OperationFailure) as e:
        clients()[LOGIN_DB].c.find_one()
    assert_unauthorized(e)


def test_unauthenticated_clients_may_run_hello_ping_and_connection_status(admin, clients):
    c = clients()
    assert c.admin.command("hello")["isWritablePrimary"] is True
    assert c.admin.command("ping")["ok"] == 1
    info = c.admin.command("connectionStatus")["authInfo"]
    assert info["authenticatedUsers"] == []
    assert info["authenticatedUserRoles"] == []


def test_localhost_exception_allows_only_the_first_user():
    with running_server("--auth") as (_, port, _):
        c = connect(port)
        c.admin.command("createUser", "first", pwd=PWD,
                        roles=[{"role": "userAdminAnyDatabase", "db": "admin"}])
        # the same connection, and any new one, has lost the exception
        with pytest.raises(OperationFailure) as e:
            c.admin.command("createUser", "second", pwd=PWD, roles=[])
        assert_unauthorized(e)
        fresh = connect(port)
        with pytest.raises(OperationFailure) as e:
            fresh.admin.command("createUser", "second", pwd=PWD, roles=[])
        assert_unauthorized(e)
        first = connect(port, "first", PWD)
        first.admin.command("createUser", "second", pwd=PWD, roles=[])
        names = [u["user"] for u in first.admin.command("usersInfo", 1)["users"]]
        assert sorted(names) == ["first", "second"]
        for client in (c, fresh, first):
            client.close()


def test_under_the_localhost_exception_other_commands_require_authentication():
    with running_server("--auth") as (_, port, _):
        c = connect(port)
        for db, command in [("t", {"find": "c"}), ("admin", {"listDatabases": 1})]:
            with pytest.raises(OperationFailure) as e:
                c[db].command(command)
            assert e.value.code == 13
            name = next(iter(command))
            assert e.value.details["errmsg"] == f"command {name} requires authentication"
        c.close()


# --------------------------------------------------------------------------- hello


def test_hello_sasl_supported_mechs_lists_the_user_mechanisms(admin, clients):
    only_256 = make_user(admin, [], mechanisms=["SCRAM-SHA-256"])
    both = make_user(admin, [])
    c = clients()
    assert c.admin.command("hello", saslSupportedMechs=f"admin.{only_256}")[
        "saslSupportedMechs"] == ["SCRAM-SHA-256"]
    assert sorted(c.admin.command("hello", saslSupportedMechs=f"admin.{both}")[
        "saslSupportedMechs"]) == ["SCRAM-SHA-1", "SCRAM-SHA-256"]


def test_hello_sasl_supported_mechs_is_omitted_for_an_unknown_user(admin, clients):
    reply = clients().admin.command("hello", saslSupportedMechs=f"admin.{unique('ghost')}")
    assert "saslSupportedMechs" not in reply
    assert reply["ok"] == 1


def test_speculative_authenticate_in_hello_starts_the_scram_conversation(admin, wires):
    user = make_user(admin, [{"role": "read", "db": LOGIN_DB}])
    w = wires()
    scram = Scram("SCRAM-SHA-256", user, PWD)
    hello = w.command("admin", {"hello": 1, "speculativeAuthenticate": {
        "saslStart": 1, "mechanism": "SCRAM-SHA-256",
        "payload": Binary(scram.client_first()), "db": "admin"}})
    assert hello["ok"] == 1
    first = dict(hello["speculativeAuthenticate"], ok=1)
    finish_scram(w, "admin", scram, first)
    reply = w.command(LOGIN_DB, {"find": "c", "filter": {"seed": True}})
    assert reply["ok"] == 1, reply
    assert len(reply["cursor"]["firstBatch"]) == 1


def test_an_abandoned_sasl_start_does_not_block_other_clients(admin, clients, wires):
    abandoned = []
    for _ in range(3):
        w = wires()
        scram = Scram("SCRAM-SHA-256", ADMIN_USER, ADMIN_PWD)
        reply = w.command("admin", {"saslStart": 1, "mechanism": "SCRAM-SHA-256",
                                    "payload": Binary(scram.client_first())})
        assert reply["ok"] == 1 and reply["done"] is False, reply
        abandoned.append(w)  # never sends saslContinue
    user = make_user(admin, [{"role": "read", "db": LOGIN_DB}])
    started = time.monotonic()
    c = clients(user, PWD, socketTimeoutMS=10000, connectTimeoutMS=10000)
    assert c[LOGIN_DB].c.find_one({"seed": True}) is not None
    assert time.monotonic() - started < 10
    # a conversation that was never finished grants nothing
    reply = abandoned[0].command(LOGIN_DB, {"find": "c"})
    assert (reply["ok"], reply["code"], reply["codeName"]) == (0, 13, "Unauthorized")


def test_malformed_sasl_payload_fails_with_authentication_failed_and_keeps_the_connection(
        admin, wires):
    w = wires()
    reply = w.command("admin", {"saslStart": 1, "mechanism": "SCRAM-SHA-256",
                                "payload": Binary(b"this is not a SCRAM message")})
    assert (reply["ok"], reply["code"], reply["codeName"]) == (0, 18, "AuthenticationFailed")
    assert w.command("admin", {"ping": 1})["ok"] == 1
    wire_login(w, "admin", ADMIN_USER, ADMIN_PWD)
    assert w.command(LOGIN_DB, {"find": "c"})["ok"] == 1


# --------------------------------------------------------------------------- connectionStatus, logout


def test_connection_status_lists_the_authenticated_user_and_roles(admin, clients):
    roles = [{"role": "read", "db": LOGIN_DB}, {"role": "readWrite", "db": OTHER_DB}]
    user = make_user(admin, roles)
    info = clients(user, PWD).admin.command("connectionStatus")["authInfo"]
    assert info["authenticatedUsers"] == [{"user": user, "db": "admin"}]
    key = lambda r: (r["role"], r["db"])  # noqa: E731
    assert sorted(info["authenticatedUserRoles"], key=key) == sorted(roles, key=key)


def test_logout_ends_the_connection_authentication(admin, wires):
    user = make_user(admin, [{"role": "read", "db": LOGIN_DB}])
    w = wires()
    wire_login(w, "admin", user, PWD)
    assert w.command(LOGIN_DB, {"find": "c"})["ok"] == 1
    assert w.command("admin", {"logout": 1})["ok"] == 1
    reply = w.command(LOGIN_DB, {"find": "c"})
    assert (reply["ok"], reply["code"]) == (0, 13)
    info = w.command("admin", {"connectionStatus": 1})["authInfo"]
    assert info["authenticatedUsers"] == []


# --------------------------------------------------------------------------- user management


def test_users_info_reports_user_db_roles_mechanisms_and_no_credentials(admin):
    db = "authz_usersinfo"
    name = unique("user")
    admin[db].command("createUser", name, pwd=PWD, roles=["read"])
    users = admin[db].command("usersInfo", name)["users"]
    assert len(users) == 1
    user = users[0]
    assert user["_id"] == f"{db}.{name}"
    assert (user["user"], user["db"]) == (name, db)
    assert user["roles"] == [{"role": "read", "db": db}]
    assert sorted(user["mechanisms"]) == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
    assert "credentials" not in user
    user_id = user["userId"]
    if isinstance(user_id, Binary):
        assert user_id.subtype == 4
    else:
        assert isinstance(user_id, uuid.UUID)
    # the {user, db} form names the same user
    again = admin.admin.command("usersInfo", {"user": name, "db": db})["users"]
    assert [u["_id"] for u in again] == [f"{db}.{name}"]


def test_users_info_show_credentials_gives_scram_keys_that_match_the_password(admin):
    name = make_user(admin, [])
    user = admin.admin.command("usersInfo", name, showCredentials=True)["users"][0]
    creds = user["credentials"]
    assert sorted(creds) == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
    for mechanism, digest in (("SCRAM-SHA-1", hashlib.sha1), ("SCRAM-SHA-256", hashlib.sha256)):
        cred = creds[mechanism]
        salted = salted_password(mechanism, name, PWD, base64.b64decode(cred["salt"]),
                                 cred["iterationCount"])
        client_key = hmac.new(salted, b"Client Key", digest).digest()
        assert base64.b64decode(cred["storedKey"]) == digest(client_key).digest(), mechanism
        assert base64.b64decode(cred["serverKey"]) == hmac.new(
            salted, b"Server Key", digest).digest(), mechanism


def test_scram_credentials_use_mongodb_default_iteration_counts(admin):
    name = make_user(admin, [])
    creds = admin.admin.command("usersInfo", name, showCredentials=True)["users"][0]["credentials"]
    assert creds["SCRAM-SHA-1"]["iterationCount"] == 10000
    assert creds["SCRAM-SHA-256"]["iterationCount"] == 15000


def test_users_info_of_an_unknown_user_is_an_empty_list(admin):
    reply = admin.admin.command("usersInfo", unique("ghost"))
    assert (reply["ok"], reply["users"]) == (1, [])


def test_users_may_view_their_own_users_info_but_not_another_users(admin, clients):
    me = make_user(admin, [])
    other = make_user(admin, [])
    c = clients(me, PWD)
    assert [u["user"] for u in c.admin.command("usersInfo", me)["users"]] == [me]
    with pytest.raises(OperationFailure) as e:
        c.admin.command("usersInfo", other)
    assert_unauthorized(e)


def test_user_created_with_one_mechanism_lists_only_that_mechanism(admin):
    name = make_user(admin, [], mechanisms=["SCRAM-SHA-256"])
    user = admin.admin.command("usersInfo", name)["users"][0]
    assert user["mechanisms"] == ["SCRAM-SHA-256"]


def test_drop_user_of_an_unknown_user_fails_with_user_not_found(admin):
    with pytest.raises(OperationFailure) as e:
        admin.admin.command("dropUser", unique("ghost"))
    assert_error(e, 11, "UserNotFound")


def test_create_user_of_an_existing_user_fails_with_51003(admin):
    name = make_user(admin, [])
    with pytest.raises(OperationFailure) as e:
        admin.admin.command("createUser", name, pwd=PWD, roles=[])
    assert_error(e, 51003, "Location51003")
    assert "already exists" in e.value.details["errmsg"]


def test_create_user_with_an_unknown_role_fails_with_role_not_found(admin):
    name = unique("user")
    with pytest.raises(OperationFailure) as e:
        admin.admin.command("createUser", name, pwd=PWD,
                            roles=[{"role": "noSuchRole", "db": "admin"}])
    assert_error(e, 31, "RoleNotFound")
    assert admin.admin.command("usersInfo", name)["users"] == []


def test_grant_roles_to_user_with_an_unknown_role_fails_with_role_not_found(admin):
    name = make_user(admin, [])
    with pytest.raises(OperationFailure) as e:
        admin.admin.command("grantRolesToUser", name, roles=[{"role": "noSuchRole", "db": "admin"}])
    assert_error(e, 31, "RoleNotFound")


def test_update_user_password_makes_the_old_password_fail(admin, clients):
    name = make_user(admin, [{"role": "read", "db": LOGIN_DB}], password="old-password")
    admin.admin.command("updateUser", name, pwd="new-password")
    with pytest.raises(OperationFailure) as e:
        clients(name, "old-password")[LOGIN_DB].c.find_one()
    assert_error(e, 18, "AuthenticationFailed")
    assert clients(name, "new-password")[LOGIN_DB].c.find_one({"seed": True}) is not None


def test_granted_role_applies_to_an_open_connection_next_command(admin, clients):
    name = make_user(admin, [])
    c = clients(name, PWD, maxPoolSize=1)
    with pytest.raises(OperationFailure) as e:
        c[LOGIN_DB].c.find_one()
    assert_unauthorized(e)
    admin.admin.command("grantRolesToUser", name, roles=[{"role": "read", "db": LOGIN_DB}])
    assert c[LOGIN_DB].c.find_one({"seed": True}) is not None


def test_revoked_role_applies_to_an_open_connection_next_command(admin, clients):
    name = make_user(admin, [{"role": "read", "db": LOGIN_DB}])
    c = clients(name, PWD, maxPoolSize=1)
    assert c[LOGIN_DB].c.find_one({"seed": True}) is not None
    admin.admin.command("revokeRolesFromUser", name, roles=[{"role": "read", "db": LOGIN_DB}])
    with pytest.raises(OperationFailure) as e:
        c[LOGIN_DB].c.find_one()
    assert_unauthorized(e)


def test_dropped_user_loses_access_on_an_open_connection(admin, clients):
    name = make_user(admin, [{"role": "read", "db": LOGIN_DB}])
    c = clients(name, PWD, maxPoolSize=1)
    assert c[LOGIN_DB].c.find_one({"seed": True}) is not None
    admin.admin.command("dropUser", name)
    with pytest.raises(OperationFailure) as e:
        c[LOGIN_DB].c.find_one()
    assert_unauthorized(e)


def test_drop_all_users_from_database_reports_how_many_it_dropped(admin):
    db = "authz_dropall"
    for _ in range(2):
        make_user(admin, [], db=db)
    keeper = make_user(admin, [])
    reply = admin[db].command("dropAllUsersFromDatabase")
    assert reply["n"] == 2
    assert admin[db].command("usersInfo", 1)["users"] == []
    assert admin.admin.command("usersInfo", keeper)["users"] != []


# --------------------------------------------------------------------------- role management


def test_custom_role_with_find_on_one_collection_grants_exactly_that(admin, clients):
    db = "authz_custom"
    admin[db].a.insert_one({"k": 1})
    admin[db].b.insert_one({"k": 2})
    role = make_role(admin, db, privileges=[
        {"resource": {"db": db, "collection": "a"}, "actions": ["find"]}])
    c = clients(make_user(admin, [{"role": role, "db": db}]), PWD)
    assert [d["k"] for d in c[db].a.find({}, {"_id": 0})] == [1]
    refused = {
        "find on another collection": lambda: c[db].b.find_one(),
        "insert": lambda: c[db].a.insert_one({"k": 3}),
        "update": lambda: c[db].a.update_one({"k": 1}, {"$set": {"k": 4}}),
        "delete": lambda: c[db].a.delete_one({"k": 1}),
        "createIndexes": lambda: c[db].a.create_index("k"),
        "drop": lambda: c[db].command("drop", "a"),
    }
    for what, action in refused.items():
        with pytest.raises(OperationFailure) as e:
            action()
        assert e.value.code == 13, what
    assert [d["k"] for d in admin[db].a.find({}, {"_id": 0})] == [1]


def test_find_privilege_on_a_time_series_collection_name_authorizes_reading_it(admin, clients):
    db = "authz_ts_custom"
    name = unique("ts")
    admin[db].create_collection(name, timeseries=TIMESERIES)
    admin[db][name].insert_one({"t": T0, "h": "a", "v": 1})
    role = make_role(admin, db, privileges=[
        {"resource": {"db": db, "collection": name}, "actions": ["find"]}])
    c = clients(make_user(admin, [{"role": role, "db": db}]), PWD)
    assert [d["v"] for d in c[db][name].find()] == [1]


def test_privileges_on_the_buckets_collection_do_not_authorize_the_time_series_view(
        admin, clients):
    db = "authz_ts_custom"
    name = unique("ts")
    admin[db].create_collection(name, timeseries=TIMESERIES)
    admin[db][name].insert_one({"t": T0, "h": "a", "v": 1})
    role = make_role(admin, db, privileges=[
        {"resource": {"db": db, "collection": f"system.buckets.{name}"}, "actions": ["find"]}])
    c = clients(make_user(admin, [{"role": role, "db": db}]), PWD)
    with pytest.raises(OperationFailure) as e:
        c[db][name].find_one()
    assert_unauthorized(e)


def test_roles_info_reports_a_custom_role_and_its_privileges(admin):
    db = "authz_rolesinfo"
    privileges = [{"resource": {"db": db, "collection": "a"}, "actions": ["find"]}]
    role = make_role(admin, db, privileges=privileges)
    roles = admin[db].command("rolesInfo", role, showPrivileges=True)["roles"]
    assert len(roles) == 1
    info = roles[0]
    assert (info["role"], info["db"], info["isBuiltin"]) == (role, db, False)
    assert info["roles"] == []
    assert info["privileges"] == privileges
    builtin = admin[db].command("rolesInfo", {"role": "read", "db": db})["roles"]
    assert [(r["role"], r["isBuiltin"]) for r in builtin] == [("read", True)]


def test_create_role_of_an_existing_role_fails_with_51002(admin):
    db = "authz_rolesinfo"
    role = make_role(admin, db)
    with pytest.raises(OperationFailure) as e:
        admin[db].command("createRole", role, privileges=[], roles=[])
    assert_error(e, 51002, "Location51002")


def test_granted_and_revoked_privileges_apply_to_an_open_connection(admin, clients):
    db = "authz_privs"
    admin[db].a.insert_one({"k": 1})
    role = make_role(admin, db)
    c = clients(make_user(admin, [{"role": role, "db": db}]), PWD, maxPoolSize=1)
    with pytest.raises(OperationFailure) as e:
        c[db].a.find_one()
    assert_unauthorized(e)
    privilege = {"resource": {"db": db, "collection": "a"}, "actions": ["find"]}
    admin[db].command("grantPrivilegesToRole", role, privileges=[privilege])
    assert c[db].a.find_one({"k": 1}) is not None
    admin[db].command("revokePrivilegesFromRole", role, privileges=[privilege])
    with pytest.raises(OperationFailure) as e:
        c[db].a.find_one()
    assert_unauthorized(e)


def test_roles_granted_to_a_role_are_inherited_by_its_users(admin, clients):
    db = "authz_inherit"
    admin[db].a.insert_one({"k": 1})
    role = make_role(admin, db)
    c = clients(make_user(admin, [{"role": role, "db": db}]), PWD, maxPoolSize=1)
    admin[db].command("grantRolesToRole", role, roles=[{"role": "read", "db": db}])
    assert c[db].a.find_one({"k": 1}) is not None
    admin[db].command("revokeRolesFromRole", role, roles=[{"role": "read", "db": db}])
    with pytest.raises(OperationFailure) as e:
        c[db].a.find_one()
    assert_unauthorized(e)


def test_update_role_replaces_its_privileges(admin, clients):
    db = "authz_updaterole"
    admin[db].a.insert_one({"k": 1})
    role = make_role(admin, db, privileges=[
        {"resource": {"db": db, "collection": "a"}, "actions": ["find"]}])
    c = clients(make_user(admin, [{"role": role, "db": db}]), PWD, maxPoolSize=1)
    assert c[db].a.find_one({"k": 1}) is not None
    admin[db].command("updateRole", role, privileges=[
        {"resource": {"db": db, "collection": "a"}, "actions": ["insert"]}])
    c[db].a.insert_one({"k": 2})
    with pytest.raises(OperationFailure) as e:
        c[db].a.find_one()
    assert_unauthorized(e)


def test_dropped_role_no_longer_grants_its_privileges(admin, clients):
    db = "authz_droprole"
    admin[db].a.insert_one({"k": 1})
    role = make_role(admin, db, privileges=[
        {"resource": {"db": db, "collection": "a"}, "actions": ["find"]}])
    c = clients(make_user(admin, [{"role": role, "db": db}]), PWD, maxPoolSize=1)
    assert c[db].a.find_one({"k": 1}) is not None
    admin[db].command("dropRole", role)
    with pytest.raises(OperationFailure) as e:
        c[db].a.find_one()
    assert_unauthorized(e)


def test_drop_all_roles_from_database_reports_how_many_it_dropped(admin):
    db = "authz_droproles"
    for _ in range(2):
        make_role(admin, db)
    reply = admin[db].command("dropAllRolesFromDatabase")
    assert reply["n"] == 2
    assert admin[db].command("rolesInfo", 1)["roles"] == []


# --------------------------------------------------------------------------- built-in roles


# Built-in roles that exist only on admin; the others are granted on MATRIX_DB.
ADMIN_ONLY_ROLES = {"clusterMonitor", "readAnyDatabase", "readWriteAnyDatabase", "root"}
COLLECTION_OPS = ("find", "insert", "update", "delete", "create", "drop", "createIndexes")
DATABASE_OPS = ("listCollections", "listDatabases", "serverStatus", "createUser")
ALL_OPS = set(COLLECTION_OPS + DATABASE_OPS)
WRITE_OPS = {"insert", "update", "delete", "create", "drop", "createIndexes"}
# What each role may do on MATRIX_DB (MongoDB 7.0 built-in roles; listDatabases is run with
# authorizedDatabases: false, so it needs the listDatabases action on the cluster).
ALLOWED = {
    "read": {"find", "listCollections"},
    "readWrite": {"find", "listCollections"} | WRITE_OPS,
    "dbAdmin": {"create", "drop", "createIndexes", "listCollections"},
    "userAdmin": {"createUser"},
    "dbOwner": {"find", "listCollections", "createUser"} | WRITE_OPS,
    "clusterMonitor": {"listDatabases", "serverStatus"},
    "readAnyDatabase": {"find", "listCollections", "listDatabases"},
    "readWriteAnyDatabase": {"find", "listCollections", "listDatabases"} | WRITE_OPS,
    "root": ALL_OPS,
}


def _matrix_cases():
    for role in ALLOWED:
        for op in COLLECTION_OPS:
            for kind in ("regular", "timeseries"):
                yield pytest.param(role, op, kind, id=f"{role}-{op}-{kind}")
        for op in DATABASE_OPS:
            yield pytest.param(role, op, "database", id=f"{role}-{op}")


@pytest.fixture(scope="module")
def matrix(admin, port):
    """Returns a function giving a client logged in as a user holding just one built-in role."""
    db = admin[MATRIX_DB]
    db.c.insert_one({"h": "seed", "v": 0})
    db.create_collection("ts", timeseries=TIMESERIES)
    db.ts.insert_one({"t": T0, "h": "seed", "v": 0})
    admin[OTHER_DB].marker.insert_one({})
    opened = {}

    def client_for(role):
        if role not in opened:
            name = f"matrix_{role}"
            on = "admin" if role in ADMIN_ONLY_ROLES else MATRIX_DB
            admin.admin.command("createUser", name, pwd=PWD, roles=[{"role": role, "db": on}])
            opened[role] = connect(port, name, PWD)
        return opened[role]

    yield client_for
    for c in opened.values():
        c.close()


def _collection_of(kind):
    return "ts" if kind == "timeseries" else "c"


def _new_collection(admin, kind):
    name = unique(kind)
    if kind == "timeseries":
        admin[MATRIX_DB].create_collection(name, timeseries=TIMESERIES)
    else:
        admin[MATRIX_DB].create_collection(name)
    return name


def _doc(kind, h):
    return {"t": T0, "h": h, "v": 1} if kind == "timeseries" else {"h": h, "v": 1}


def _op_find(user, admin, kind):
    def act():
        reply = user[MATRIX_DB].command("find", _collection_of(kind), filter={"h": "seed"})
        assert [d["h"] for d in reply["cursor"]["firstBatch"]] == ["seed"]
    return act, None


def _op_insert(user, admin, kind):
    token = unique("ins")

    def act():
        reply = user[MATRIX_DB].command("insert", _collection_of(kind), documents=[_doc(kind, token)])
        assert reply["n"] == 1 and "writeErrors" not in reply, reply
    return act, lambda: admin[MATRIX_DB][_collection_of(kind)].count_documents({"h": token}) == 1


def _op_update(user, admin, kind):
    old, new = unique("old"), unique("new")
    admin[MATRIX_DB][_collection_of(kind)].insert_one(_doc(kind, old))

    def act():
        reply = user[MATRIX_DB].command("update", _collection_of(kind), updates=[
            {"q": {"h": old}, "u": {"$set": {"h": new}}, "multi": True}])
        assert reply["nModified"] == 1 and "writeErrors" not in reply, reply
    return act, lambda: admin[MATRIX_DB][_collection_of(kind)].count_documents({"h": new}) == 1


def _op_delete(user, admin, kind):
    token = unique("del")
    admin[MATRIX_DB][_collection_of(kind)].insert_one(_doc(kind, token))

    def act():
        reply = user[MATRIX_DB].command("delete", _collection_of(kind),
                                        deletes=[{"q": {"h": token}, "limit": 0}])
        assert reply["n"] == 1 and "writeErrors" not in reply, reply
    return act, lambda: admin[MATRIX_DB][_collection_of(kind)].count_documents({"h": token}) == 0


def _op_create(user, admin, kind):
    name = unique("created")

    def act():
        if kind == "timeseries":
            user[MATRIX_DB].command("create", name, timeseries=TIMESERIES)
        else:
            user[MATRIX_DB].command("create", name)
    return act, lambda: name in admin[MATRIX_DB].list_collection_names()


def _op_drop(user, admin, kind):
    name = _new_collection(admin, kind)
    return (lambda: user[MATRIX_DB].command("drop", name),
            lambda: name not in admin[MATRIX_DB].list_collection_names())


def _op_create_indexes(user, admin, kind):
    name = _new_collection(admin, kind)

    def act():
        user[MATRIX_DB].command("createIndexes", name, indexes=[{"key": {"h": 1}, "name": "h_1"}])
    return act, lambda: "h_1" in admin[MATRIX_DB][name].index_information()


def _op_list_collections(user, admin, kind):
    def act():
        reply = user[MATRIX_DB].command("listCollections", filter={"name": {"$in": ["c", "ts"]}})
        assert sorted(c["name"] for c in reply["cursor"]["firstBatch"]) == ["c", "ts"]
    return act, None


def _op_list_databases(user, admin, kind):
    def act():
        reply = user.admin.command("listDatabases", authorizedDatabases=False)
        names = {d["name"] for d in reply["databases"]}
        assert {MATRIX_DB, OTHER_DB} <= names
    return act, None


def _op_server_status(user, admin, kind):
    def act():
        assert "uptime" in user.admin.command("serverStatus")
    return act, None


def _op_create_user(user, admin, kind):
    name = unique("made")

    def act():
        user[MATRIX_DB].command("createUser", name, pwd=PWD, roles=[],
                                mechanisms=["SCRAM-SHA-256"])
    return act, lambda: admin[MATRIX_DB].command("usersInfo", name)["users"] != []


OPS = {
    "find": _op_find, "insert": _op_insert, "update": _op_update, "delete": _op_delete,
    "create": _op_create, "drop": _op_drop, "createIndexes": _op_create_indexes,
    "listCollections": _op_list_collections, "listDatabases": _op_list_databases,
    "serverStatus": _op_server_status, "createUser": _op_create_user,
}


@pytest.mark.parametrize("role, op, kind", list(_matrix_cases()))
def test_builtin_role_allows_or_refuses_operation(admin, matrix, role, op, kind):
    act, applied = OPS[op](matrix(role), admin, kind)
    if op in ALLOWED[role]:
        act()
        if applied is not None:
            assert applied(), f"{role} was allowed {op} but it had no effect"
    else:
        with pytest.raises(OperationFailure) as e:
            act()
        assert_unauthorized(e)
        if applied is not None:
            assert not applied(), f"{role} was refused {op} but it took effect"


def test_list_databases_without_the_action_lists_only_authorized_databases(matrix):
    names = matrix("read").list_database_names()
    assert MATRIX_DB in names
    assert OTHER_DB not in names


def test_refusal_names_the_database_and_shows_the_command_with_the_password_masked(admin, clients):
    c = clients(make_user(admin, [{"role": "read", "db": "authz_msg"}]), PWD, maxPoolSize=1)
    with pytest.raises(OperationFailure) as e:
        c.authz_msg.command("createUser", "someone", pwd="hunter2", roles=[])
    assert_unauthorized(e)
    message = str(e.value.details["errmsg"])
    assert message.startswith("not authorized on authz_msg to execute command { createUser: \"someone\"")
    assert "hunter2" not in message and 'pwd: "xxx"' in message
