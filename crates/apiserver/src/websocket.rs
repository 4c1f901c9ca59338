//! The WebSocket (RFC 6455) server side `kubectl exec` 1.30+ speaks first: the handshake's
//! accept key, frame encoding and decoding, and one remote-command session over the
//! `v5.channel.k8s.io` / `v4.channel.k8s.io` / `channel.k8s.io` channel protocols (each binary
//! message starts with its channel: 0 stdin, 1 stdout, 2 stderr, 3 error; v5's 255 closes the
//! channel that follows).
//!
//! Knows frames and channels; what runs and what the error channel says is [`crate::exec`]'s.

use base64::Engine;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::exec::{Finish, Streams};

/// The remote-command subprotocols served, best first.
pub const PROTOCOLS: [&str; 4] = [
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "channel.k8s.io",
];

const CONTINUATION: u8 = 0x0;
const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;
const PONG: u8 = 0xa;
/// The largest message accepted.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// v5's close signal channel.
const CHANNEL_CLOSE: u8 = 255;

/// `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key`.
pub fn accept_key(key: &str) -> String {
    let mut sha = sha1_smol::Sha1::new();
    sha.update(key.trim().as_bytes());
    sha.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(sha.digest().bytes())
}

/// The subprotocol to answer, from the client's `Sec-WebSocket-Protocol` values.
pub fn choose_protocol<'a>(offered: impl Iterator<Item = &'a str>) -> Option<&'static str> {
    let offered: Vec<String> = offered
        .flat_map(|value| value.split(','))
        .map(|p| p.trim().to_string())
        .collect();
    PROTOCOLS
        .into_iter()
        .find(|p| offered.iter().any(|o| o == p))
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsFrame {
    /// FIN: the last frame of a message.
    pub fin: bool,
    /// The opcode.
    pub opcode: u8,
    /// The unmasked payload.
    pub payload: Vec<u8>,
}

/// Errors of the WebSocket session.
#[derive(Debug, thiserror::Error)]
pub enum WsError {
    /// The peer broke the framing.
    #[error("WebSocket protocol error: {0}")]
    Protocol(String),
    /// The connection failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Decodes the first frame of `buffer` (a client's, so masked): the frame and the bytes it
/// took, or `None` when more bytes are needed.
pub fn decode(buffer: &[u8]) -> Result<Option<(WsFrame, usize)>, WsError> {
    if buffer.len() < 2 {
        return Ok(None);
    }
    let fin = buffer[0] & 0x80 != 0;
    let opcode = buffer[0] & 0x0f;
    let masked = buffer[1] & 0x80 != 0;
    let (length, mut at) = match buffer[1] & 0x7f {
        126 => {
            let Some(bytes) = buffer.get(2..4) else {
                return Ok(None);
            };
            (u64::from(u16::from_be_bytes([bytes[0], bytes[1]])), 4)
        }
        127 => {
            let Some(bytes) = buffer.get(2..10) else {
                return Ok(None);
            };
            let mut word = [0u8; 8];
            word.copy_from_slice(bytes);
            (u64::from_be_bytes(word), 10)
        }
        short => (u64::from(short), 2),
    };
    if length > MAX_MESSAGE as u64 {
        return Err(WsError::Protocol(format!(
            "frame of {length} bytes is too large"
        )));
    }
    if !masked {
        return Err(WsError::Protocol("client frames must be masked".into()));
    }
    let Some(mask) = buffer.get(at..at + 4) else {
        return Ok(None);
    };
    let mask = [mask[0], mask[1], mask[2], mask[3]];
    at += 4;
    let end = at + length as usize;
    let Some(payload) = buffer.get(at..end) else {
        return Ok(None);
    };
    let payload = payload
        .iter()
        .enumerate()
        .map(|(i, byte)| byte ^ mask[i % 4])
        .collect();
    Ok(Some((
        WsFrame {
            fin,
            opcode,
            payload,
        },
        end,
    )))
}

/// A server frame (unmasked, final).
pub fn encode(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(payload.len() + 10);
    frame.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => frame.push(n as u8),
        n if n <= 0xffff => {
            frame.push(126);
            frame.extend((n as u16).to_be_bytes());
        }
        n => {
            frame.push(127);
            frame.extend((n as u64).to_be_bytes());
        }
    }
    frame.extend(payload);
    frame
}

/// A binary message on a channel.
fn channel_message(channel: u8, data: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(data.len() + 1);
    payload.push(channel);
    payload.extend(data);
    encode(BINARY, &payload)
}

/// Serves one remote-command session on an upgraded WebSocket connection.
pub async fn serve<IO>(
    io: IO,
    protocol: &str,
    wanted: Streams,
    finish: Finish,
) -> Result<(), WsError>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let (mut reader, mut writer) = tokio::io::split(io);
    // Only v5 can say that stdin ended; under older protocols a command runs at once.
    let mut stdin_open = wanted.stdin && protocol == PROTOCOLS[0] && finish.reads_stdin();
    let mut stdin = Vec::new();
    let mut buffer: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut message: Vec<u8> = Vec::new();
    while stdin_open {
        let frame = match decode(&buffer)? {
            Some((frame, used)) => {
                buffer.drain(..used);
                frame
            }
            None => {
                let mut chunk = [0u8; 16 * 1024];
                let read = reader.read(&mut chunk).await?;
                if read == 0 {
                    return Ok(());
                }
                buffer.extend(&chunk[..read]);
                continue;
            }
        };
        match frame.opcode {
            TEXT | BINARY | CONTINUATION => {
                message.extend(frame.payload);
                if message.len() > MAX_MESSAGE {
                    return Err(WsError::Protocol("message too large".into()));
                }
                if !frame.fin {
                    continue;
                }
                match message.split_first() {
                    Some((0, data)) => stdin.extend(data),
                    Some((&CHANNEL_CLOSE, [0, ..])) => stdin_open = false,
                    _ => {}
                }
                message.clear();
            }
            PING => {
                writer.write_all(&encode(PONG, &frame.payload)).await?;
                writer.flush().await?;
            }
            CLOSE => return Ok(()),
            _ => {}
        }
    }
    let ended = finish.run(stdin).await;
    if wanted.stdout && !ended.stdout.is_empty() {
        writer.write_all(&channel_message(1, &ended.stdout)).await?;
    }
    if wanted.stderr && !ended.stderr.is_empty() {
        writer.write_all(&channel_message(2, &ended.stderr)).await?;
    }
    writer.write_all(&channel_message(3, &ended.error)).await?;
    writer
        .write_all(&encode(CLOSE, &1000u16.to_be_bytes()))
        .await?;
    writer.flush().await?;
    writer.shutdown().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(first: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
        let mut frame = vec![first];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n => {
                frame.push(0x80 | 126);
                frame.extend((n as u16).to_be_bytes());
            }
        }
        frame.extend(mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        frame
    }

    #[test]
    fn the_accept_key_is_rfc_6455s() {
        // RFC 6455 section 1.3's example.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn protocols_are_chosen_best_first_from_any_header_layout() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&["v5.channel.k8s.io"], Some("v5.channel.k8s.io")),
            (
                &["v4.channel.k8s.io, v5.channel.k8s.io"],
                Some("v5.channel.k8s.io"),
            ),
            (
                &["base64.channel.k8s.io", "v4.channel.k8s.io"],
                Some("v4.channel.k8s.io"),
            ),
            (&["base64.channel.k8s.io"], None),
            (&[], None),
        ];
        for (offered, expected) in cases {
            assert_eq!(
                choose_protocol(offered.iter().copied()),
                *expected,
                "{offered:?}"
            );
        }
    }

    #[test]
    fn client_frames_decode_and_server_frames_carry_their_length() {
        let long = vec![7u8; 300];
        let cases: Vec<(Vec<u8>, Option<WsFrame>)> = vec![
            (
                masked(0x82, &[0, b'h', b'i'], [1, 2, 3, 4]),
                Some(WsFrame {
                    fin: true,
                    opcode: BINARY,
                    payload: vec![0, b'h', b'i'],
                }),
            ),
            (
                masked(0x02, &[255, 0], [9, 9, 9, 9]),
                Some(WsFrame {
                    fin: false,
                    opcode: BINARY,
                    payload: vec![255, 0],
                }),
            ),
            (
                masked(0x82, &long, [5, 6, 7, 8]),
                Some(WsFrame {
                    fin: true,
                    opcode: BINARY,
                    payload: long.clone(),
                }),
            ),
            (
                masked(0x89, b"", [0, 0, 0, 0]),
                Some(WsFrame {
                    fin: true,
                    opcode: PING,
                    payload: vec![],
                }),
            ),
            (masked(0x82, &long, [5, 6, 7, 8])[..100].to_vec(), None),
            (vec![0x82], None),
        ];
        for (bytes, expected) in cases {
            let decoded = decode(&bytes).expect("decodes");
            assert_eq!(decoded.as_ref().map(|(f, _)| f.clone()), expected);
            if let Some((_, used)) = decoded {
                assert_eq!(used, bytes.len());
            }
        }
        assert!(
            matches!(decode(&[0x82, 0x01, 0]), Err(WsError::Protocol(_))),
            "unmasked"
        );
        assert_eq!(encode(BINARY, b"ab"), vec![0x82, 2, b'a', b'b']);
        assert_eq!(&encode(BINARY, &long)[..4], &[0x82, 126, 1, 44]);
        assert_eq!(&channel_message(3, b"{}")[..], &[0x82, 3, 3, b'{', b'}']);
    }
}
