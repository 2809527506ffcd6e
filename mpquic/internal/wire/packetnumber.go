package wire

import "math/bits"

// MaxPacketNumber is the largest packet number (RFC 9000 §12.3).
const MaxPacketNumber = 1<<62 - 1

// PacketNumberLen is how many bytes (1-4) to encode full with, given the
// largest packet number the peer acknowledged in this space, or -1 if none
// (RFC 9000 §17.1 and the algorithm of Appendix A.2): the encoding must span
// more than twice the range of unacknowledged packets.
func PacketNumberLen(full uint64, largestAcked int64) int {
	var unacked uint64
	if largestAcked < 0 {
		unacked = full + 1
	} else {
		unacked = full - uint64(largestAcked)
	}
	// min_bits = log2(unacked) + 1, rounded up to bytes; ceil(log2 n) is Len(n-1).
	n := (bits.Len64(unacked-1) + 1 + 7) / 8
	if n < 1 {
		n = 1
	}
	if n > 4 {
		n = 4
	}
	return n
}

// appendPacketNumber appends the low n bytes of pn.
func appendPacketNumber(b []byte, pn uint64, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte(pn>>(8*i)))
	}
	return b
}

// DecodePacketNumber recovers a full packet number from its truncated
// nbits-bit encoding and the largest packet number received so far in the
// space, or -1 if none (RFC 9000 Appendix A.3): the candidate closest to
// largest+1.
func DecodePacketNumber(largest int64, truncated uint64, nbits int) uint64 {
	expected := uint64(largest + 1)
	win := uint64(1) << nbits
	hwin := win / 2
	mask := win - 1
	candidate := (expected &^ mask) | truncated
	switch {
	case candidate+hwin <= expected && candidate < (1<<62)-win:
		return candidate + win
	case candidate > expected+hwin && candidate >= win:
		return candidate - win
	}
	return candidate
}
