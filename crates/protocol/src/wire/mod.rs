//! The MongoDB wire protocol: message header, OP_MSG (body and document sequences,
//! checksum, moreToCome), the legacy OP_QUERY handshake and its OP_REPLY.
//!
//! Parsing never panics on hostile input: every length is checked against the bytes that
//! are really there, and every failure is a [`WireError`].

pub mod codec;
pub mod compression;

pub use codec::{
    encode_op_msg, encode_op_msg_with_batch, encode_op_reply, parse_message, DocSequence, Header,
    Message, OpMsg, OpQuery, WireError, HEADER_LEN, MAX_MESSAGE_SIZE, MAX_WRITE_BATCH,
    OP_COMPRESSED, OP_MSG, OP_QUERY, OP_REPLY,
};
