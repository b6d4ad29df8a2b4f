//! Tests of the shared wire format, which has no test harness of its own
//! on the kernel side.

use crate::cm_wire::*;

fn endpoint(peer: u32) -> Endpoint {
    let mut gid = [0u8; 16];
    for (i, byte) in gid.iter_mut().enumerate() {
        *byte = (i as u8).wrapping_mul(17) ^ 0xa5;
    }
    Endpoint {
        peer,
        qpn: 0x00ab_cdef,
        psn: 0x0012_3456,
        lid: 0xbeef,
        mtu: 4096,
        gid,
    }
}

/// One message of every kind, with values that exercise every byte.
fn every_message() -> Vec<Message> {
    vec![
        Message::Hello(Hello {
            gid: *b"0123456789abcdef",
            lid: 0x1234,
        }),
        Message::Welcome { node_id: 63 },
        Message::Prepare { peer: 0xdead_beef },
        Message::QpInfo(endpoint(2)),
        Message::Connect(endpoint(u32::MAX)),
        Message::Connected {
            peer: 7,
            status: -110,
        },
        Message::JoinDone { total_nodes: 64 },
        Message::Failure { errno: -28 },
    ]
}

fn encode(message: &Message) -> Vec<u8> {
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = message.encode(&mut frame);
    frame[..len].to_vec()
}

fn decode(frame: &[u8]) -> Result<Message, WireError> {
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(frame.get(..HEADER_LEN).ok_or(WireError::Truncated)?);
    Message::decode(Header::decode(&header)?, &frame[HEADER_LEN..])
}

#[test]
fn every_message_round_trips() {
    let messages = every_message();
    let kinds: Vec<Kind> = messages.iter().map(Message::kind).collect();
    for kind in 1..=8 {
        let kind = Kind::from_u16(kind).expect("kinds 1..=8 exist");
        assert!(kinds.contains(&kind), "{kind:?} is not covered");
    }
    for message in messages {
        let frame = encode(&message);
        assert_eq!(frame.len(), HEADER_LEN + message.kind().payload_len());
        assert_eq!(decode(&frame), Ok(message), "{message:?}");
    }
}

#[test]
fn header_layout_is_little_endian_magic_version_kind_len() {
    let frame = encode(&Message::Prepare { peer: 0x0403_0201 });
    assert_eq!(&frame[0..4], b"LITE");
    assert_eq!(&frame[4..6], &[1, 0]);
    assert_eq!(&frame[6..8], &[Kind::Prepare as u8, 0]);
    assert_eq!(&frame[8..12], &[8, 0, 0, 0]);
    assert_eq!(&frame[12..16], &[1, 2, 3, 4]);
}

#[test]
fn endpoint_layout_matches_the_documented_offsets() {
    let frame = encode(&Message::Connect(endpoint(0x0a0b_0c0d)));
    let payload = &frame[HEADER_LEN..];
    assert_eq!(payload.len(), ENDPOINT_LEN);
    assert_eq!(&payload[0..4], &0x0a0b_0c0du32.to_le_bytes());
    assert_eq!(&payload[4..8], &0x00ab_cdefu32.to_le_bytes());
    assert_eq!(&payload[8..12], &0x0012_3456u32.to_le_bytes());
    assert_eq!(&payload[12..14], &0xbeefu16.to_le_bytes());
    assert_eq!(&payload[14..16], &4096u16.to_le_bytes());
    assert_eq!(&payload[16..32], &endpoint(0).gid);
}

#[test]
fn header_validation_rejects_each_bad_field() {
    let good = encode(&Message::Welcome { node_id: 1 });
    let mut bad_magic = good.clone();
    bad_magic[3] = b'X';
    assert_eq!(decode(&bad_magic), Err(WireError::BadMagic));

    let mut bad_version = good.clone();
    bad_version[4] = 2;
    assert_eq!(decode(&bad_version), Err(WireError::BadVersion));

    for unknown in [0u16, 9, 0xffff] {
        let mut bad_kind = good.clone();
        bad_kind[6..8].copy_from_slice(&unknown.to_le_bytes());
        assert_eq!(decode(&bad_kind), Err(WireError::UnknownKind));
    }

    let mut bad_len = good.clone();
    bad_len[8] = 9;
    assert_eq!(decode(&bad_len), Err(WireError::BadLength));

    assert_eq!(decode(&good[..good.len() - 1]), Err(WireError::Truncated));
}

#[test]
fn kind_numbers_and_payload_lengths_are_stable() {
    let expected = [
        (Kind::Hello, 1, 20),
        (Kind::Welcome, 2, 8),
        (Kind::Prepare, 3, 8),
        (Kind::QpInfo, 4, ENDPOINT_LEN),
        (Kind::Connect, 5, ENDPOINT_LEN),
        (Kind::Connected, 6, 8),
        (Kind::JoinDone, 7, 8),
        (Kind::Failure, 8, 8),
    ];
    for (kind, number, payload_len) in expected {
        assert_eq!(kind as u16, number);
        assert_eq!(Kind::from_u16(number), Ok(kind));
        assert_eq!(kind.payload_len(), payload_len);
        assert!(payload_len <= MAX_PAYLOAD_LEN);
    }
}
