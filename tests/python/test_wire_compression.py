"""Wire compression (OP_COMPRESSED) through pymongo: the handshake negotiates the
compressors both sides speak, and a client configured with one of them sends and receives
compressed messages whose contents are the same as plain ones."""

import pytest
from pymongo import MongoClient
from pymongo import compression_support


def _compressors():
    """Each compressor, skipped with the reason when pymongo cannot use it here."""
    have = {"zlib": compression_support._have_zlib, "zstd": compression_support._have_zstd,
            "snappy": compression_support._have_snappy}
    return [pytest.param(name, marks=pytest.mark.skipif(
        not check(), reason=f"pymongo has no {name} support here (scripts/test.sh installs it)"))
        for name, check in have.items()]


def test_the_handshake_answers_with_the_offered_compressors_this_server_speaks(db):
    reply = db.command("hello", compression=["lz4", "zstd", "noop", "zlib", "snappy"])
    assert reply["compression"] == ["zstd", "zlib", "snappy"]


@pytest.mark.parametrize("compressor", _compressors())
def test_a_client_with_a_compressor_reads_and_writes_through_it(server, compressor):
    host, port = server
    uri = f"mongodb://{host}:{port}/?directConnection=true&compressors={compressor}"
    with MongoClient(uri) as c:
        coll = c.compression_test[compressor]
        coll.drop()
        docs = [{"_id": i, "text": "x" * (i % 50), "n": i} for i in range(2000)]
        coll.insert_many(docs)
        assert list(coll.find().sort("_id", 1)) == docs
        assert coll.count_documents({"n": {"$gte": 1000}}) == 1000
        # The connection negotiated the compressor.
        pool = next(iter(c._topology._servers.values())).pool
        with pool.checkout() as conn:
            assert conn.compression_context is not None
            assert conn.compression_context.compressor_id is not None
