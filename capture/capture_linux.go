package capture

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket/afpacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/sys/unix"
)

// Capture is a running capture.
type Capture struct {
	acc    *accounter
	stop   atomic.Bool
	wg     sync.WaitGroup
	ifaces []*ifaceCapture
}

type ifaceCapture struct {
	name    string
	tp      *afpacket.TPacket
	packets atomic.Uint64
	matched atomic.Uint64
	pcap    *pcapgo.Writer
	buf     *bufio.Writer
	file    *os.File
	err     error
	down    bool
	cpu     time.Duration
}

// Start opens an AF_PACKET socket (SOCK_DGRAM: IP packets whatever the
// link) on each interface and reads them until Stop. Opened in the
// network namespace of the calling thread.
func Start(ctx context.Context, o Options) (_ *Capture, err error) {
	c := &Capture{acc: newAccounter(o.Flows)}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	snap := o.Snaplen
	if snap <= 0 {
		snap = 256
	}
	for _, name := range o.Ifaces {
		tp, err := afpacket.NewTPacket(afpacket.OptInterface(name), afpacket.SocketDgram,
			afpacket.OptNumBlocks(32), afpacket.OptBlockTimeout(10*time.Millisecond), afpacket.OptPollTimeout(100*time.Millisecond))
		if err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
				return nil, fmt.Errorf("%w (interface %s: %v)", ErrPermission, name, err)
			}
			return nil, fmt.Errorf("capture on %s: %w", name, err)
		}
		ic := &ifaceCapture{name: name, tp: tp}
		c.ifaces = append(c.ifaces, ic)
		if o.PcapDir != "" {
			f, err := os.Create(filepath.Join(o.PcapDir, name+".pcap"))
			if err != nil {
				return nil, fmt.Errorf("capture: %w", err)
			}
			ic.file, ic.buf = f, bufio.NewWriterSize(f, 64<<10)
			ic.pcap = pcapgo.NewWriterNanos(ic.buf)
			if err := ic.pcap.WriteFileHeader(uint32(snap), layers.LinkTypeRaw); err != nil {
				return nil, fmt.Errorf("capture: %s: %w", f.Name(), err)
			}
		}
	}
	for _, ic := range c.ifaces {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.read(ic, snap)
		}()
	}
	return c, nil
}

func (c *Capture) read(ic *ifaceCapture, snap int) {
	// One OS thread per interface, so its CPU time is the capture's own
	// cost (IfaceStats.CPU).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var t0 unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t0)
	defer func() {
		var t1 unix.Timespec
		if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t1) == nil {
			ic.cpu = time.Duration(t1.Nano() - t0.Nano())
		}
	}()
	for !c.stop.Load() {
		data, ci, err := ic.tp.ZeroCopyReadPacketData()
		if err != nil {
			if errors.Is(err, afpacket.ErrTimeout) {
				continue
			}
			if errors.Is(err, afpacket.ErrPoll) {
				// The interface went down (the socket reports ENETDOWN):
				// nothing more crosses it.
				ic.down = true
				return
			}
			ic.err = err
			return
		}
		ic.packets.Add(1)
		c.acc.mu.Lock()
		ok := c.acc.account(ic.name, data, ci.Length, ci.Timestamp)
		c.acc.mu.Unlock()
		if !ok {
			continue
		}
		ic.matched.Add(1)
		if ic.pcap != nil && ic.err == nil {
			n := min(len(data), snap)
			ci.CaptureLength = n
			if err := ic.pcap.WritePacket(ci, data[:n]); err != nil {
				ic.err = err
			}
		}
	}
}

// Stop ends the capture and returns what it saw. Safe on a partly
// started capture.
func (c *Capture) Stop() Result {
	c.stop.Store(true)
	c.wg.Wait()
	r := Result{Flows: c.acc.result(), Ifaces: []IfaceStats{}}
	for _, ic := range c.ifaces {
		st := IfaceStats{Iface: ic.name, Packets: ic.packets.Load(), Matched: ic.matched.Load(), WentDown: ic.down, CPU: ic.cpu}
		if ss, v3, err := ic.tp.SocketStats(); err == nil {
			st.Drops = uint64(ss.Drops() + v3.Drops())
		}
		if ic.file != nil {
			st.Pcap = ic.file.Name()
			if err := ic.buf.Flush(); err != nil && ic.err == nil {
				ic.err = err
			}
			if err := ic.file.Close(); err != nil && ic.err == nil {
				ic.err = err
			}
		}
		if ic.err != nil {
			st.Error = ic.err.Error()
		}
		ic.tp.Close()
		r.Ifaces = append(r.Ifaces, st)
	}
	return r
}
