package world

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// MaxUDPSize is the largest UDP reply the lab resolvers send, whatever
// EDNS0 buffer size the client offers, so Large answers always need the
// TCP fallback.
const MaxUDPSize = 512

// TTL of every record served.
const TTL = 300

// nameRef locates a name of a view: the domain and the position in its
// chain (0: the domain itself, k: CNAMEs[k-1]).
type nameRef struct {
	dom int32
	hop int32
}

// index maps the canonical names of path index pi to their place. Two
// domains may not claim the same name in one view (that would make the
// truth ambiguous).
func (w *World) index(pi int) (map[string]nameRef, error) {
	m := make(map[string]nameRef, len(w.Domains))
	for i := range w.Domains {
		d := &w.Domains[i]
		n := strings.ToLower(d.Name) + "."
		if _, dup := m[n]; dup {
			return nil, fmt.Errorf("world: name %q used twice in view %s", d.Name, w.Paths[pi])
		}
		m[n] = nameRef{int32(i), 0}
	}
	for i := range w.Domains {
		for k, c := range w.Domains[i].Views[pi].CNAMEs {
			n := strings.ToLower(c) + "."
			if _, dup := m[n]; dup {
				return nil, fmt.Errorf("world: CNAME %q of %q is already a name in view %s", c, w.Domains[i].Name, w.Paths[pi])
			}
			m[n] = nameRef{int32(i), int32(k + 1)}
		}
	}
	return m, nil
}

type handler struct {
	w     *World
	pi    int
	names map[string]nameRef
}

// DNSHandler returns a handler answering like path's resolver:
//
//   - a world name (domain or CNAME hop) with status NOERROR: the CNAME
//     chain from the queried name, then the A or AAAA records of the last
//     name (qtype CNAME: only the first CNAME record). Other qtypes and
//     missing families get NOERROR with no records (zdns: NO_ANSWER).
//   - NXDOMAIN, SERVFAIL: that rcode. NO_ANSWER: NOERROR, no records.
//   - TIMEOUT: no reply at all, over UDP and TCP.
//   - UDP replies never exceed MaxUDPSize (nor the client's EDNS0 size):
//     bigger answers are truncated with the TC bit, and Large views always
//     set TC over UDP; over TCP the full answer is sent.
//   - names under Zone that are not in the world: NXDOMAIN; names outside
//     Zone: REFUSED; anything but one IN question of opcode QUERY: FORMERR
//     or NOTIMP.
func (w *World) DNSHandler(path string) (dns.Handler, error) {
	pi := w.PathIndex(path)
	if pi < 0 {
		return nil, fmt.Errorf("world: unknown path %q (have %q)", path, w.Paths)
	}
	names, err := w.index(pi)
	if err != nil {
		return nil, err
	}
	return &handler{w: w, pi: pi, names: names}, nil
}

func (h *handler) ServeDNS(rw dns.ResponseWriter, req *dns.Msg) {
	m := h.answer(req)
	if m == nil {
		return // TIMEOUT: never answer
	}
	_, udp := rw.RemoteAddr().(*net.UDPAddr)
	if udp {
		size := MaxUDPSize
		if opt := req.IsEdns0(); opt != nil && int(opt.UDPSize()) < size {
			size = max(int(opt.UDPSize()), 512)
		}
		m.Truncate(size)
		if m.Truncated {
			m.Answer = nil // send an unambiguous TC reply: retry over TCP
		}
	} else {
		m.Truncated = false
		m.Compress = true
	}
	_ = rw.WriteMsg(m) // the client may be gone; nothing to do about it
}

func (h *handler) answer(req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	if req.Opcode != dns.OpcodeQuery {
		m.SetRcode(req, dns.RcodeNotImplemented)
		return m
	}
	if len(req.Question) != 1 || req.Question[0].Qclass != dns.ClassINET {
		m.SetRcode(req, dns.RcodeFormatError)
		return m
	}
	m.SetReply(req)
	m.RecursionAvailable = true
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(MaxUDPSize, false)
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	if !dns.IsSubDomain(Zone, name) {
		m.Rcode = dns.RcodeRefused
		return m
	}
	ref, ok := h.names[name]
	if !ok {
		if name != Zone {
			m.Rcode = dns.RcodeNameError
		}
		return m
	}
	d := &h.w.Domains[ref.dom]
	v := &d.Views[h.pi]
	switch v.Status {
	case StatusTimeout:
		return nil
	case StatusNXDomain:
		m.Rcode = dns.RcodeNameError
		return m
	case StatusServFail:
		m.Rcode = dns.RcodeServerFailure
		return m
	case StatusNoAnswer:
		return m
	}
	chain := make([]string, 0, len(v.CNAMEs)+1)
	chain = append(chain, q.Name)
	for _, c := range v.CNAMEs[ref.hop:] {
		chain = append(chain, c+".")
	}
	for k := 0; k+1 < len(chain); k++ {
		m.Answer = append(m.Answer, &dns.CNAME{
			Hdr:    dns.RR_Header{Name: chain[k], Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: TTL},
			Target: chain[k+1],
		})
		if q.Qtype == dns.TypeCNAME {
			return m
		}
	}
	last := chain[len(chain)-1]
	switch q.Qtype {
	case dns.TypeA:
		for _, a := range v.A {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: last, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: TTL},
				A:   a.AsSlice(),
			})
		}
	case dns.TypeAAAA:
		for _, a := range v.AAAA {
			m.Answer = append(m.Answer, &dns.AAAA{
				Hdr:  dns.RR_Header{Name: last, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: TTL},
				AAAA: a.AsSlice(),
			})
		}
	}
	if v.Large && len(m.Answer) > len(chain)-1 {
		m.Truncated = true // over UDP: ServeDNS drops the records; over TCP it clears the bit
	}
	return m
}

// Serve answers DNS queries for path's view on the given sockets (either
// may be nil) until ctx is done, then shuts the servers down (closing the
// sockets). It returns nil after ctx is done, or the first server error.
func Serve(ctx context.Context, w *World, path string, udp net.PacketConn, tcp net.Listener) error {
	h, err := w.DNSHandler(path)
	if err != nil {
		return err
	}
	if err := ServeHandler(ctx, h, udp, tcp); err != nil {
		return fmt.Errorf("path %s: %w", path, err)
	}
	return nil
}

// Static answers the A and AAAA queries of its names itself (names in
// canonical form: lower case, trailing dot) and passes everything else to
// Next: names beside the world's, such as the lab's test server.
type Static struct {
	Names map[string][]netip.Addr
	Next  dns.Handler
}

func (s Static) ServeDNS(rw dns.ResponseWriter, req *dns.Msg) {
	if len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery {
		s.Next.ServeDNS(rw, req)
		return
	}
	q := req.Question[0]
	addrs, ok := s.Names[strings.ToLower(q.Name)]
	if !ok {
		s.Next.ServeDNS(rw, req)
		return
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative, m.RecursionAvailable = true, true
	for _, a := range addrs {
		hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: TTL}
		switch {
		case a.Is4() && q.Qtype == dns.TypeA:
			hdr.Rrtype = dns.TypeA
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
		case a.Is6() && q.Qtype == dns.TypeAAAA:
			hdr.Rrtype = dns.TypeAAAA
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		}
	}
	_ = rw.WriteMsg(m)
}

// Portal answers every A and AAAA query with Addrs while On reports true
// (a captive portal's DNS before login) and passes the rest, and
// everything while it is off, to Next.
type Portal struct {
	On    func() bool
	Addrs []netip.Addr
	Next  dns.Handler
}

func (p Portal) ServeDNS(rw dns.ResponseWriter, req *dns.Msg) {
	if !p.On() || len(req.Question) != 1 || req.Opcode != dns.OpcodeQuery ||
		(req.Question[0].Qtype != dns.TypeA && req.Question[0].Qtype != dns.TypeAAAA) {
		p.Next.ServeDNS(rw, req)
		return
	}
	Static{Names: map[string][]netip.Addr{strings.ToLower(req.Question[0].Name): p.Addrs}, Next: p.Next}.ServeDNS(rw, req)
}

// ServeHandler serves h on udp and tcp (either may be nil) until ctx is
// done.
func ServeHandler(ctx context.Context, h dns.Handler, udp net.PacketConn, tcp net.Listener) error {
	var servers []*dns.Server
	if udp != nil {
		servers = append(servers, &dns.Server{PacketConn: udp, Handler: h})
	}
	if tcp != nil {
		servers = append(servers, &dns.Server{Listener: tcp, Handler: h})
	}
	if len(servers) == 0 {
		return errors.New("world: serve: no socket")
	}
	errc := make(chan error, len(servers))
	var started sync.WaitGroup
	for _, s := range servers {
		started.Add(1)
		var once sync.Once
		s.NotifyStartedFunc = func() { once.Do(started.Done) }
		go func() {
			err := s.ActivateAndServe()
			once.Do(started.Done) // failed before starting
			errc <- err
		}()
	}
	started.Wait()
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	for _, s := range servers {
		_ = s.Shutdown() // "server not started" for the one that failed
	}
	if first != nil {
		return fmt.Errorf("world: serve: %w", first)
	}
	return nil
}
