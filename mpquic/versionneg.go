package mpquic

import (
	"crypto/tls"
	"fmt"
	"slices"
)

// Compatible version negotiation (RFC 9368) between QUIC versions 1 and 2
// (RFC 9369 §4: their first flights are compatible both ways).
//
// Both ends send version_information (transport parameter 0x11): the
// version chosen and the versions offered. A client starts in
// Config.Version and lists Config.Versions by preference; a server reads
// the list out of the ClientHello before its first byte of ServerHello,
// takes the first listed version it speaks and, when that is not the
// first flight's, answers in it from its first Initial on (the Initial
// keys of the new version, from the same destination ID), still opening
// the client's Initials of the original version. The client follows the
// first server Initial of an offered version that decrypts. Downgrade
// prevention (RFC 9368 §4): both lists are inside the TLS handshake, so
// the server checks that the client's chosen version is its first
// flight's and the client that the server's chosen version is the one in
// use; a mismatch, or a server that moved the client without saying so,
// is a VERSION_NEGOTIATION_ERROR. 0-RTT stays in the original version
// (its keys and headers), as the client sent it before knowing.

// versionState is a connection's version history.
type versionState struct {
	orig     uint32 // the client's first flight's version
	followed bool   // a client moved to another version
	// origOpen opens the client's Initials of the original version after
	// a server moved the connection (the client sends them until it
	// sees the server's).
	origOpen *Keys
}

// compatibleVersions: a first flight of version from can be taken as one
// of to (RFC 9369 §4).
func compatibleVersions(from, to uint32) bool {
	return supportedVersion(from) && supportedVersion(to)
}

// clientVersions are the versions a client offers, by preference: its
// Config.Versions, and its first flight's version when they leave it out.
func clientVersions(conf Config) []uint32 {
	vs := slices.Clone(conf.Versions)
	if !slices.Contains(vs, conf.Version) {
		vs = append(vs, conf.Version)
	}
	return vs
}

// serverVersions are the versions a Listener speaks: Config.Versions, by
// default 1 and 2.
func serverVersions(conf Config) []uint32 {
	if len(conf.Versions) == 0 {
		return []uint32{Version1, Version2}
	}
	return conf.Versions
}

// localVersionInfo is our version_information.
func (c *Conn) localVersionInfo() *VersionInfo {
	vi := &VersionInfo{Chosen: c.version, Available: serverVersions(c.conf)}
	if c.isClient {
		vi.Available = clientVersions(c.conf)
	}
	if c.conf.testVersionInfo != nil {
		return c.conf.testVersionInfo(vi)
	}
	return vi
}

// serverNegotiate runs when the client's transport parameters arrive,
// before anything of the server's handshake is sealed: it checks the
// client's version_information and moves the connection to the first
// version the client lists that we speak.
func (c *Conn) serverNegotiate(vi *VersionInfo) error {
	if vi == nil {
		return nil // a client without RFC 9368 keeps its version
	}
	if vi.Chosen != c.vs.orig {
		return transportErr(VersionNegotiationError, 0, "client's chosen version 0x%08x is not its first flight's 0x%08x", vi.Chosen, c.vs.orig)
	}
	ours := serverVersions(c.conf)
	for _, v := range vi.Available {
		if !slices.Contains(ours, v) || !compatibleVersions(c.vs.orig, v) {
			continue
		}
		if v != c.version {
			in := c.spaces[spaceInitial]
			c.vs.origOpen = in.open
			client, server := InitialKeysVersion(c.initialDCID(), v)
			in.seal, in.open = server, client
			c.version = v
		}
		return nil
	}
	return nil
}

// followVersion: a client's packet of a version other than the
// connection's. A server Initial of an offered, compatible version that
// decrypts moves the connection to it (before the handshake keys; once).
// A server's Handshake packet of an offered version may come first: it
// waits for its keys (and is dropped if they are another version's).
func (c *Conn) followVersion(h Header, pkt []byte) bool {
	if c.vs.followed || c.spaces[spaceHandshake].open != nil || !slices.Contains(clientVersions(c.conf), h.Version) || !compatibleVersions(c.version, h.Version) {
		return false
	}
	if h.Type == PacketHandshake {
		return true
	}
	if h.Type != PacketInitial {
		return false
	}
	client, server := InitialKeysVersion(c.initialDCID(), h.Version)
	if !opens(server, pkt, h) {
		return false
	}
	in := c.spaces[spaceInitial]
	in.seal, in.open = client, server
	c.version, c.vs.followed = h.Version, true
	return true
}

// clientCheckVersion checks the server's version_information (RFC 9368
// §4): its chosen version must be the one in use, and a server that
// moved us must have said so.
func (c *Conn) clientCheckVersion(vi *VersionInfo) error {
	if vi == nil {
		if c.version != c.vs.orig {
			return transportErr(VersionNegotiationError, 0, "server moved the connection to version 0x%08x without version_information", c.version)
		}
		return nil
	}
	if vi.Chosen != c.version {
		return transportErr(VersionNegotiationError, 0, "server's chosen version 0x%08x is not the one in use, 0x%08x", vi.Chosen, c.version)
	}
	return nil
}

// ticketVersionOK: 0-RTT under a ticket only in the version of the
// connection that issued it, the negotiated one (RFC 9369 §5: tickets
// are specific to their version; after compatible negotiation, to the
// negotiated version). Both ends check. The resumption itself still
// crosses versions (crypto/tls's QUIC events cannot refuse a ticket).
func (c *Conn) ticketVersionOK(p TransportParameters) bool {
	return p.VersionInfo == nil || p.VersionInfo.Chosen == c.vs.orig
}

// ticketVersion is the version a client resuming a session starts in:
// the one of the connection that gave the ticket (RFC 9369 §5: a ticket
// must not start a connection of another version), when it is one we
// offer. crypto/tls picks the session by the configuration's ServerName.
func ticketVersion(tc *tls.Config, conf Config) (uint32, bool) {
	if tc.ClientSessionCache == nil || tc.ServerName == "" {
		return 0, false
	}
	cs, ok := tc.ClientSessionCache.Get(tc.ServerName)
	if !ok || cs == nil {
		return 0, false
	}
	_, ss, err := cs.ResumptionState()
	if err != nil || ss == nil {
		return 0, false
	}
	p, ok := paramsFromExtra(ss.Extra, extraPeerParams, true)
	if !ok || p.VersionInfo == nil || !slices.Contains(clientVersions(conf), p.VersionInfo.Chosen) {
		return 0, false
	}
	return p.VersionInfo.Chosen, true
}

// opens: a long-header packet decrypts under k (a copy is tried).
func opens(k *Keys, pkt []byte, h Header) bool {
	if h.PNOffset < 1 || len(pkt) < h.PNOffset+4+sampleLen {
		return false
	}
	buf := append([]byte(nil), pkt...)
	o, err := k.UnprotectHeader(buf, h.PNOffset, -1)
	if err != nil {
		return false
	}
	_, err = k.Open(buf, o, 0)
	return err == nil
}

// Version is the connection's QUIC version: the one it started in, or
// the one compatible version negotiation moved it to.
func (c *Conn) Version() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// PeerVersionInfo is the peer's version_information (RFC 9368), nil if
// it sent none (a peer without compatible version negotiation) or its
// transport parameters have not come yet.
func (c *Conn) PeerVersionInfo() *VersionInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.haveParams || c.peerParams.VersionInfo == nil {
		return nil
	}
	vi := *c.peerParams.VersionInfo
	vi.Available = slices.Clone(vi.Available)
	return &vi
}

// validVersions checks Config.Versions.
func validVersions(vs []uint32) error {
	for i, v := range vs {
		if !supportedVersion(v) {
			return fmt.Errorf("mpquic: QUIC version 0x%08x in Versions is not supported (Version1 or Version2)", v)
		}
		if slices.Contains(vs[:i], v) {
			return fmt.Errorf("mpquic: QUIC version 0x%08x is in Versions twice", v)
		}
	}
	return nil
}
