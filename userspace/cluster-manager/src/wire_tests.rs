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
            rejoin_id: 0x0a0b_0c0d,
        }),
        Message::Welcome {
            node_id: 63,
            incarnation: 0x8000_0001,
        },
        Message::Prepare {
            peer: 0xdead_beef,
            incarnation: 7,
        },
        Message::QpInfo(endpoint(2)),
        Message::Connect(endpoint(u32::MAX)),
        Message::Connected {
            peer: 7,
            status: -110,
        },
        Message::JoinDone {
            total_nodes: 64,
            epoch: 0x0102_0304,
        },
        Message::Failure { errno: -28 },
        Message::Heartbeat {
            node_id: 5,
            epoch: u32::MAX,
        },
        Message::HeartbeatAck { epoch: 0xfeed_f00d },
        Message::Suspect {
            peer: 12,
            incarnation: 3,
        },
        Message::NodeDead {
            node: 0x1111_2222,
            incarnation: 0x3333_4444,
            epoch: 0x5555_6666,
        },
        Message::Leave {
            node_id: 0x0a0b_0c0d,
            incarnation: 0xf0e0_d0c0,
        },
        Message::Resume(Resume {
            node_id: 0x0102_0304,
            incarnation: 0x0506_0708,
            epoch: 0x090a_0b0c,
            gid: *b"fedcba9876543210",
        }),
        Message::Resumed { epoch: 0xcafe_babe },
        Message::Challenge {
            nonce: *b"manager nonce 16",
        },
        Message::Auth {
            nonce: *b"node nonce of 16",
            proof: *b"0123456789abcdef0123456789ABCDEF",
        },
        Message::AuthOk {
            proof: *b"fedcba9876543210FEDCBA9876543210",
        },
        Message::Probe {
            peer: 0x1122_3344,
            incarnation: 0x5566_7788,
        },
        Message::ProbeReply {
            peer: 0x99aa_bbcc,
            incarnation: 0xddee_ff00,
            heard_ms_ago: 0x0bad_cafe,
        },
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
    for kind in 1..=20 {
        let kind = Kind::from_u16(kind).expect("kinds 1..=20 exist");
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
    let frame = encode(&Message::Prepare {
        peer: 0x0403_0201,
        incarnation: 0x0807_0605,
    });
    assert_eq!(&frame[0..4], b"LITE");
    assert_eq!(&frame[4..6], &[5, 0]);
    assert_eq!(&frame[6..8], &[Kind::Prepare as u8, 0]);
    assert_eq!(&frame[8..12], &[8, 0, 0, 0]);
    assert_eq!(&frame[12..20], &[1, 2, 3, 4, 5, 6, 7, 8]);
}

#[test]
fn hello_layout_is_gid_rejoin_id_lid() {
    let frame = encode(&Message::Hello(Hello {
        gid: *b"0123456789abcdef",
        lid: 0x0201,
        rejoin_id: 0x0605_0403,
    }));
    let payload = &frame[HEADER_LEN..];
    assert_eq!(payload.len(), 22);
    assert_eq!(&payload[0..16], b"0123456789abcdef");
    assert_eq!(&payload[16..20], &[3, 4, 5, 6]);
    assert_eq!(&payload[20..22], &[1, 2]);
}

#[test]
fn membership_payloads_are_words_in_field_order() {
    let cases = [
        (
            Message::Welcome {
                node_id: 1,
                incarnation: 2,
            },
            vec![1, 2],
        ),
        (
            Message::JoinDone {
                total_nodes: 3,
                epoch: 4,
            },
            vec![3, 4],
        ),
        (
            Message::Heartbeat {
                node_id: 5,
                epoch: 6,
            },
            vec![5, 6],
        ),
        (Message::HeartbeatAck { epoch: 7 }, vec![7]),
        (
            Message::Suspect {
                peer: 8,
                incarnation: 9,
            },
            vec![8, 9],
        ),
        (
            Message::NodeDead {
                node: 10,
                incarnation: 11,
                epoch: 12,
            },
            vec![10, 11, 12],
        ),
        (
            Message::Leave {
                node_id: 13,
                incarnation: 14,
            },
            vec![13, 14],
        ),
        (Message::Resumed { epoch: 15 }, vec![15]),
    ];
    for (message, words) in cases {
        let frame = encode(&message);
        let payload: Vec<u32> = frame[HEADER_LEN..]
            .chunks(4)
            .map(|word| u32::from_le_bytes(word.try_into().expect("whole words")))
            .collect();
        assert_eq!(payload, words, "{message:?}");
    }
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
    let good = encode(&Message::Welcome {
        node_id: 1,
        incarnation: 1,
    });
    let mut bad_magic = good.clone();
    bad_magic[3] = b'X';
    assert_eq!(decode(&bad_magic), Err(WireError::BadMagic));

    // Version 1 had no membership messages and shorter `Hello`s, version 2
    // no authentication, version 3 no probes, version 4 padded payloads.
    for version in [1u16, 2, 3, 4, 6] {
        let mut bad_version = good.clone();
        bad_version[4..6].copy_from_slice(&version.to_le_bytes());
        assert_eq!(decode(&bad_version), Err(WireError::BadVersion));
    }

    for unknown in [0u16, 21, 0xffff] {
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
        (Kind::Hello, 1, 22),
        (Kind::Welcome, 2, 8),
        (Kind::Prepare, 3, 8),
        (Kind::QpInfo, 4, ENDPOINT_LEN),
        (Kind::Connect, 5, ENDPOINT_LEN),
        (Kind::Connected, 6, 8),
        (Kind::JoinDone, 7, 8),
        (Kind::Failure, 8, 4),
        (Kind::Heartbeat, 9, 8),
        (Kind::HeartbeatAck, 10, 4),
        (Kind::Suspect, 11, 8),
        (Kind::NodeDead, 12, 12),
        (Kind::Leave, 13, 8),
        (Kind::Resume, 14, 28),
        (Kind::Resumed, 15, 4),
        (Kind::Challenge, 16, NONCE_LEN),
        (Kind::Auth, 17, NONCE_LEN + MAC_LEN),
        (Kind::AuthOk, 18, MAC_LEN),
        (Kind::Probe, 19, 8),
        (Kind::ProbeReply, 20, 12),
    ];
    for (kind, number, payload_len) in expected {
        assert_eq!(kind as u16, number);
        assert_eq!(Kind::from_u16(number), Ok(kind));
        assert_eq!(kind.payload_len(), payload_len);
        assert!(payload_len <= MAX_PAYLOAD_LEN);
    }
}

#[test]
fn leave_is_kind_13_with_the_node_and_its_incarnation() {
    let leave = Message::Leave {
        node_id: 0x0403_0201,
        incarnation: 0x0807_0605,
    };
    assert_eq!(leave.kind(), Kind::Leave);
    let frame = encode(&leave);
    assert_eq!(frame.len(), HEADER_LEN + 8);
    assert_eq!(&frame[6..8], &[13, 0]);
    assert_eq!(&frame[8..12], &[8, 0, 0, 0]);
    assert_eq!(&frame[HEADER_LEN..], &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(decode(&frame), Ok(leave));

    // Only the exact payload length is accepted.
    for len in [0u32, 7, 9, 12] {
        let mut bad_len = frame.clone();
        bad_len[8..12].copy_from_slice(&len.to_le_bytes());
        assert_eq!(decode(&bad_len), Err(WireError::BadLength), "len {len}");
    }
    assert_eq!(decode(&frame[..frame.len() - 1]), Err(WireError::Truncated));
}

#[test]
fn resume_is_kind_14_with_id_incarnation_epoch_and_gid() {
    let resume = Message::Resume(Resume {
        node_id: 0x0403_0201,
        incarnation: 0x0807_0605,
        epoch: 0x0c0b_0a09,
        gid: *b"0123456789abcdef",
    });
    assert_eq!(resume.kind(), Kind::Resume);
    let frame = encode(&resume);
    assert_eq!(frame.len(), HEADER_LEN + 28);
    assert_eq!(&frame[6..8], &[14, 0]);
    assert_eq!(&frame[8..12], &[28, 0, 0, 0]);
    let payload = &frame[HEADER_LEN..];
    assert_eq!(&payload[0..12], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    assert_eq!(&payload[12..28], b"0123456789abcdef");
    assert_eq!(decode(&frame), Ok(resume));

    for len in [0u32, 8, 24, 27, 29, 32] {
        let mut bad_len = frame.clone();
        bad_len[8..12].copy_from_slice(&len.to_le_bytes());
        assert_eq!(decode(&bad_len), Err(WireError::BadLength), "len {len}");
    }
    assert_eq!(decode(&frame[..frame.len() - 1]), Err(WireError::Truncated));
}

#[test]
fn resumed_is_kind_15_with_the_epoch() {
    let resumed = Message::Resumed { epoch: 0x0403_0201 };
    assert_eq!(resumed.kind(), Kind::Resumed);
    let frame = encode(&resumed);
    assert_eq!(frame.len(), HEADER_LEN + 4);
    assert_eq!(&frame[6..8], &[15, 0]);
    assert_eq!(&frame[8..12], &[4, 0, 0, 0]);
    assert_eq!(&frame[HEADER_LEN..], &[1, 2, 3, 4]);
    assert_eq!(decode(&frame), Ok(resumed));

    for len in [0u32, 8, 12, 28] {
        let mut bad_len = frame.clone();
        bad_len[8..12].copy_from_slice(&len.to_le_bytes());
        assert_eq!(decode(&bad_len), Err(WireError::BadLength), "len {len}");
    }
    assert_eq!(decode(&frame[..frame.len() - 1]), Err(WireError::Truncated));
}

#[test]
fn authentication_payloads_are_nonces_then_proofs() {
    let challenge = encode(&Message::Challenge { nonce: [1; 16] });
    assert_eq!(&challenge[6..12], &[16, 0, 16, 0, 0, 0]);
    assert_eq!(&challenge[HEADER_LEN..], &[1; 16]);

    let mut proof = [0u8; 32];
    for (i, byte) in proof.iter_mut().enumerate() {
        *byte = i as u8;
    }
    let auth = encode(&Message::Auth {
        nonce: [0xee; 16],
        proof,
    });
    assert_eq!(&auth[6..12], &[17, 0, 48, 0, 0, 0]);
    assert_eq!(&auth[HEADER_LEN..HEADER_LEN + 16], &[0xee; 16]);
    assert_eq!(&auth[HEADER_LEN + 16..], &proof);

    let ok = encode(&Message::AuthOk { proof });
    assert_eq!(&ok[6..12], &[18, 0, 32, 0, 0, 0]);
    assert_eq!(&ok[HEADER_LEN..], &proof);
    assert_eq!(MAX_PAYLOAD_LEN, 48, "Auth is the longest payload");
}

#[test]
fn auth_input_is_label_then_both_nonces() {
    let mut out = [0u8; AUTH_INPUT_LEN];
    let len = auth_input(NODE_LABEL, &[1; 16], &[2; 16], &mut out);
    assert_eq!(len, NODE_LABEL.len() + 32);
    assert_eq!(&out[..NODE_LABEL.len()], NODE_LABEL);
    assert_eq!(&out[NODE_LABEL.len()..NODE_LABEL.len() + 16], &[1; 16]);
    assert_eq!(&out[NODE_LABEL.len() + 16..len], &[2; 16]);
    for label in [NODE_LABEL, MANAGER_LABEL, SESSION_LABEL] {
        assert!(label.len() <= AUTH_INPUT_LEN - 2 * NONCE_LEN, "{label:?}");
    }
    assert_ne!(NODE_LABEL, MANAGER_LABEL);
    assert_ne!(MANAGER_LABEL, SESSION_LABEL);
}

#[test]
fn tag_input_is_direction_sequence_then_frame() {
    let frame = encode(&Message::HeartbeatAck { epoch: 7 });
    let mut out = [0u8; TAG_INPUT_LEN];
    let len =
        tag_input(MANAGER_TO_NODE, 0x0102_0304_0506_0708, &frame, &mut out).expect("a frame fits");
    assert_eq!(len, 9 + frame.len());
    assert_eq!(out[0], b'M');
    assert_eq!(&out[1..9], &[8, 7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(&out[9..len], frame.as_slice());
    assert_eq!(NODE_TO_MANAGER, b'N');
    assert!(tag_input(NODE_TO_MANAGER, 0, &[0; MAX_FRAME_LEN + 1], &mut out).is_none());
}

// A tag is a prefix of an HMAC-SHA256 result.
const _: () = assert!(TAG_LEN <= MAC_LEN);

#[test]
fn same_bytes_needs_equal_length_and_content() {
    assert!(same_bytes(b"", b""));
    assert!(same_bytes(b"abc", b"abc"));
    assert!(!same_bytes(b"abc", b"abd"));
    assert!(!same_bytes(b"abc", b"ab"));
    assert!(!same_bytes(b"ab", b"abc"));
}
