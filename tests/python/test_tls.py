"""TLS with mongod's options (--tlsMode disabled|allowTLS|preferTLS|requireTLS,
--tlsCertificateKeyFile, --tlsCAFile, --tlsAllowConnectionsWithoutCertificates) and MONGODB-X509
authentication, through pymongo. The certificates (a CA, a server certificate for 127.0.0.1 /
localhost, a client certificate, an expired server certificate and a self-signed one) are made
with the openssl CLI in a temporary directory.

Servers are started here rather than with conftest.running_server so that a server refusing
to start fails (or, for the expired certificate, answers) one test instead of ending the
session."""

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from pymongo import MongoClient
from pymongo.errors import ConnectionFailure, OperationFailure

from conftest import _binary, _free_port, stop_process

CLIENT_SUBJECT = "CN=client,OU=users,O=Hourglass"  # RFC 2253 form of the client certificate
ADMIN_USER, ADMIN_PWD = "tls_root", "root-secret"
REFUSED = {"serverSelectionTimeoutMS": 2000, "connectTimeoutMS": 2000, "socketTimeoutMS": 2000}

LEAF_EXT = ("basicConstraints=critical,CA:FALSE\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
            "subjectKeyIdentifier=hash\n")
EXTENSIONS = {
    "ca.ext": ("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
               "subjectKeyIdentifier=hash\n"),
    "server.ext": (LEAF_EXT + "authorityKeyIdentifier=keyid,issuer\nextendedKeyUsage=serverAuth\n"
                   "subjectAltName=IP:127.0.0.1,DNS:localhost\n"),
    "client.ext": LEAF_EXT + "authorityKeyIdentifier=keyid,issuer\nextendedKeyUsage=clientAuth\n",
    "rogue.ext": (LEAF_EXT + "extendedKeyUsage=serverAuth,clientAuth\n"
                  "subjectAltName=IP:127.0.0.1,DNS:localhost\n"),
}


def _openssl(directory, *args):
    result = subprocess.run(["openssl", *args], cwd=directory, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{result.stderr}")


def _key_and_request(directory, name, subject):
    _openssl(directory, "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", subject)


def _signed_by_ca(directory, name, subject, ext):
    _key_and_request(directory, name, subject)
    _openssl(directory, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "30",
             "-extfile", ext, "-out", f"{name}.crt")


def _expired_by_ca(directory):
    """A CA-signed server certificate valid only in January 2020 (`openssl ca` takes explicit
    dates, `openssl x509 -req` does not)."""
    _key_and_request(directory, "expired", "/O=Hourglass/OU=servers/CN=localhost")
    (directory / "newcerts").mkdir()
    (directory / "index.txt").write_text("")
    (directory / "serial").write_text("1000\n")
    (directory / "ca.cnf").write_text(
        "[ca]\ndefault_ca = test_ca\n"
        "[test_ca]\n"
        f"database = {directory}/index.txt\nnew_certs_dir = {directory}/newcerts\n"
        f"serial = {directory}/serial\ndefault_md = sha256\npolicy = any_subject\n"
        "unique_subject = no\n"
        "[any_subject]\ncommonName = supplied\norganizationName = optional\n"
        "organizationalUnitName = optional\n")
    _openssl(directory, "ca", "-batch", "-notext", "-config", "ca.cnf", "-cert", "ca.crt",
             "-keyfile", "ca.key", "-in", "expired.csr", "-out", "expired.crt",
             "-startdate", "20200101000000Z", "-enddate", "20200201000000Z",
             "-extfile", "server.ext")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not installed: cannot make the test certificates")
    d = tmp_path_factory.mktemp("tls-certs")
    for name, text in EXTENSIONS.items():
        (d / name).write_text(text)
    _key_and_request(d, "ca", "/O=Hourglass/CN=Hourglass Test CA")
    _openssl(d, "x509", "-req", "-in", "ca.csr", "-signkey", "ca.key", "-days", "3650",
             "-extfile", "ca.ext", "-out", "ca.crt")
    _signed_by_ca(d, "server", "/O=Hourglass/OU=servers/CN=localhost", "server.ext")
    _signed_by_ca(d, "client", "/O=Hourglass/OU=users/CN=client", "client.ext")
    _key_and_request(d, "rogue", "/O=Hourglass/CN=rogue")
    _openssl(d, "x509", "-req", "-in", "rogue.csr", "-signkey", "rogue.key", "-days", "30",
             "-extfile", "rogue.ext", "-out", "rogue.crt")
    _expired_by_ca(d)
    paths = {"ca": str(d / "ca.crt")}
    for name in ("server", "client", "rogue", "expired"):
        pem = d / f"{name}.pem"  # certificate and key in one file, as mongod and pymongo take
        pem.write_text((d / f"{name}.crt").read_text() + (d / f"{name}.key").read_text())
        paths[name] = str(pem)
    return SimpleNamespace(**paths)


class ServerExited(AssertionError):
    def __init__(self, returncode, output):
        super().__init__(f"server exited during startup ({returncode}):\n{output}")
        self.returncode = returncode


@contextlib.contextmanager
def tls_server(*args):
    """Runs a server on a temporary dbpath with `args`; yields its port. Raises ServerExited
    if the server exits before it listens."""
    with tempfile.TemporaryDirectory(prefix="hourglass-tls-") as tmp:
        (Path(tmp) / "db").mkdir()
        port = _free_port()
        log_path = Path(tmp) / "server.out"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [str(_binary()), "--dbpath", f"{tmp}/db", "--port", str(port),
                 "--bind_ip", "127.0.0.1", "--quiet", *args],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + 20
                while True:
                    if proc.poll() is not None:
                        raise ServerExited(proc.returncode, log_path.read_text(errors="replace"))
                    try:
                        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                            break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise AssertionError("server did not listen within 20 s")
                        time.sleep(0.05)
                yield port
            finally:
                if proc.poll() is None:
                    stop_process(proc)


def tls_options(certs, mode="requireTLS", server_pem=None, ca=True, allow_without_cert=True):
    args = ["--tlsMode", mode, "--tlsCertificateKeyFile", server_pem or certs.server]
    if ca:
        args += ["--tlsCAFile", certs.ca]
    if allow_without_cert:
        args.append("--tlsAllowConnectionsWithoutCertificates")
    return args


@contextlib.contextmanager
def client(port, **kwargs):
    options = {"directConnection": True, "serverSelectionTimeoutMS": 5000}
    options.update(kwargs)
    c = MongoClient("127.0.0.1", port, **options)
    try:
        yield c
    finally:
        c.close()


def assert_refused(port, **kwargs):
    with client(port, **REFUSED, **kwargs) as c:
        with pytest.raises(ConnectionFailure):
            c.admin.command("ping")


def assert_insert_and_find(c, token):
    c.tlsdb.c.insert_one({"token": token})
    assert [d["token"] for d in c.tlsdb.c.find({"token": token})] == [token]


# --------------------------------------------------------------------------- modes


def test_require_tls_refuses_a_plaintext_client(certs):
    with tls_server(*tls_options(certs, "requireTLS")) as port:
        assert_refused(port)
        with client(port, tls=True, tlsCAFile=certs.ca) as c:  # the server itself is up
            assert c.admin.command("ping")["ok"] == 1


def test_require_tls_serves_a_client_that_trusts_its_ca_end_to_end(certs):
    with tls_server(*tls_options(certs, "requireTLS")) as port:
        with client(port, tls=True, tlsCAFile=certs.ca) as c:
            assert_insert_and_find(c, "over-tls")


@pytest.mark.parametrize("mode", ["preferTLS", "allowTLS"])
def test_prefer_and_allow_tls_accept_plaintext_and_tls_clients(certs, mode):
    with tls_server(*tls_options(certs, mode)) as port:
        with client(port) as plain, client(port, tls=True, tlsCAFile=certs.ca) as secure:
            assert_insert_and_find(plain, f"{mode}-plain")
            assert_insert_and_find(secure, f"{mode}-tls")
            assert plain.tlsdb.c.count_documents({}) == secure.tlsdb.c.count_documents({}) == 2


def test_disabled_tls_mode_refuses_tls_clients(certs):
    with tls_server("--tlsMode", "disabled") as port:
        assert_refused(port, tls=True, tlsCAFile=certs.ca)
        with client(port) as plain:
            assert plain.admin.command("ping")["ok"] == 1


# --------------------------------------------------------------------------- server certificates


def test_expired_server_certificate_is_never_accepted(certs):
    # mongod refuses to start with an expired certificate (jstests/ssl/ssl_invalid_server_cert.js:
    # "The provided SSL certificate is expired or not yet valid."); a server that does start
    # must at least not be trusted by a client checking the dates.
    with tls_server(*tls_options(certs, "requireTLS")):
        pass  # the same options with a valid certificate start: only the dates differ below
    try:
        with tls_server(*tls_options(certs, "requireTLS", server_pem=certs.expired)) as port:
            assert_refused(port, tls=True, tlsCAFile=certs.ca)
    except ServerExited as exited:
        assert exited.returncode != 0
        assert "expired" in str(exited).lower(), "the server must say why it did not start"


def test_server_certificate_from_an_untrusted_issuer_is_refused_by_the_client(certs):
    with tls_server(*tls_options(certs, "requireTLS", server_pem=certs.rogue)) as port:
        assert_refused(port, tls=True, tlsCAFile=certs.ca)
        # the same server is reachable when the client skips verification: the refusal above
        # came from the certificate, not from the server
        with client(port, tls=True, tlsAllowInvalidCertificates=True) as c:
            assert c.admin.command("ping")["ok"] == 1


# --------------------------------------------------------------------------- client certificates


@pytest.fixture(scope="module")
def x509_server(certs):
    """--auth, requireTLS and a CA file without --tlsAllowConnectionsWithoutCertificates:
    every client must present a certificate signed by the CA. Yields the port once a root user
    (made through the localhost exception) exists."""
    args = ["--auth", *tls_options(certs, "requireTLS", allow_without_cert=False)]
    with tls_server(*args) as port:
        with client(port, tls=True, tlsCAFile=certs.ca, tlsCertificateKeyFile=certs.client) as c:
            c.admin.command("createUser", ADMIN_USER, pwd=ADMIN_PWD,
                            roles=[{"role": "root", "db": "admin"}])
        yield port


def admin_client(port, certs):
    return client(port, tls=True, tlsCAFile=certs.ca, tlsCertificateKeyFile=certs.client,
                  username=ADMIN_USER, password=ADMIN_PWD, authSource="admin")


def test_ca_signed_client_certificate_authenticates_with_mongodb_x509(certs, x509_server):
    with admin_client(x509_server, certs) as admin:
        admin["$external"].command("createUser", CLIENT_SUBJECT,
                                   roles=[{"role": "readWrite", "db": "x509db"}])
        try:
            with client(x509_server, tls=True, tlsCAFile=certs.ca,
                        tlsCertificateKeyFile=certs.client, authMechanism="MONGODB-X509") as c:
                c.x509db.c.insert_one({"by": "x509"})
                assert [d["by"] for d in c.x509db.c.find({}, {"_id": 0})] == ["x509"]
                info = c.admin.command("connectionStatus")["authInfo"]
                assert info["authenticatedUsers"] == [{"user": CLIENT_SUBJECT, "db": "$external"}]
                assert info["authenticatedUserRoles"] == [{"role": "readWrite", "db": "x509db"}]
        finally:
            admin["$external"].command("dropUser", CLIENT_SUBJECT)


def test_x509_login_without_a_matching_external_user_fails(certs, x509_server):
    with client(x509_server, tls=True, tlsCAFile=certs.ca, tlsCertificateKeyFile=certs.client,
                authMechanism="MONGODB-X509") as c:
        with pytest.raises(OperationFailure) as e:
            c.x509db.c.find_one()
    # AuthenticationFailed; recent mongod versions pass UserNotFound through for x.509
    assert e.value.code in (18, 11), e.value.details


def test_self_signed_client_certificate_is_refused_by_a_server_with_a_ca(certs, x509_server):
    assert_refused(x509_server, tls=True, tlsCAFile=certs.ca, tlsCertificateKeyFile=certs.rogue)


def test_client_without_certificate_is_refused_unless_the_server_allows_it(certs, x509_server):
    assert_refused(x509_server, tls=True, tlsCAFile=certs.ca)
