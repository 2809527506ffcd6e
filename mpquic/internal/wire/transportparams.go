package wire

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// Transport parameter IDs (RFC 9000 §18.2; draft-ietf-quic-multipath-21
// §"initial_max_path_id Transport Parameter").
const (
	tpOriginalDCID               = 0x00
	tpMaxIdleTimeout             = 0x01
	tpStatelessResetToken        = 0x02
	tpMaxUDPPayloadSize          = 0x03
	tpInitialMaxData             = 0x04
	tpInitialMaxStreamDataBidiLo = 0x05
	tpInitialMaxStreamDataBidiRe = 0x06
	tpInitialMaxStreamDataUni    = 0x07
	tpInitialMaxStreamsBidi      = 0x08
	tpInitialMaxStreamsUni       = 0x09
	tpAckDelayExponent           = 0x0a
	tpMaxAckDelay                = 0x0b
	tpDisableActiveMigration     = 0x0c
	tpPreferredAddress           = 0x0d
	tpActiveConnIDLimit          = 0x0e
	tpInitialSCID                = 0x0f
	tpRetrySCID                  = 0x10
	tpVersionInformation         = 0x11 // RFC 9368 §3
	tpInitialMaxPathID           = 0x3e
)

// Defaults of absent parameters (RFC 9000 §18.2).
const (
	DefaultMaxUDPPayloadSize = 65527
	DefaultAckDelayExponent  = 3
	DefaultMaxAckDelay       = 25 * time.Millisecond
	DefaultActiveConnIDLimit = 2
	maxAckDelayLimit         = 1 << 14 // milliseconds, exclusive
	maxAckDelayExponentLimit = 20
	minMaxUDPPayloadSize     = 1200
)

// PreferredAddress is the server's preferred_address (RFC 9000 §18.2).
type PreferredAddress struct {
	IPv4, IPv6 netip.AddrPort
	ConnID     []byte
	ResetToken [16]byte
}

// TransportParameters are one endpoint's parameters. Connection IDs are nil
// when absent (an empty non-nil slice is a present zero-length ID);
// InitialMaxPathID is nil unless the endpoint offers multipath.
type TransportParameters struct {
	OriginalDCID                   []byte
	MaxIdleTimeout                 time.Duration
	StatelessResetToken            *[16]byte
	MaxUDPPayloadSize              uint64
	InitialMaxData                 uint64
	InitialMaxStreamDataBidiLocal  uint64
	InitialMaxStreamDataBidiRemote uint64
	InitialMaxStreamDataUni        uint64
	InitialMaxStreamsBidi          uint64
	InitialMaxStreamsUni           uint64
	AckDelayExponent               uint64
	MaxAckDelay                    time.Duration
	DisableActiveMigration         bool
	PreferredAddress               *PreferredAddress
	ActiveConnIDLimit              uint64
	InitialSCID                    []byte
	RetrySCID                      []byte
	InitialMaxPathID               *uint32
	// VersionInfo is version_information (RFC 9368 §3); nil when absent.
	VersionInfo *VersionInfo
}

// VersionInfo is the version_information transport parameter (RFC 9368
// §3): the version the sender chose for the connection and the versions
// it offers (a client: those its first flight is compatible with, by
// preference, Chosen among them; a server: all it speaks).
type VersionInfo struct {
	Chosen    uint32
	Available []uint32
}

// DefaultTransportParameters are the values of a peer that sent none.
func DefaultTransportParameters() TransportParameters {
	return TransportParameters{
		MaxUDPPayloadSize: DefaultMaxUDPPayloadSize,
		AckDelayExponent:  DefaultAckDelayExponent,
		MaxAckDelay:       DefaultMaxAckDelay,
		ActiveConnIDLimit: DefaultActiveConnIDLimit,
	}
}

func tpErr(format string, args ...any) error {
	return transportErr(TransportParameterError, 0, format, args...)
}

// Append encodes the parameters, leaving out those at their default. Build
// p from DefaultTransportParameters: a zero max_udp_payload_size or
// active_connection_id_limit would be sent as is and refused by the peer.
func (p *TransportParameters) Append(b []byte) []byte {
	cid := func(id uint64, v []byte) {
		if v != nil {
			b = appendVarints(b, id, uint64(len(v)))
			b = append(b, v...)
		}
	}
	num := func(id, v, def uint64) {
		if v != def {
			b = appendVarints(b, id, uint64(VarintLen(v)), v)
		}
	}
	cid(tpOriginalDCID, p.OriginalDCID)
	num(tpMaxIdleTimeout, uint64(p.MaxIdleTimeout/time.Millisecond), 0)
	if p.StatelessResetToken != nil {
		b = appendVarints(b, tpStatelessResetToken, 16)
		b = append(b, p.StatelessResetToken[:]...)
	}
	num(tpMaxUDPPayloadSize, p.MaxUDPPayloadSize, DefaultMaxUDPPayloadSize)
	num(tpInitialMaxData, p.InitialMaxData, 0)
	num(tpInitialMaxStreamDataBidiLo, p.InitialMaxStreamDataBidiLocal, 0)
	num(tpInitialMaxStreamDataBidiRe, p.InitialMaxStreamDataBidiRemote, 0)
	num(tpInitialMaxStreamDataUni, p.InitialMaxStreamDataUni, 0)
	num(tpInitialMaxStreamsBidi, p.InitialMaxStreamsBidi, 0)
	num(tpInitialMaxStreamsUni, p.InitialMaxStreamsUni, 0)
	num(tpAckDelayExponent, p.AckDelayExponent, DefaultAckDelayExponent)
	num(tpMaxAckDelay, uint64(p.MaxAckDelay/time.Millisecond), uint64(DefaultMaxAckDelay/time.Millisecond))
	if p.DisableActiveMigration {
		b = appendVarints(b, tpDisableActiveMigration, 0)
	}
	if pa := p.PreferredAddress; pa != nil {
		b = appendVarints(b, tpPreferredAddress, uint64(4+2+16+2+1+len(pa.ConnID)+16))
		a4 := pa.IPv4.Addr().As4()
		b = append(b, a4[:]...)
		b = binary.BigEndian.AppendUint16(b, pa.IPv4.Port())
		a6 := pa.IPv6.Addr().As16()
		b = append(b, a6[:]...)
		b = binary.BigEndian.AppendUint16(b, pa.IPv6.Port())
		b = appendConnIDAndToken(b, pa.ConnID, pa.ResetToken)
	}
	num(tpActiveConnIDLimit, p.ActiveConnIDLimit, DefaultActiveConnIDLimit)
	cid(tpInitialSCID, p.InitialSCID)
	cid(tpRetrySCID, p.RetrySCID)
	if p.InitialMaxPathID != nil {
		v := uint64(*p.InitialMaxPathID)
		b = appendVarints(b, tpInitialMaxPathID, uint64(VarintLen(v)), v)
	}
	if vi := p.VersionInfo; vi != nil {
		b = appendVarints(b, tpVersionInformation, uint64(4+4*len(vi.Available)))
		b = binary.BigEndian.AppendUint32(b, vi.Chosen)
		for _, v := range vi.Available {
			b = binary.BigEndian.AppendUint32(b, v)
		}
	}
	return b
}

// ParseTransportParameters decodes the peer's parameters (RFC 9000 §18,
// §7.4). fromServer says who sent them: a client may not send the
// server-only ones. Every violation is a TRANSPORT_PARAMETER_ERROR;
// unknown and reserved parameters are ignored.
func ParseTransportParameters(b []byte, fromServer bool) (TransportParameters, error) {
	p := DefaultTransportParameters()
	seen := map[uint64]bool{}
	r := &reader{b: b}
	for len(r.b) > 0 {
		id := r.varint()
		val := r.bytes(r.varint())
		if r.err != nil {
			return p, tpErr("parameter list truncated")
		}
		if seen[id] {
			return p, tpErr("parameter 0x%x sent twice", id)
		}
		seen[id] = true
		switch id {
		case tpOriginalDCID, tpStatelessResetToken, tpPreferredAddress, tpRetrySCID:
			if !fromServer {
				return p, tpErr("client sent server-only parameter 0x%x", id)
			}
		}
		if id == tpVersionInformation {
			vi, err := parseVersionInfo(val, fromServer)
			if err != nil {
				return p, err
			}
			p.VersionInfo = vi
			continue
		}
		if err := p.set(id, val); err != nil {
			return p, err
		}
	}
	return p, nil
}

// parseVersionInfo decodes version_information. RFC 9368 §3: a length
// that is not a positive multiple of 4 or a zero version is a parsing
// failure, and so is a client's Chosen Version missing from its own
// Available Versions (the client MUST list it).
func parseVersionInfo(val []byte, fromServer bool) (*VersionInfo, error) {
	if len(val) < 4 || len(val)%4 != 0 {
		return nil, tpErr("version_information of %d bytes", len(val))
	}
	vi := &VersionInfo{Chosen: binary.BigEndian.Uint32(val)}
	if vi.Chosen == 0 {
		return nil, tpErr("version_information's chosen version is 0")
	}
	listed := false
	for i := 4; i < len(val); i += 4 {
		v := binary.BigEndian.Uint32(val[i:])
		if v == 0 {
			return nil, tpErr("version_information lists version 0")
		}
		listed = listed || v == vi.Chosen
		vi.Available = append(vi.Available, v)
	}
	if !fromServer && !listed {
		return nil, tpErr("client's version_information does not list its chosen version 0x%08x", vi.Chosen)
	}
	return vi, nil
}

func (p *TransportParameters) set(id uint64, val []byte) error {
	var num uint64
	switch id {
	case tpOriginalDCID, tpStatelessResetToken, tpDisableActiveMigration, tpPreferredAddress,
		tpInitialSCID, tpRetrySCID:
	default:
		v, n, err := ParseVarint(val)
		if err != nil || n != len(val) {
			if id <= tpRetrySCID || id == tpInitialMaxPathID {
				return tpErr("parameter 0x%x is not one integer", id)
			}
			return nil // unknown parameter: ignored whatever it holds
		}
		num = v
	}
	switch id {
	case tpOriginalDCID, tpInitialSCID, tpRetrySCID:
		if len(val) > MaxConnIDLen {
			return tpErr("connection ID parameter 0x%x of %d bytes", id, len(val))
		}
		cid := append([]byte{}, val...)
		switch id {
		case tpOriginalDCID:
			p.OriginalDCID = cid
		case tpInitialSCID:
			p.InitialSCID = cid
		default:
			p.RetrySCID = cid
		}
	case tpMaxIdleTimeout:
		if num > uint64(1<<63-1)/uint64(time.Millisecond) {
			return tpErr("max_idle_timeout %d ms overflows", num)
		}
		p.MaxIdleTimeout = time.Duration(num) * time.Millisecond
	case tpStatelessResetToken:
		if len(val) != 16 {
			return tpErr("stateless_reset_token of %d bytes", len(val))
		}
		var t [16]byte
		copy(t[:], val)
		p.StatelessResetToken = &t
	case tpMaxUDPPayloadSize:
		if num < minMaxUDPPayloadSize {
			return tpErr("max_udp_payload_size %d below 1200", num)
		}
		p.MaxUDPPayloadSize = num
	case tpInitialMaxData:
		p.InitialMaxData = num
	case tpInitialMaxStreamDataBidiLo:
		p.InitialMaxStreamDataBidiLocal = num
	case tpInitialMaxStreamDataBidiRe:
		p.InitialMaxStreamDataBidiRemote = num
	case tpInitialMaxStreamDataUni:
		p.InitialMaxStreamDataUni = num
	case tpInitialMaxStreamsBidi, tpInitialMaxStreamsUni:
		if num > maxStreams {
			return tpErr("initial stream limit %d above 2^60", num)
		}
		if id == tpInitialMaxStreamsBidi {
			p.InitialMaxStreamsBidi = num
		} else {
			p.InitialMaxStreamsUni = num
		}
	case tpAckDelayExponent:
		if num > maxAckDelayExponentLimit {
			return tpErr("ack_delay_exponent %d above 20", num)
		}
		p.AckDelayExponent = num
	case tpMaxAckDelay:
		if num >= maxAckDelayLimit {
			return tpErr("max_ack_delay %d ms not below 2^14", num)
		}
		p.MaxAckDelay = time.Duration(num) * time.Millisecond
	case tpDisableActiveMigration:
		if len(val) != 0 {
			return tpErr("disable_active_migration with a %d-byte value", len(val))
		}
		p.DisableActiveMigration = true
	case tpPreferredAddress:
		r := &reader{b: val}
		pa := &PreferredAddress{}
		a4, port4 := r.bytes(4), r.bytes(2)
		a6, port6 := r.bytes(16), r.bytes(2)
		n := r.byte()
		pa.ConnID = append([]byte{}, r.bytes(uint64(n))...)
		copy(pa.ResetToken[:], r.bytes(16))
		if r.err != nil || len(r.b) != 0 {
			return tpErr("preferred_address of %d bytes is malformed", len(val))
		}
		if n < 1 || n > MaxConnIDLen {
			// RFC 9000 §18.2: a zero-length connection ID here is an error.
			return tpErr("preferred_address connection ID length %d", n)
		}
		pa.IPv4 = netip.AddrPortFrom(netip.AddrFrom4([4]byte(a4)), binary.BigEndian.Uint16(port4))
		pa.IPv6 = netip.AddrPortFrom(netip.AddrFrom16([16]byte(a6)), binary.BigEndian.Uint16(port6))
		p.PreferredAddress = pa
	case tpActiveConnIDLimit:
		if num < 2 {
			return tpErr("active_connection_id_limit %d below 2", num)
		}
		p.ActiveConnIDLimit = num
	case tpInitialMaxPathID:
		if num > MaxPathID {
			return tpErr("initial_max_path_id %d above 2^32-1", num)
		}
		v := uint32(num)
		p.InitialMaxPathID = &v
	}
	return nil
}
