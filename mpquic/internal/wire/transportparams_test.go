package wire

import (
	"net/netip"
	"reflect"
	"testing"
	"time"
)

func fullParams() TransportParameters {
	p := DefaultTransportParameters()
	p.OriginalDCID = []byte{1, 2, 3, 4, 5, 6, 7, 8}
	p.MaxIdleTimeout = 30 * time.Second
	p.StatelessResetToken = &[16]byte{1, 2, 3}
	p.MaxUDPPayloadSize = 1452
	p.InitialMaxData = 1 << 24
	p.InitialMaxStreamDataBidiLocal = 1 << 20
	p.InitialMaxStreamDataBidiRemote = 1 << 21
	p.InitialMaxStreamDataUni = 1 << 19
	p.InitialMaxStreamsBidi = 100
	p.InitialMaxStreamsUni = 3
	p.AckDelayExponent = 8
	p.MaxAckDelay = 40 * time.Millisecond
	p.DisableActiveMigration = true
	p.PreferredAddress = &PreferredAddress{
		IPv4:   netip.MustParseAddrPort("198.18.0.1:4433"),
		IPv6:   netip.MustParseAddrPort("[fd00::1]:4434"),
		ConnID: []byte{9, 9, 9, 9}, ResetToken: [16]byte{0xff},
	}
	p.ActiveConnIDLimit = 8
	p.InitialSCID = []byte{}
	p.RetrySCID = []byte{5}
	mp := uint32(7)
	p.InitialMaxPathID = &mp
	p.VersionInfo = &VersionInfo{Chosen: Version2, Available: []uint32{Version1, 0x1a2a3a4a, Version2}}
	return p
}

func TestTransportParametersRoundTrip(t *testing.T) {
	for name, p := range map[string]TransportParameters{
		"defaults": DefaultTransportParameters(),
		"full":     fullParams(),
	} {
		got, err := ParseTransportParameters(p.Append(nil), true)
		if err != nil || !reflect.DeepEqual(got, p) {
			t.Errorf("%s: %v\n got %+v\nwant %+v", name, err, got, p)
		}
	}
	// initial_max_path_id is 0x3e with a varint value (draft §"initial_max_path_id").
	zero := uint32(0)
	p := DefaultTransportParameters()
	p.InitialMaxPathID = &zero
	if b := p.Append(nil); string(b) != "\x3e\x01\x00" {
		t.Errorf("initial_max_path_id 0 encodes as %x", b)
	}
	// Unknown and reserved (31*N+27) parameters are skipped.
	b := append(appendVarints(nil, 31*5+27, 3), 1, 2, 3)
	b = append(b, appendVarints(nil, 0x4000, 1)...)
	b = append(b, 0xff)
	def := DefaultTransportParameters()
	b = def.Append(b)
	if got, err := ParseTransportParameters(b, false); err != nil || !reflect.DeepEqual(got, DefaultTransportParameters()) {
		t.Errorf("unknown parameters: %v %+v", err, got)
	}
}

// version_information (RFC 9368 §3): the chosen version, then the
// available ones, 32 bits each; a server's list may leave out its chosen
// version and may be empty.
func TestVersionInformation(t *testing.T) {
	vi := func(raw ...byte) []byte {
		return append(appendVarints(nil, tpVersionInformation, uint64(len(raw))), raw...)
	}
	client := vi(0, 0, 0, 1, 0x6b, 0x33, 0x43, 0xcf, 0, 0, 0, 1)
	p, err := ParseTransportParameters(client, false)
	if want := (&VersionInfo{Chosen: Version1, Available: []uint32{Version2, Version1}}); err != nil || !reflect.DeepEqual(p.VersionInfo, want) {
		t.Errorf("client's: %v %+v", err, p.VersionInfo)
	}
	server := vi(0x6b, 0x33, 0x43, 0xcf, 0, 0, 0, 1)
	if p, err := ParseTransportParameters(server, true); err != nil || p.VersionInfo == nil || p.VersionInfo.Chosen != Version2 {
		t.Errorf("server's without its chosen version listed: %v %+v", err, p.VersionInfo)
	}
	only := vi(0x6b, 0x33, 0x43, 0xcf)
	if p, err := ParseTransportParameters(only, true); err != nil || p.VersionInfo == nil || len(p.VersionInfo.Available) != 0 {
		t.Errorf("server's with an empty list: %v %+v", err, p.VersionInfo)
	}
	enc := DefaultTransportParameters()
	enc.VersionInfo = &VersionInfo{Chosen: Version1, Available: []uint32{Version2, Version1}}
	if b := enc.Append(nil); string(b) != string(client) {
		t.Errorf("encodes as %x, want %x", b, client)
	}
}

func TestTransportParametersErrors(t *testing.T) {
	num := func(id, v uint64) []byte { return appendVarints(nil, id, uint64(VarintLen(v)), v) }
	for _, c := range []struct {
		name       string
		b          []byte
		fromServer bool
	}{
		{"truncated", []byte{0x04, 0x04, 0x80}, true},
		{"duplicate", append(num(tpInitialMaxData, 1), num(tpInitialMaxData, 2)...), true},
		{"client sends original_dcid", appendVarints(nil, tpOriginalDCID, 1, 1), false},
		{"client sends stateless_reset_token", append(appendVarints(nil, tpStatelessResetToken, 16), make([]byte, 16)...), false},
		{"client sends retry_scid", appendVarints(nil, tpRetrySCID, 0), false},
		{"client sends preferred_address", appendVarints(nil, tpPreferredAddress, 0), false},
		{"reset token 15 bytes", append(appendVarints(nil, tpStatelessResetToken, 15), make([]byte, 15)...), true},
		{"max_udp_payload 1199", num(tpMaxUDPPayloadSize, 1199), true},
		{"ack_delay_exponent 21", num(tpAckDelayExponent, 21), true},
		{"max_ack_delay 2^14", num(tpMaxAckDelay, 1<<14), true},
		{"active_cid_limit 1", num(tpActiveConnIDLimit, 1), true},
		{"max_streams 2^60+1", num(tpInitialMaxStreamsBidi, 1<<60+1), true},
		{"disable_migration with value", appendVarints(nil, tpDisableActiveMigration, 1, 0), true},
		{"integer with trailing byte", appendVarints(nil, tpInitialMaxData, 2, 1, 0), true},
		{"scid 21 bytes", append(appendVarints(nil, tpInitialSCID, 21), make([]byte, 21)...), true},
		{"preferred_address short", append(appendVarints(nil, tpPreferredAddress, 10), make([]byte, 10)...), true},
		{"preferred_address empty cid", append(appendVarints(nil, tpPreferredAddress, 41), make([]byte, 41)...), true},
		{"initial_max_path_id 2^32", num(tpInitialMaxPathID, 1<<32), true},
		{"max_idle_timeout overflow", num(tpMaxIdleTimeout, MaxVarint), true},
		{"version_information empty", appendVarints(nil, tpVersionInformation, 0), true},
		{"version_information 6 bytes", appendVarints(nil, tpVersionInformation, 6, 0, 0, 0, 1, 0, 0), true},
		{"version_information chosen 0", appendVarints(nil, tpVersionInformation, 4, 0, 0, 0, 0), true},
		{"version_information lists 0", appendVarints(nil, tpVersionInformation, 8, 0, 0, 0, 1, 0, 0, 0, 0), true},
		{"client's chosen version not listed", append(appendVarints(nil, tpVersionInformation, 8), 0, 0, 0, 1, 0x6b, 0x33, 0x43, 0xcf), false},
	} {
		_, err := ParseTransportParameters(c.b, c.fromServer)
		wantCode(t, c.name, err, TransportParameterError, 0)
	}
}
