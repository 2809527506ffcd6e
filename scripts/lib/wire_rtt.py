"""Per-target RTTs on the wire, from a pcap of a probe path's interface.

The capture's timestamps are the kernel's at the interface (the tap on
transmit, netif_receive on receive), the same clock the survey reads with
SO_TIMESTAMPNS; they are the reference for a tool's own timestamp error,
free of the lab's delivery lateness, which delays the packet before the
interface sees it. Matched probes: ICMP and ICMPv6 echo request/reply (by
address, id and sequence) and TCP SYN against SYN-ACK or RST (by address,
ports and acknowledged sequence). Used by scripts/bench-survey-cpu.

    wire_rtts(path) -> {address: [rtt_ms, ...]} in send order
"""
import ipaddress
import struct


def _packets(path):
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack("<I", head[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            end = "<"
        else:
            end = ">"
            magic = struct.unpack(">I", head[:4])[0]
        nano = magic == 0xA1B23C4D
        linktype = struct.unpack(end + "I", head[20:24])[0] & 0xFFFF
        skip = {1: 14, 101: 0, 12: 0, 228: 0, 229: 0, 113: 16, 276: 20}.get(linktype)
        if skip is None:
            raise ValueError(f"{path}: link type {linktype} not handled")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            sec, frac, incl, _ = struct.unpack(end + "IIII", rec)
            data = f.read(incl)
            t = sec + frac / (1e9 if nano else 1e6)
            yield t, data[skip:]


def wire_rtts(path):
    sent = {}  # key -> time
    out = {}
    for t, p in _packets(path):
        if not p:
            continue
        v = p[0] >> 4
        if v == 4:
            ihl = (p[0] & 15) * 4
            proto, src, dst = p[9], p[12:16], p[16:20]
            l4 = p[ihl:]
            fmt = lambda a: ".".join(str(b) for b in a)
            icmp_req, icmp_rep = (8, 0), 1
        elif v == 6:
            proto, src, dst = p[6], p[8:24], p[24:40]
            l4 = p[40:]
            fmt = lambda a: ":".join(f"{a[i] << 8 | a[i + 1]:x}" for i in range(0, 16, 2))
            icmp_req, icmp_rep = (128, 129), 58
        else:
            continue
        if proto == icmp_rep and len(l4) >= 8:
            typ = l4[0]
            ident, seq = struct.unpack(">HH", l4[4:8])
            if typ == icmp_req[0]:
                sent[("i", dst, ident, seq)] = t
            elif typ == icmp_req[1]:
                k = ("i", src, ident, seq)
                if k in sent:
                    out.setdefault(_norm(fmt(src)), []).append((sent.pop(k), t))
        elif proto == 6 and len(l4) >= 14:
            sport, dport, seq, ack = struct.unpack(">HHII", l4[:12])
            flags = l4[13]
            syn, ackf, rst = flags & 2, flags & 16, flags & 4
            if syn and not ackf:
                sent[("t", dst, sport, dport, (seq + 1) & 0xFFFFFFFF)] = t
            elif (syn and ackf) or rst:
                k = ("t", src, dport, sport, ack)
                if k in sent:
                    out.setdefault(_norm(fmt(src)), []).append((sent.pop(k), t))
    return {a: [(r - s) * 1000 for s, r in sorted(v)] for a, v in out.items()}


def _norm(a):
    if ":" not in a:
        return a
    return str(ipaddress.ip_address(a))
