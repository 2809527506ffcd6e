package survey

import (
	"bytes"
	"os"
	"strconv"
)

// procHost reads the host's input backlog drops (the second column of
// /proc/net/softnet_stat, one line per CPU: packets the kernel dropped
// because its backlog queue was full) and CPU time (/proc/stat).
type procHost struct{ buf []byte }

func newHostCounters() hostCounters {
	if _, err := os.Stat("/proc/net/softnet_stat"); err != nil {
		return nil
	}
	return &procHost{buf: make([]byte, 0, 8192)}
}

func (p *procHost) sample() (hostSample, bool) {
	var s hostSample
	b, ok := p.read("/proc/net/softnet_stat")
	if !ok {
		return s, false
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseUint(string(f[1]), 16, 64)
		if err != nil {
			return s, false
		}
		s.drops += n
	}
	s.ok = true
	if b, ok := p.read("/proc/stat"); ok {
		line, _, _ := bytes.Cut(b, []byte("\n"))
		f := bytes.Fields(line)
		if len(f) >= 5 && string(f[0]) == "cpu" {
			for i, v := range f[1:] {
				n, err := strconv.ParseUint(string(v), 10, 64)
				if err != nil {
					break
				}
				s.all += n
				if i != 3 && i != 4 { // idle, iowait
					s.busy += n
				}
			}
			s.hasCPU = true
		}
	}
	return s, true
}

func (p *procHost) read(name string) ([]byte, bool) {
	f, err := os.Open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	p.buf = p.buf[:0]
	for {
		if len(p.buf) == cap(p.buf) {
			p.buf = append(p.buf, 0)[:len(p.buf)]
		}
		n, err := f.Read(p.buf[len(p.buf):cap(p.buf)])
		p.buf = p.buf[:len(p.buf)+n]
		if err != nil || n == 0 {
			return p.buf, true
		}
	}
}
