package mpquic

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
