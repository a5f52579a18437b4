#!/usr/bin/env python3
"""Independent RoCEv2 test vectors built with scapy, for dmkv's wire-format tests.

Modes:
  icrc_vectors.py [gen]   Build frames with scapy (which computes the ICRC itself)
                          and print one line per frame:
                          `<name> key=value ... frame=<hex>`.
  icrc_vectors.py check   Read `<name> <hex>` lines on stdin (Ethernet frames built
                          elsewhere), let scapy dissect each one and recompute its
                          ICRC, and print `<name> icrc_ok=<0|1> key=value ...`
                          with the BTH fields as scapy decodes them.

scapy's RoCE support (scapy.contrib.roce) has BTH and AETH layers only; RETH,
ImmDt, AtomicETH and AtomicAckETH are appended as Raw bytes after the BTH, which
scapy's ICRC covers like any other BTH payload.
"""

import struct
import sys

from scapy.layers.inet import IP, UDP, IPOption_Router_Alert
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.contrib.roce import AETH, BTH

SRC_MAC = "02:00:00:00:00:01"
DST_MAC = "02:00:00:00:00:02"


def reth(va, rkey, dma_len):
    return struct.pack("!QII", va, rkey, dma_len)


def atomic_eth(va, rkey, swap_add, compare):
    return struct.pack("!QIQQ", va, rkey, swap_add, compare)


def pad(payload):
    return b"\x00" * ((4 - len(payload) % 4) % 4)


def network(tos=0x02, ttl=64, ip_id=0, options=None, sport=49152):
    ip = IP(src="10.0.0.1", dst="10.0.0.2", tos=tos, ttl=ttl, id=ip_id, flags="DF")
    if options is not None:
        ip.options = options
    return Ether(src=SRC_MAC, dst=DST_MAC) / ip / UDP(sport=sport, dport=4791, chksum=0)


def vectors():
    """Yield (name, fields, scapy packet)."""
    payload13 = bytes(range(13))
    payload1k = bytes((i * 7) & 0xFF for i in range(1024))
    payload64 = bytes(range(100, 164))

    f = dict(opcode=0x0C, dqpn=0x5434, psn=0x0C71, ackreq=1, va=0x7F00DEADBEEF0040,
             rkey=0x12345678, dmalen=64)
    yield "read_request", f, network() / BTH(
        opcode=f["opcode"], migreq=1, dqpn=f["dqpn"], psn=f["psn"], ackreq=1
    ) / Raw(reth(f["va"], f["rkey"], f["dmalen"]))

    f = dict(opcode=0x0A, dqpn=0xABCDEF, psn=0xFFFFFF, ackreq=1, va=0x1000, rkey=7,
             dmalen=len(payload13), padcount=3, payload=payload13.hex())
    yield "write_only_pad3", f, network(tos=0x00, ttl=3) / BTH(
        opcode=f["opcode"], migreq=1, padcount=3, dqpn=f["dqpn"], psn=f["psn"], ackreq=1
    ) / Raw(reth(f["va"], f["rkey"], f["dmalen"]) + payload13 + pad(payload13))

    f = dict(opcode=0x0A, dqpn=0x11, psn=1, ackreq=1, va=0xFFFFFFFFFFFFFFF8, rkey=0xFFFFFFFF,
             dmalen=1024, payload=payload1k.hex())
    yield "write_only_1k", f, network(ip_id=0x5333) / BTH(
        opcode=f["opcode"], migreq=1, dqpn=f["dqpn"], psn=f["psn"], ackreq=1
    ) / Raw(reth(f["va"], f["rkey"], f["dmalen"]) + payload1k)

    f = dict(opcode=0x0B, dqpn=0x22, psn=2, ackreq=1, va=0x2000, rkey=9, dmalen=5,
             imm=0xCAFEF00D, padcount=3, payload=payload13[:5].hex())
    yield "write_only_imm", f, network() / BTH(
        opcode=f["opcode"], migreq=1, padcount=3, dqpn=f["dqpn"], psn=f["psn"], ackreq=1
    ) / Raw(reth(f["va"], f["rkey"], f["dmalen"]) + struct.pack("!I", f["imm"])
            + payload13[:5] + pad(payload13[:5]))

    f = dict(opcode=0x13, dqpn=0x5434, psn=0x0C72, ackreq=1, va=0x7F0000001008, rkey=0x55,
             swap=0x0123456789ABCDEF, compare=0)
    yield "compare_swap", f, network() / BTH(
        opcode=f["opcode"], migreq=1, dqpn=f["dqpn"], psn=f["psn"], ackreq=1
    ) / Raw(atomic_eth(f["va"], f["rkey"], f["swap"], f["compare"]))

    f = dict(opcode=0x14, dqpn=0x5434, psn=0x0C73, ackreq=1, va=0x7F0000001010, rkey=0x55,
             swap=1, compare=0)
    yield "fetch_add_fecn_becn", f, network(tos=0x03) / BTH(
        opcode=f["opcode"], migreq=1, fecn=1, becn=1, dqpn=f["dqpn"], psn=f["psn"], ackreq=1
    ) / Raw(atomic_eth(f["va"], f["rkey"], f["swap"], f["compare"]))

    f = dict(opcode=0x11, dqpn=0x8D7C, psn=0x0C71, ackreq=0, syndrome=0x1F, msn=1)
    yield "ack", f, network() / BTH(
        opcode=f["opcode"], migreq=1, dqpn=f["dqpn"], psn=f["psn"]
    ) / AETH(syndrome=f["syndrome"], msn=f["msn"])

    f = dict(opcode=0x11, dqpn=0x8D7C, psn=0x0C80, ackreq=0, syndrome=0x62, msn=0xFFFFFF)
    yield "nak_remote_access", f, network() / BTH(
        opcode=f["opcode"], migreq=1, dqpn=f["dqpn"], psn=f["psn"]
    ) / AETH(syndrome=f["syndrome"], msn=f["msn"])

    f = dict(opcode=0x12, dqpn=0x8D7C, psn=0x0C72, ackreq=0, syndrome=0x1F, msn=2,
             original=0xFEEDFACECAFEBEEF)
    yield "atomic_ack", f, network() / BTH(
        opcode=f["opcode"], migreq=1, dqpn=f["dqpn"], psn=f["psn"]
    ) / AETH(syndrome=f["syndrome"], msn=f["msn"]) / Raw(struct.pack("!Q", f["original"]))

    f = dict(opcode=0x10, dqpn=0x8D7C, psn=0x0C74, ackreq=0, syndrome=0x1F, msn=3,
             payload=payload64.hex())
    yield "read_response_only", f, network() / BTH(
        opcode=f["opcode"], migreq=1, dqpn=f["dqpn"], psn=f["psn"]
    ) / AETH(syndrome=f["syndrome"], msn=f["msn"]) / Raw(payload64)

    f = dict(opcode=0x0E, dqpn=0x8D7C, psn=0x0C75, ackreq=0, padcount=2,
             payload=payload13[:10].hex())
    yield "read_response_middle_ip_options", f, network(
        ttl=1, options=[IPOption_Router_Alert()]
    ) / BTH(
        opcode=f["opcode"], migreq=1, padcount=2, dqpn=f["dqpn"], psn=f["psn"]
    ) / Raw(payload13[:10] + pad(payload13[:10]))


def gen():
    for name, fields, pkt in vectors():
        frame = bytes(pkt)
        fields = dict(fields)
        fields["icrc"] = int.from_bytes(frame[-4:], "little")
        kv = " ".join(f"{k}={v}" for k, v in fields.items())
        print(f"{name} {kv} frame={frame.hex()}")


def check():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        name, hexframe = line.split()
        frame = bytes.fromhex(hexframe)
        pkt = Ether(frame)
        if BTH not in pkt:
            print(f"{name} icrc_ok=0 error=no_bth")
            continue
        bth = pkt[BTH]
        decoded = dict(opcode=bth.opcode, dqpn=bth.dqpn, psn=bth.psn, ackreq=bth.ackreq,
                       migreq=bth.migreq, padcount=bth.padcount, pkey=bth.pkey,
                       version=bth.version)
        pkt[BTH].icrc = None
        rebuilt = bytes(pkt)
        ok = int(rebuilt == frame)
        scapy_icrc = int.from_bytes(rebuilt[-4:], "little")
        kv = " ".join(f"{k}={v}" for k, v in decoded.items())
        print(f"{name} icrc_ok={ok} scapy_icrc={scapy_icrc} {kv}")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "gen"
    if mode == "gen":
        gen()
    elif mode == "check":
        check()
    else:
        sys.exit(f"unknown mode {mode!r} (expected gen or check)")
