#!/usr/bin/env python3
"""Send scapy-built RoCEv2 requests to a live dmkv memory node and report its answers.

Used by memnode/tests/interop_scapy.rs. The exchange with the caller:

  1. The script binds a UDP socket on 127.0.0.1 (ephemeral port) and prints
     `{"port": N}` on one line.
  2. The caller creates a responder queue pair for that address and writes one JSON
     line on stdin: {"node": "IP:PORT", "node_qpn": N, "psn": N, "rkey": N, "va": N}.
  3. The script sends each request through the socket, receives the answer (if one is
     expected) on the same socket, and prints one JSON document: {"steps": [...]} with,
     per step, what was sent and what came back as decoded by scapy.

Requests are built with scapy's RoCE layers (scapy.contrib.roce has BTH and AETH; the
RETH and AtomicETH are appended as raw bytes, which the ICRC covers like any payload).
scapy computes each request's ICRC over the IPv4/UDP headers the kernel will put on the
datagram: Linux sends from an unconnected socket with DF set with IP id 0, and the ICRC
masks TOS, TTL and both checksums. The BTH..ICRC bytes are then sent through an ordinary
UDP socket. A response's ICRC is checked by rebuilding it with scapy over
IP(node -> us, id 0, DF)/UDP and comparing.
"""

import json
import socket
import struct
import sys

from scapy.compat import raw
from scapy.contrib.roce import AETH, BTH
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw

OP = {
    "WRITE_ONLY": 0x0A,
    "READ_REQUEST": 0x0C,
    "COMPARE_SWAP": 0x13,
    "FETCH_ADD": 0x14,
}
PSN_MASK = 0xFFFFFF
# Linux's IP_MTU_DISCOVER / IP_PMTUDISC_DO (not exported by every Python build).
IP_MTU_DISCOVER = getattr(socket, "IP_MTU_DISCOVER", 10)
IP_PMTUDISC_DO = getattr(socket, "IP_PMTUDISC_DO", 2)
# How long to wait for an answer that must come, and for one that must not.
ANSWER_TIMEOUT = 5.0
SILENCE = 0.3


def reth(va, rkey, dma_len):
    return struct.pack("!QII", va, rkey, dma_len)


def atomic_eth(va, rkey, swap_add, compare):
    return struct.pack("!QIQQ", va, rkey, swap_add, compare)


def network(src, dst):
    """The IPv4/UDP headers the kernel emits for our datagram (ICRC-relevant fields)."""
    return IP(src=src[0], dst=dst[0], id=0, flags="DF") / UDP(sport=src[1], dport=dst[1])


def roce_bytes(pkt):
    """BTH..ICRC of a scapy IP/UDP/BTH packet, with scapy's ICRC."""
    wire = raw(pkt)
    ihl = (wire[0] & 0x0F) * 4
    return wire[ihl + 8:]


def build(me, node, opcode, dqpn, psn, body, padcount=0):
    pkt = network(me, node) / BTH(
        opcode=opcode, migreq=1, padcount=padcount, dqpn=dqpn, psn=psn & PSN_MASK, ackreq=1
    ) / Raw(body)
    return roce_bytes(pkt)


def icrc_of(src, dst, roce):
    """(matches, scapy's ICRC) for a received packet: rebuild it with scapy over the
    headers it travelled with and compare."""
    pkt = network(src, dst) / BTH(roce)
    pkt[BTH].icrc = None
    rebuilt = roce_bytes(pkt)
    return rebuilt == roce, int.from_bytes(rebuilt[-4:], "little")


def decode(roce, src, dst):
    """What scapy makes of a response."""
    bth = BTH(roce)
    out = dict(
        opcode=bth.opcode,
        opcode_name=bth.get_field("opcode").i2repr(bth, bth.opcode),
        dqpn=bth.dqpn,
        psn=bth.psn,
        ackreq=bth.ackreq,
        padcount=bth.padcount,
        pkey=bth.pkey,
        stored_icrc=int.from_bytes(roce[-4:], "little"),
    )
    body = roce[12:-4]
    if bth.opcode in (0x0D, 0x0F, 0x10, 0x11, 0x12):
        aeth = AETH(body[:4])
        out["syndrome"] = aeth.syndrome
        out["msn"] = aeth.msn
        body = body[4:]
    if bth.opcode == 0x12:
        (out["original"],) = struct.unpack("!Q", body[:8])
        body = body[8:]
    if bth.padcount:
        body = body[: len(body) - bth.padcount]
    out["payload"] = body.hex()
    ok, scapy_icrc = icrc_of(src, dst, roce)
    out["icrc_ok"] = ok
    out["scapy_icrc"] = scapy_icrc
    return out


def main():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
    sock.bind(("127.0.0.1", 0))
    me = sock.getsockname()
    print(json.dumps({"port": me[1]}), flush=True)

    setup = json.loads(sys.stdin.readline())
    host, port = setup["node"].rsplit(":", 1)
    node = (host, int(port))
    qpn, psn0, rkey, va = setup["node_qpn"], setup["psn"], setup["rkey"], setup["va"]

    data = bytes((i * 7 + 1) & 0xFF for i in range(64))
    swap = 0x0123456789ABCDEF
    other = 0x0FEDCBA987654321
    add = 5
    word = va + 64
    bad_rkey = rkey ^ 0x5A5A5A5A
    # (name, opcode, PSN offset, body, answer expected, corrupt the ICRC)
    steps = [
        ("write", OP["WRITE_ONLY"], 0, reth(va, rkey, 64) + data, True, False),
        # A WRITE to va+128 with a broken ICRC: dropped silently, PSN not consumed.
        ("bad_icrc", OP["WRITE_ONLY"], 1, reth(va + 128, rkey, 64) + data, False, True),
        ("read", OP["READ_REQUEST"], 1, reth(va, rkey, 64), True, False),
        ("cas", OP["COMPARE_SWAP"], 2, atomic_eth(word, rkey, swap, 0), True, False),
        ("cas_fails", OP["COMPARE_SWAP"], 3, atomic_eth(word, rkey, other, 0), True, False),
        ("faa", OP["FETCH_ADD"], 4, atomic_eth(word, rkey, add, 0), True, False),
        ("read_word", OP["READ_REQUEST"], 5, reth(word, rkey, 8), True, False),
        ("bad_rkey", OP["READ_REQUEST"], 6, reth(va, bad_rkey, 64), True, False),
        ("read_untouched", OP["READ_REQUEST"], 7, reth(va + 128, rkey, 64), True, False),
    ]
    report = []
    for name, opcode, offset, body, answered, corrupt in steps:
        psn = (psn0 + offset) & PSN_MASK
        roce = bytearray(build(me, node, opcode, qpn, psn, body))
        if corrupt:
            roce[-1] ^= 0xFF
        roce = bytes(roce)
        sock.sendto(roce, node)
        step = dict(name=name, opcode=opcode, psn=psn, request=roce.hex(), answered=answered)
        sock.settimeout(ANSWER_TIMEOUT if answered else SILENCE)
        try:
            answer, sender = sock.recvfrom(65536)
        except socket.timeout:
            answer, sender = None, None
        if answer is None:
            step["response"] = None
        else:
            step["response"] = answer.hex()
            step["from"] = "%s:%d" % sender
            step["decoded"] = decode(answer, sender, me)
        report.append(step)
    json.dump(
        dict(client=list(me), data=data.hex(), swap=swap, other=other, add=add, steps=report),
        sys.stdout,
    )
    print(flush=True)


if __name__ == "__main__":
    main()
