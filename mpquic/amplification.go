package mpquic

// Anti-amplification toward an address not yet validated (RFC 9000 §8,
// §9.3; multipath draft-21 §"Path Initiation" applies it per path): until
// a PATH_RESPONSE proves the peer is at the address, a server sends there
// at most three times what it received from there. Without it, a packet
// replayed from a spoofed source (or a new path opened toward a victim)
// would turn the server's congestion window of data onto that address.
// The handshake's own limit is the connection's (addrValidated).

// ampLimit counts one path's bytes each way while its address is
// unvalidated.
type ampLimit struct {
	on         bool
	recv, sent int
}

// start begins counting for a new address.
func (a *ampLimit) start() { *a = ampLimit{on: true} }

// lift: the address is validated.
func (a *ampLimit) lift() { a.on = false }

func (a *ampLimit) received(n int) {
	if a.on {
		a.recv += n
	}
}

func (a *ampLimit) sentBytes(n int) {
	if a.on {
		a.sent += n
	}
}

// allowance caps a datagram's size at what the limit leaves.
func (a *ampLimit) allowance(size int) int {
	if !a.on {
		return size
	}
	return min(size, 3*a.recv-a.sent)
}

// minAmpDatagram: below this a datagram cannot carry a PATH_CHALLENGE or
// PATH_RESPONSE (short header, 8-byte ID, packet number, frame, tag).
const minAmpDatagram = 48
