package mpquic

import "github.com/mptester/mptester/mpquic/internal/recovery"

// maxAckRanges is the most ranges an ACK frame carries.
const maxAckRanges = 64

// Kinds of recovery.SentFrame: what a lost packet's frame means to the sender.
const (
	sfStream uint8 = iota
	sfCrypto
	sfMaxData
	sfMaxStreamData
	sfMaxStreams
	sfHandshakeDone
	sfResetStream
	sfStopSending
	sfDataBlocked
	sfAck
	sfNewCID
	sfRetireCID
	sfPathChallenge
	sfPathAbandon
	sfPathStatus
	sfMaxPathID
	sfMaxStreamsUni
)

// hasCrypto says whether a sent packet carried CRYPTO data.
func hasCrypto(p *recovery.SentPacket) bool {
	for _, f := range p.Frames {
		if f.Kind == sfCrypto {
			return true
		}
	}
	return false
}
