// SPDX-License-Identifier: GPL-2.0

//! Joining the cluster through the cluster manager, and staying in it.
//!
//! The node keeps its TCP connection to the manager open after joining: a
//! kernel thread answers the manager's requests to connect to nodes that
//! join later. Membership thus belongs to the node, not to the process that
//! called `lite_join`.

use kernel::{c_str, prelude::*, sync::Arc};

use super::{
    cluster::Cluster,
    cm_wire::{Endpoint, Header, Hello, Message, HEADER_LEN, MAX_FRAME_LEN, MAX_PAYLOAD_LEN},
    core::limits::MAX_NODES,
};
use crate::{
    errno,
    sys::{kthread, tcp::TcpStream},
    verbs::{PortConfig, RemoteEnd},
};

/// Reads one frame from the manager.
fn receive(stream: &TcpStream) -> Result<Message> {
    let mut header = [0u8; HEADER_LEN];
    stream.recv_exact(&mut header)?;
    let header = Header::decode(&header).map_err(|_| errno::EPROTO())?;
    let mut payload = [0u8; MAX_PAYLOAD_LEN];
    let payload = payload
        .get_mut(..header.kind.payload_len())
        .ok_or_else(errno::EPROTO)?;
    stream.recv_exact(payload)?;
    Message::decode(header, payload).map_err(|_| errno::EPROTO())
}

/// Sends one frame to the manager.
fn send(stream: &TcpStream, message: &Message) -> Result {
    let mut frame = [0u8; MAX_FRAME_LEN];
    let len = message.encode(&mut frame);
    // PANIC: `encode` returns the length of the frame it wrote into `frame`.
    stream.send_all(&frame[..len])
}

/// Introduces this node to the manager; returns the node id it assigns.
pub(crate) fn hello(stream: &TcpStream, port: &PortConfig) -> Result<u32> {
    send(
        stream,
        &Message::Hello(Hello {
            gid: port.gid,
            lid: port.lid,
        }),
    )?;
    match receive(stream)? {
        Message::Welcome { node_id } if node_id != 0 && (node_id as usize) < MAX_NODES => {
            Ok(node_id)
        }
        Message::Failure { errno } if errno < 0 => Err(Error::from_errno(errno)),
        _ => Err(errno::EPROTO()),
    }
}

/// Connects to every node already in the cluster, as the manager directs;
/// returns the number of nodes once the manager reports the join complete.
pub(crate) fn complete_join(cluster: &Cluster, stream: &TcpStream) -> Result<u32> {
    loop {
        match receive(stream)? {
            Message::JoinDone { total_nodes } => return Ok(total_nodes),
            Message::Failure { errno } if errno < 0 => return Err(Error::from_errno(errno)),
            message => serve(cluster, stream, message)?,
        }
    }
}

/// Answers one request of the manager about a peer.
fn serve(cluster: &Cluster, stream: &TcpStream, message: Message) -> Result {
    match message {
        Message::Prepare { peer } => {
            let reply = match cluster.core.prepare_peer(peer) {
                Ok(prepared) => {
                    let (qpn, psn) = prepared.conn.endpoint();
                    Message::QpInfo(Endpoint {
                        peer,
                        qpn,
                        psn,
                        lid: cluster.core.port().lid,
                        mtu: cluster.core.port().mtu_bytes(),
                        gid: cluster.core.port().gid,
                    })
                }
                Err(e) => Message::Failure {
                    errno: e.to_errno(),
                },
            };
            send(stream, &reply)
        }
        Message::Connect(remote) => {
            let status = match cluster.core.peer_entry(remote.peer) {
                Some(peer) => {
                    let end = RemoteEnd {
                        qpn: remote.qpn,
                        psn: remote.psn,
                        lid: remote.lid,
                        mtu: remote.mtu,
                        gid: remote.gid,
                    };
                    match peer.connect(&end, cluster.core.port()) {
                        Ok(()) => {
                            pr_info!(
                                "node {} connected to node {}\n",
                                cluster.core.node_id(),
                                remote.peer
                            );
                            cluster.peer_joined(remote.peer);
                            0
                        }
                        Err(e) => e.to_errno(),
                    }
                }
                None => EINVAL.to_errno(),
            };
            send(
                stream,
                &Message::Connected {
                    peer: remote.peer,
                    status,
                },
            )
        }
        _ => Err(errno::EPROTO()),
    }
}

/// What the membership thread owns.
struct Listener {
    cluster: Arc<Cluster>,
    stream: TcpStream,
}

/// Hands the manager connection to a kernel thread serving later joins.
pub(crate) fn keep_membership(cluster: Arc<Cluster>, stream: TcpStream) -> Result {
    let listener = Arc::new(Listener { cluster, stream }, GFP_KERNEL)?;
    kthread::spawn(c_str!("lite_cm"), listener, run)?;
    Ok(())
}

fn run(listener: Arc<Listener>) {
    loop {
        let result = receive(&listener.stream)
            .and_then(|message| serve(&listener.cluster, &listener.stream, message));
        if let Err(e) = result {
            pr_warn!(
                "lost the cluster manager ({:?}); nodes joining later cannot reach node {}\n",
                e,
                listener.cluster.core.node_id()
            );
            return;
        }
    }
}
