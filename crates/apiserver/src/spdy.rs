//! The SPDY/3.1 subset `kubectl exec` speaks (moby/spdystream): frame encoding and decoding,
//! header blocks (zlib with SPDY's dictionary inbound; stored, uncompressed deflate blocks
//! outbound, which every zlib reader accepts), and the server side of one remote-command
//! session over it.
//!
//! Knows frames and streams; what runs in the container and what the error stream says is
//! [`crate::exec`]'s.

use std::collections::HashMap;
use std::sync::OnceLock;

use flate2::{Decompress, FlushDecompress, Status};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::exec::{Finish, Streams};

/// The frame types this server reads or writes.
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
/// FLAG_FIN on data and control frames.
const FIN: u8 = 0x01;
/// The largest frame accepted (SPDY's 24-bit length).
const MAX_FRAME: usize = (1 << 24) - 1;
/// The largest inflated header block accepted.
const MAX_HEADER_BLOCK: usize = 1 << 20;

/// The header-compression dictionary of SPDY/3 (draft 3, section 2.6.10.1): length-prefixed
/// header names and common values, then a run of common text.
pub fn dictionary() -> &'static [u8] {
    static DICTIONARY: OnceLock<Vec<u8>> = OnceLock::new();
    DICTIONARY.get_or_init(|| {
        const WORDS: [&str; 65] = [
            "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset",
            "accept-encoding", "accept-language", "accept-ranges", "age", "allow",
            "authorization", "cache-control", "connection", "content-base", "content-encoding",
            "content-language", "content-length", "content-location", "content-md5",
            "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host",
            "if-match", "if-modified-since", "if-none-match", "if-range", "if-unmodified-since",
            "last-modified", "location", "max-forwards", "pragma", "proxy-authenticate",
            "proxy-authorization", "range", "referer", "retry-after", "server", "te", "trailer",
            "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning",
            "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url",
            "public", "set-cookie", "keep-alive", "origin",
        ];
        const TAIL: &str = "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505\
            203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request\
            401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error\
            501 Not Implemented503 Service Unavailable\
            Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 \
            Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT\
            chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,\
            text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch\
            charset=utf-8charset=iso-8859-1,utf-,*,enq=0.";
        let mut bytes = Vec::new();
        for word in WORDS {
            bytes.extend((word.len() as u32).to_be_bytes());
            bytes.extend(word.as_bytes());
        }
        bytes.extend(TAIL.as_bytes());
        bytes
    })
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Data on a stream.
    Data {
        /// The stream.
        stream: u32,
        /// FLAG_FIN: the sender's half of the stream is closed.
        fin: bool,
        /// The payload.
        data: Vec<u8>,
    },
    /// A new stream, with its still-compressed header block.
    SynStream {
        /// The stream.
        stream: u32,
        /// The compressed header block.
        headers: Vec<u8>,
    },
    /// A stream was reset.
    Reset {
        /// The stream.
        stream: u32,
    },
    /// A ping to echo.
    Ping {
        /// Its id.
        id: u32,
    },
    /// The peer is going away.
    GoAway,
    /// A control frame this server has no use for (SETTINGS, WINDOW_UPDATE, HEADERS, …).
    Ignored,
}

/// Errors of the SPDY session.
#[derive(Debug, thiserror::Error)]
pub enum SpdyError {
    /// The peer broke the framing.
    #[error("SPDY protocol error: {0}")]
    Protocol(String),
    /// The connection failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

fn word(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(word)
}

/// Decodes the first frame of `buffer`: the frame and the bytes it took, or `None` when more
/// bytes are needed.
pub fn decode(buffer: &[u8]) -> Result<Option<(Frame, usize)>, SpdyError> {
    if buffer.len() < 8 {
        return Ok(None);
    }
    let first = word(buffer, 0);
    let flags = buffer[4];
    let length = (word(buffer, 4) & 0x00ff_ffff) as usize;
    if buffer.len() < 8 + length {
        return Ok(None);
    }
    let payload = &buffer[8..8 + length];
    let short = |what: &str| SpdyError::Protocol(format!("{what} frame too short"));
    let frame = if first & 0x8000_0000 == 0 {
        Frame::Data {
            stream: first & 0x7fff_ffff,
            fin: flags & FIN != 0,
            data: payload.to_vec(),
        }
    } else {
        let version = (first >> 16) & 0x7fff;
        if version != 3 {
            return Err(SpdyError::Protocol(format!(
                "unsupported SPDY version {version}"
            )));
        }
        match (first & 0xffff) as u16 {
            SYN_STREAM => {
                if length < 10 {
                    return Err(short("SYN_STREAM"));
                }
                Frame::SynStream {
                    stream: word(payload, 0) & 0x7fff_ffff,
                    headers: payload[10..].to_vec(),
                }
            }
            RST_STREAM => {
                if length < 8 {
                    return Err(short("RST_STREAM"));
                }
                Frame::Reset {
                    stream: word(payload, 0) & 0x7fff_ffff,
                }
            }
            PING => {
                if length < 4 {
                    return Err(short("PING"));
                }
                Frame::Ping {
                    id: word(payload, 0),
                }
            }
            GOAWAY => Frame::GoAway,
            _ => Frame::Ignored,
        }
    };
    Ok(Some((frame, 8 + length)))
}

/// A DATA frame.
pub fn data_frame(stream: u32, fin: bool, data: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(8 + data.len());
    frame.extend((stream & 0x7fff_ffff).to_be_bytes());
    frame.extend(length_word(if fin { FIN } else { 0 }, data.len()));
    frame.extend(data);
    frame
}

fn length_word(flags: u8, length: usize) -> [u8; 4] {
    ((u32::from(flags) << 24) | (length as u32 & 0x00ff_ffff)).to_be_bytes()
}

fn control_frame(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(8 + payload.len());
    frame.extend((0x8003_0000u32 | u32::from(kind)).to_be_bytes());
    frame.extend(length_word(flags, payload.len()));
    frame.extend(payload);
    frame
}

/// A PING frame.
pub fn ping_frame(id: u32) -> Vec<u8> {
    control_frame(PING, 0, &id.to_be_bytes())
}

/// A GOAWAY frame (status OK).
pub fn goaway_frame(last_stream: u32) -> Vec<u8> {
    let mut payload = last_stream.to_be_bytes().to_vec();
    payload.extend(0u32.to_be_bytes());
    control_frame(GOAWAY, 0, &payload)
}

/// The plain header block of name/value pairs.
pub fn header_block(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut block = (headers.len() as u32).to_be_bytes().to_vec();
    for (name, value) in headers {
        block.extend((name.len() as u32).to_be_bytes());
        block.extend(name.as_bytes());
        block.extend((value.len() as u32).to_be_bytes());
        block.extend(value.as_bytes());
    }
    block
}

/// Parses a plain header block.
pub fn parse_header_block(block: &[u8]) -> Result<Vec<(String, String)>, SpdyError> {
    let truncated = || SpdyError::Protocol("truncated header block".into());
    let mut at = 0;
    let take = |at: &mut usize| -> Result<String, SpdyError> {
        let length = word(block.get(*at..*at + 4).ok_or_else(truncated)?, 0) as usize;
        let text = block.get(*at + 4..*at + 4 + length).ok_or_else(truncated)?;
        *at += 4 + length;
        Ok(String::from_utf8_lossy(text).into_owned())
    };
    let count = word(block.get(0..4).ok_or_else(truncated)?, 0);
    at += 4;
    let mut headers = Vec::new();
    for _ in 0..count {
        let name = take(&mut at)?;
        let value = take(&mut at)?;
        headers.push((name, value));
    }
    Ok(headers)
}

/// The outbound header stream: one zlib stream for the connection, each block a stored
/// deflate block, sync-flushed.
#[derive(Debug, Default)]
pub struct HeaderWriter {
    started: bool,
}

impl HeaderWriter {
    /// The compressed form of a header block.
    pub fn compress(&mut self, block: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(block.len() + 16);
        if !self.started {
            // zlib header: deflate, 32K window, no preset dictionary, check bits.
            out.extend([0x78, 0x01]);
            self.started = true;
        }
        for chunk in block.chunks(0xffff) {
            let length = chunk.len() as u16;
            out.push(0x00); // not final, stored
            out.extend(length.to_le_bytes());
            out.extend((!length).to_le_bytes());
            out.extend(chunk);
        }
        // The sync-flush marker (an empty stored block): zlib readers such as Go's hand out a
        // block's bytes only when they reach it, and must not read past the frame for it.
        out.extend([0x00, 0x00, 0x00, 0xff, 0xff]);
        out
    }
}

/// The inbound header stream: one zlib stream with SPDY's dictionary for the connection.
pub struct HeaderReader {
    inflate: Decompress,
}

impl Default for HeaderReader {
    fn default() -> Self {
        HeaderReader {
            inflate: Decompress::new(true),
        }
    }
}

impl HeaderReader {
    /// Inflates one frame's header block.
    pub fn decompress(&mut self, compressed: &[u8]) -> Result<Vec<u8>, SpdyError> {
        let mut out = Vec::with_capacity(compressed.len() * 4 + 256);
        let mut input = compressed;
        loop {
            let (before_in, before_out) = (self.inflate.total_in(), self.inflate.total_out());
            let status = match self
                .inflate
                .decompress_vec(input, &mut out, FlushDecompress::Sync)
            {
                Ok(status) => status,
                Err(error) if error.needs_dictionary().is_some() => {
                    self.inflate
                        .set_dictionary(dictionary())
                        .map_err(|e| SpdyError::Protocol(format!("header dictionary: {e}")))?;
                    Status::Ok
                }
                Err(error) => {
                    return Err(SpdyError::Protocol(format!("header block: {error}")));
                }
            };
            let consumed = (self.inflate.total_in() - before_in) as usize;
            input = &input[consumed..];
            let produced = self.inflate.total_out() - before_out;
            if out.len() == out.capacity() {
                if out.len() >= MAX_HEADER_BLOCK {
                    return Err(SpdyError::Protocol("header block too large".into()));
                }
                out.reserve(out.capacity());
                continue;
            }
            if status == Status::StreamEnd || (input.is_empty() && produced == 0) {
                return Ok(out);
            }
            if consumed == 0 && produced == 0 {
                return Err(SpdyError::Protocol("header block does not inflate".into()));
            }
        }
    }
}

/// Serves one remote-command session on an upgraded SPDY connection: accepts the client's
/// streams (replying to each), gathers stdin when the command reads it, runs it, and writes
/// stdout, stderr and the error stream, each closed.
pub async fn serve<IO>(io: IO, wanted: Streams, finish: Finish) -> Result<(), SpdyError>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let (mut reader, mut writer) = tokio::io::split(io);
    let mut inbound = HeaderReader::default();
    let mut outbound = HeaderWriter::default();
    let mut buffer: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut streams: HashMap<String, u32> = HashMap::new();
    let mut stdin = Vec::new();
    let mut stdin_open = wanted.stdin;
    let mut last_stream = 0;
    let expected = wanted.expected();
    loop {
        let all_created = expected.iter().all(|kind| streams.contains_key(*kind));
        if all_created && !(stdin_open && finish.reads_stdin()) {
            break;
        }
        let frame = match decode(&buffer)? {
            Some((frame, used)) => {
                buffer.drain(..used);
                frame
            }
            None => {
                if buffer.len() > MAX_FRAME + 8 {
                    return Err(SpdyError::Protocol("frame too large".into()));
                }
                let mut chunk = [0u8; 16 * 1024];
                let read = reader.read(&mut chunk).await?;
                if read == 0 {
                    return Ok(());
                }
                buffer.extend(&chunk[..read]);
                continue;
            }
        };
        tracing::trace!(?frame, "SPDY frame");
        match frame {
            Frame::SynStream { stream, headers } => {
                let headers = parse_header_block(&inbound.decompress(&headers)?)?;
                let kind = headers
                    .iter()
                    .find(|(name, _)| name == "streamtype")
                    .map(|(_, value)| value.clone())
                    .unwrap_or_default();
                let reply = outbound.compress(&header_block(&[]));
                let mut payload = stream.to_be_bytes().to_vec();
                payload.extend(reply);
                writer
                    .write_all(&control_frame(SYN_REPLY, 0, &payload))
                    .await?;
                writer.flush().await?;
                last_stream = last_stream.max(stream);
                streams.insert(kind, stream);
            }
            Frame::Data { stream, fin, data } => {
                if streams.get("stdin") == Some(&stream) {
                    stdin.extend(data);
                    if fin {
                        stdin_open = false;
                    }
                }
            }
            Frame::Reset { stream } => {
                if streams.get("stdin") == Some(&stream) {
                    stdin_open = false;
                }
            }
            Frame::Ping { id } => {
                writer.write_all(&ping_frame(id)).await?;
                writer.flush().await?;
            }
            Frame::GoAway => return Ok(()),
            Frame::Ignored => {}
        }
    }
    let ended = finish.run(stdin).await;
    for (kind, bytes) in [("stdout", &ended.stdout), ("stderr", &ended.stderr)] {
        if let Some(&stream) = streams.get(kind) {
            for chunk in bytes.chunks(64 * 1024) {
                writer.write_all(&data_frame(stream, false, chunk)).await?;
            }
            writer.write_all(&data_frame(stream, true, &[])).await?;
        }
    }
    if let Some(&stream) = streams.get("error") {
        writer
            .write_all(&data_frame(stream, false, &ended.error))
            .await?;
        writer.write_all(&data_frame(stream, true, &[])).await?;
    }
    writer.write_all(&goaway_frame(last_stream)).await?;
    writer.flush().await?;
    writer.shutdown().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Compress, Compression, FlushCompress};

    #[test]
    fn frames_decode_as_encoded_and_partial_input_waits() {
        let syn = {
            let mut payload = 5u32.to_be_bytes().to_vec();
            payload.extend([0, 0, 0, 0, 0, 0]);
            payload.extend([1, 2, 3]);
            control_frame(SYN_STREAM, 0, &payload)
        };
        let cases: Vec<(Vec<u8>, Option<Frame>)> = vec![
            (
                data_frame(3, true, b"hi"),
                Some(Frame::Data {
                    stream: 3,
                    fin: true,
                    data: b"hi".to_vec(),
                }),
            ),
            (
                data_frame(7, false, b""),
                Some(Frame::Data {
                    stream: 7,
                    fin: false,
                    data: vec![],
                }),
            ),
            (ping_frame(9), Some(Frame::Ping { id: 9 })),
            (goaway_frame(1), Some(Frame::GoAway)),
            (
                syn.clone(),
                Some(Frame::SynStream {
                    stream: 5,
                    headers: vec![1, 2, 3],
                }),
            ),
            (control_frame(9, 0, &[0; 8]), Some(Frame::Ignored)),
            (syn[..syn.len() - 1].to_vec(), None),
            (vec![0x80, 0x03], None),
        ];
        for (bytes, expected) in cases {
            let decoded = decode(&bytes).expect("decodes");
            assert_eq!(
                decoded.as_ref().map(|(f, _)| f.clone()),
                expected,
                "{bytes:?}"
            );
            if let Some((_, used)) = decoded {
                assert_eq!(used, bytes.len());
            }
        }
        assert!(matches!(
            decode(&[0x80, 0x02, 0, 1, 0, 0, 0, 0]),
            Err(SpdyError::Protocol(_))
        ));
        assert!(matches!(
            decode(&control_frame(PING, 0, &[1])),
            Err(SpdyError::Protocol(_))
        ));
    }

    #[test]
    fn header_blocks_round_trip_through_dictionary_compression_across_frames() {
        // The client's side: one zlib stream with the dictionary, sync-flushed per frame.
        let mut deflate = Compress::new(Compression::best(), true);
        deflate.set_dictionary(dictionary()).expect("dictionary");
        let mut inbound = HeaderReader::default();
        for kind in ["error", "stdin", "stdout", "stderr"] {
            let block = header_block(&[("streamtype", kind), ("port", "")]);
            let mut compressed = Vec::with_capacity(block.len() + 64);
            deflate
                .compress_vec(&block, &mut compressed, FlushCompress::Sync)
                .expect("compress");
            let inflated = inbound.decompress(&compressed).expect("inflate");
            assert_eq!(
                parse_header_block(&inflated).expect("parse"),
                vec![
                    ("streamtype".to_string(), kind.to_string()),
                    ("port".to_string(), String::new())
                ]
            );
        }
        // Our side: stored blocks any zlib reader inflates.
        let mut outbound = HeaderWriter::default();
        let mut inflate = Decompress::new(true);
        for block in [header_block(&[]), header_block(&[("a", "b")])] {
            let compressed = outbound.compress(&block);
            let mut out = Vec::with_capacity(block.len() + 16);
            inflate
                .decompress_vec(&compressed, &mut out, FlushDecompress::Sync)
                .expect("inflate");
            assert_eq!(out, block);
        }
        assert!(parse_header_block(&[0, 0, 0, 1, 0, 0, 0, 9, b'x']).is_err());
    }

    #[test]
    fn the_dictionary_is_spdy3s() {
        let dictionary = dictionary();
        assert_eq!(dictionary.len(), 1423);
        assert_eq!(&dictionary[..11], b"\0\0\0\x07options");
        assert!(dictionary.ends_with(b",*,enq=0."));
    }
}
