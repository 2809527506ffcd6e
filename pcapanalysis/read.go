package pcapanalysis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
)

// ErrInput is wrapped by every error that is the capture's fault (not a
// pcap or pcapng file, unsupported link type, malformed or truncated
// packet), so the command can map it to a usage error.
var ErrInput = errors.New("bad capture")

// PacketError names the packet (1-based, in file order) that could not be
// read or decoded.
type PacketError struct {
	File   string
	Packet int64
	Err    error
}

func (e *PacketError) Error() string {
	return fmt.Sprintf("%s: packet %d: %v", e.File, e.Packet, e.Err)
}

// Unwrap gives both the cause and ErrInput.
func (e *PacketError) Unwrap() []error { return []error{e.Err, ErrInput} }

type packetSource interface {
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// AnalyzeFile reads one pcap or pcapng file and returns its report.
func AnalyzeFile(ctx context.Context, path string, opts Options) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	defer f.Close()
	r, err := Analyze(ctx, f, opts)
	if r != nil {
		r.File = path
	}
	var pe *PacketError
	if errors.As(err, &pe) {
		pe.File = path
	} else if err != nil && errors.Is(err, ErrInput) {
		err = fmt.Errorf("%s: %w", path, err)
	}
	return r, err
}

// Analyze reads a pcap or pcapng stream (recognised by its magic number).
func Analyze(ctx context.Context, rd io.Reader, opts Options) (*Report, error) {
	br := bufio.NewReaderSize(rd, 1<<20)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("%w: too short for a pcap or pcapng header", ErrInput)
	}
	var src packetSource
	var linkOf func(gopacket.CaptureInfo) int
	ifName := func(int) string { return "" }
	if magic[0] == 0x0a && magic[1] == 0x0d && magic[2] == 0x0d && magic[3] == 0x0a {
		ng, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, fmt.Errorf("%w: pcapng: %v", ErrInput, err)
		}
		src = ng
		linkOf = func(ci gopacket.CaptureInfo) int {
			in, err := ng.Interface(ci.InterfaceIndex)
			if err != nil {
				return -1
			}
			return int(in.LinkType)
		}
		ifName = func(i int) string {
			in, err := ng.Interface(i)
			if err != nil {
				return ""
			}
			return in.Name
		}
	} else {
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: not a pcap or pcapng file: %v", ErrInput, err)
		}
		// Captures are read whatever snapshot length they declare.
		pr.SetSnaplen(1 << 18)
		lt := int(pr.LinkType())
		if !SupportedLink(lt) {
			return nil, fmt.Errorf("%w: link type %d not supported (want Ethernet, Linux SLL/SLL2, raw IP or loopback)", ErrInput, lt)
		}
		src = pr
		linkOf = func(gopacket.CaptureInfo) int { return lt }
	}
	a := newAnalyzer(opts)
	var n int64
	for {
		data, ci, err := src.ZeroCopyReadPacketData()
		if err == io.EOF {
			break
		}
		n++
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				// What tcpdump leaves when it is killed, the disk fills or the
				// file is copied while written: tshark analyses everything
				// before the cut and warns, and so do we.
				if !opts.Strict {
					a.warn(fmt.Sprintf("packet %d: capture truncated inside this packet; the %d packets before it were analysed", n, n-1))
					break
				}
				err = errors.New("capture truncated inside this packet")
			}
			return nil, &PacketError{Packet: n, Err: err}
		}
		if n&0xfff == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		lt := linkOf(ci)
		if !SupportedLink(lt) {
			return nil, &PacketError{Packet: n, Err: fmt.Errorf("link type %d not supported", lt)}
		}
		if err := a.packet(lt, data, ci, ifName); err != nil {
			return nil, &PacketError{Packet: n, Err: err}
		}
	}
	return a.finish(), nil
}
