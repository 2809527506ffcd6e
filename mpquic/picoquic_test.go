package mpquic

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mptester/mptester/internal/linkstats"
)

// The picoquic harness: picoquicdemo (an independent C implementation of
// QUIC v1 and the multipath draft) as server or client, over loopback with
// the hq-interop ALPN (HTTP/0.9: "GET /path\r\n", then the file's bytes
// and FIN), and its qlog read back for what it sent and received on each
// path.

const hqALPN = "hq-interop"

// picoquicDemo finds picoquicdemo through $MPTESTER_PICOQUIC (the binary
// or its build directory): a by-hand check against a picoquic one built
// oneself. CI installs only what the package registries give, and picoquic
// is in none of them, so without the variable the test is skipped, under
// CI=true too; a variable that names nothing fails it.
func picoquicDemo(t *testing.T) (bin, certDir string) {
	t.Helper()
	picoquicOnce.Do(findPicoquic)
	if picoquicErr != nil {
		t.Fatalf("picoquic interop: %v", picoquicErr)
	}
	if picoquicBin == "" {
		t.Skip("picoquic interop: MPTESTER_PICOQUIC is unset (a by-hand check: point it at a picoquicdemo you built yourself)")
	}
	return picoquicBin, filepath.Join(filepath.Dir(picoquicBin), "certs")
}

var (
	picoquicOnce sync.Once
	picoquicBin  string
	picoquicErr  error
)

func findPicoquic() {
	env := os.Getenv("MPTESTER_PICOQUIC")
	if env == "" {
		return
	}
	if runtime.GOOS != "linux" {
		picoquicErr = errors.New("the suite runs on Linux only (second loopback addresses)")
		return
	}
	if fi, err := os.Stat(env); err == nil && fi.IsDir() {
		env = filepath.Join(env, "picoquicdemo")
	}
	if _, err := os.Stat(env); err != nil {
		picoquicErr = fmt.Errorf("MPTESTER_PICOQUIC: %w", err)
		return
	}
	picoquicBin = env
}

// pqProc is one picoquicdemo run.
type pqProc struct {
	cmd    *exec.Cmd
	qlog   string // qlog directory
	out    string // client: download directory
	mu     sync.Mutex
	stdout bytes.Buffer
	done   chan struct{}
	err    error
}

func (p *pqProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// benchMode: scripts/bench-interop measures goodput beside
// picoquic<->picoquic; picoquic then writes no qlog (it slows it down
// several times), and the checks that read it are skipped.
func benchMode() bool { return os.Getenv("MPTESTER_INTEROP_REFERENCE") != "" }

// startPicoquic runs picoquicdemo with args in a temporary directory.
func startPicoquic(t *testing.T, ctx context.Context, bin string, args ...string) *pqProc {
	t.Helper()
	dir := t.TempDir()
	p := &pqProc{qlog: filepath.Join(dir, "qlog"), out: filepath.Join(dir, "out"), done: make(chan struct{})}
	os.MkdirAll(p.qlog, 0o755)
	os.MkdirAll(p.out, 0o755)
	opts := []string{"-o", p.out}
	if !benchMode() {
		opts = append(opts, "-q", p.qlog)
	}
	p.cmd = exec.CommandContext(ctx, bin, append(opts, args...)...)
	p.cmd.Dir = dir
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.stdout.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	go func() {
		p.err = p.cmd.Wait()
		w.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("picoquicdemo %v:\n%s", p.cmd.Args[1:], tail(p.output(), 40))
			// Its qlog outlives the temporary directory where
			// MPTESTER_PICOQUIC_KEEP says: what a rare failure leaves.
			if keep := os.Getenv("MPTESTER_PICOQUIC_KEEP"); keep != "" {
				to := filepath.Join(keep, fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano()))
				if err := os.CopyFS(to, os.DirFS(dir)); err != nil {
					t.Logf("keeping picoquic's files: %v", err)
				} else {
					t.Logf("picoquic's qlog and files kept in %s", to)
				}
			}
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitBound waits until the server's UDP port is bound (its stdout is a
// pipe, so block-buffered: no line to wait for).
func (p *pqProc) waitBound(t *testing.T, ctx context.Context, port int) {
	t.Helper()
	want := fmt.Sprintf(":%04X ", port)
	for {
		for _, f := range []string{linkstats.ProcNet("udp"), linkstats.ProcNet("udp6")} {
			b, _ := os.ReadFile(f)
			for _, line := range strings.Split(string(b), "\n") {
				if fields := strings.Fields(line); len(fields) > 2 && strings.HasSuffix(fields[1]+" ", want) {
					return
				}
			}
		}
		select {
		case <-p.done:
			t.Fatalf("picoquicdemo server ended: %v\n%s", p.err, p.output())
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (p *pqProc) wait(t *testing.T, ctx context.Context) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		t.Fatalf("picoquicdemo did not end: %v", ctx.Err())
		return nil
	}
}

// freeUDPPort is a loopback UDP port free a moment ago (picoquicdemo
// binds the port it is given).
func freeUDPPort(t *testing.T) int {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

// pqQlog is what a picoquic qlog says: datagram bytes per path in each
// direction and declared lost, 1-RTT packets per key phase, and the CONNECTION_CLOSE frames.
type pqQlog struct {
	sent, recv, lost       map[int]uint64 // lost: bytes declared lost (a datagram's size at most)
	sentPhase1, recvPhase1 int
	closesSent, closesRecv []pqClose
	messages               []string
	challenges             map[int]int // PATH_CHALLENGE frames sent, per path ID
	off                    bool        // no qlog written (benchMode)
}

type pqClose struct {
	ErrorSpace string `json:"error_space"`
	ErrorCode  uint64 `json:"error_code"`
	Reason     string `json:"reason"`
	Trigger    string `json:"trigger_frame_type"`
}

func (q *pqQlog) total(m map[int]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// readPicoquicQlog parses the one qlog file in dir (picoquic's "draft-00"
// layout: each event is [time, path, category, name, data]).
func readPicoquicQlog(t *testing.T, dir string, retried bool) *pqQlog {
	t.Helper()
	if benchMode() {
		return &pqQlog{off: true, sent: map[int]uint64{}, recv: map[int]uint64{}, lost: map[int]uint64{}}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.qlog"))
	if len(files) == 0 || (len(files) > 1 && !retried) {
		t.Fatalf("picoquic qlog: %d files in %s", len(files), dir)
	}
	// After a Retry picoquic traces the first attempt (an Initial and the
	// Retry) apart from the connection: read the connection's, the largest.
	slices.SortFunc(files, func(a, b string) int { return cmp.Compare(fileSize(b), fileSize(a)) })
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Traces []struct {
			Fields []string            `json:"event_fields"`
			Events [][]json.RawMessage `json:"events"`
		} `json:"traces"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("picoquic qlog %s: %v", files[0], err)
	}
	q := &pqQlog{sent: map[int]uint64{}, recv: map[int]uint64{}, lost: map[int]uint64{}, challenges: map[int]int{}}
	for _, tr := range doc.Traces {
		// Single-path traces have no path_id column.
		col := map[string]int{}
		for i, f := range tr.Fields {
			col[f] = i
		}
		pathCol, hasPath := col["path_id"]
		nameCol, dataCol := col["event"], col["data"]
		for _, ev := range tr.Events {
			if len(ev) != len(tr.Fields) {
				continue
			}
			var pathID int
			var name string
			if hasPath {
				json.Unmarshal(ev[pathCol], &pathID)
			}
			json.Unmarshal(ev[nameCol], &name)
			data := ev[dataCol]
			switch name {
			case "datagram_sent", "datagram_received":
				var d struct {
					N uint64 `json:"byte_length"`
				}
				json.Unmarshal(data, &d)
				if name == "datagram_sent" {
					q.sent[pathID] += d.N
				} else {
					q.recv[pathID] += d.N
				}
			case "packet_sent", "packet_received":
				var d struct {
					Type   string `json:"packet_type"`
					Header struct {
						KeyPhase int `json:"key_phase"`
					} `json:"header"`
					Frames []json.RawMessage `json:"frames"`
				}
				json.Unmarshal(data, &d)
				if d.Type == "1RTT" && d.Header.KeyPhase == 1 {
					if name == "packet_sent" {
						q.sentPhase1++
					} else {
						q.recvPhase1++
					}
				}
				for _, f := range d.Frames {
					var c struct {
						Type string `json:"frame_type"`
						pqClose
					}
					json.Unmarshal(f, &c)
					if c.Type == "path_challenge" && name == "packet_sent" {
						q.challenges[pathID]++
					}
					if c.Type == "connection_close" || c.Type == "application_close" {
						if name == "packet_sent" {
							q.closesSent = append(q.closesSent, c.pqClose)
						} else {
							q.closesRecv = append(q.closesRecv, c.pqClose)
						}
					}
				}
			case "packet_lost":
				var d struct {
					Header struct {
						Size uint64 `json:"packet_size"`
					} `json:"header"`
				}
				json.Unmarshal(data, &d)
				q.lost[pathID] += d.Header.Size + 16
			case "message":
				var d struct {
					M string `json:"message"`
				}
				json.Unmarshal(data, &d)
				q.messages = append(q.messages, d.M)
			}
		}
	}
	return q
}

// hqServe answers hq-interop requests on every stream of every connection
// accepted by l with files[path].
func hqServe(ctx context.Context, l *Listener, files map[string][]byte, conns chan<- *Conn) {
	for {
		c, err := l.Accept(ctx)
		if err != nil {
			return
		}
		if conns != nil {
			select {
			case conns <- c:
			default:
			}
		}
		go func() {
			for {
				s, err := c.AcceptStream(ctx)
				if err != nil {
					return
				}
				go hqAnswer(s, files)
			}
		}()
	}
}

func hqAnswer(s *Stream, files map[string][]byte) {
	req, err := bufio.NewReader(io.LimitReader(s, 4096)).ReadString('\n')
	path, ok := strings.CutPrefix(strings.TrimRight(req, "\r\n"), "GET ")
	body, found := files[path]
	if (err != nil && req == "") || !ok || !found {
		s.CancelWrite(1)
		return
	}
	s.Write(body)
	s.Close()
}

// hqGet sends one hq-interop request on c and returns the response body.
func hqGet(ctx context.Context, c *Conn, path string) ([]byte, error) {
	s, err := c.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.Write([]byte("GET " + path + "\r\n")); err != nil {
		return nil, err
	}
	s.Close()
	if dl, ok := ctx.Deadline(); ok {
		s.SetReadDeadline(dl)
	}
	return io.ReadAll(s)
}

func hqClientTLS() *tls.Config {
	// picoquic's test certificate names test.example.com; the suite checks
	// the bytes, not the server's identity.
	return &tls.Config{ServerName: "test.example.com", NextProtos: []string{hqALPN}, InsecureSkipVerify: true}
}

func hqServerTLS(t *testing.T, certDir string) *tls.Config {
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "cert.pem"), filepath.Join(certDir, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{hqALPN}}
}

// loopbackAddr2 is a second client address: 127.0.0.2 is on Linux's
// loopback interface without any configuration.
func udpOn(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(addr)})
	if err != nil {
		t.Fatalf("second client address %s: %v", addr, err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

func mbps(n int, d time.Duration) float64 { return float64(n) * 8 / d.Seconds() / 1e6 }

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}
