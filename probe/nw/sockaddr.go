package nw

import (
	"encoding/binary"
	"net/netip"
)

// DecodeSockaddr reads a BSD sockaddr_in or sockaddr_in6 (sa_len,
// sa_family, port in network order).
func DecodeSockaddr(b []byte) netip.AddrPort {
	const afInet, afInet6 = 2, 30
	if len(b) < 8 {
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(b[2:])
	switch b[1] {
	case afInet:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case afInet6:
		if len(b) >= 24 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), port)
		}
	}
	return netip.AddrPort{}
}
