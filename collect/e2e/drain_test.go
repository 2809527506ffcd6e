//go:build linux && !race

package e2e

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/internal/certs"
)

// TestDrainOnSIGTERM: uploads in flight when the collector gets SIGTERM
// (a systemd stop) finish with their 201 receipt and are stored; a new
// connection is refused from the signal on; the collector exits 0.
func TestDrainOnSIGTERM(t *testing.T) {
	data := t.TempDir()
	c := newCollector(t, data, "", "--drain", "20s")
	tok := c.enrol("p1")
	c.start()
	pin, err := certs.ParseFingerprint(c.pin)
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // verified by the pin below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if sha256.Sum256(raw[0]) != pin {
				return errors.New("pin mismatch")
			}
			return nil
		}}}}
	b, err := os.ReadFile("../../report/testdata/stream.jsonl")
	require.NoError(t, err)

	// Three uploads, each stopped after its first line: in flight.
	const n = 3
	type upload struct {
		w    *io.PipeWriter
		rest string
		code chan int
	}
	var ups []upload
	for range n {
		id := uuid.NewString()
		body := strings.ReplaceAll(strings.ReplaceAll(string(b), "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10", id), "m-0123456789abcdef", "p1")
		first, rest, _ := strings.Cut(body, "\n")
		pr, pw := io.Pipe()
		req, err := http.NewRequest(http.MethodPut, c.url+"/v1/runs/"+id, pr)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		u := upload{w: pw, rest: rest, code: make(chan int, 1)}
		go func() {
			resp, err := client.Do(req)
			if err != nil {
				t.Logf("upload: %v", err)
				u.code <- 0
				return
			}
			resp.Body.Close()
			u.code <- resp.StatusCode
		}()
		_, err = pw.Write([]byte(first + "\n"))
		require.NoError(t, err)
		ups = append(ups, u)
	}
	time.Sleep(500 * time.Millisecond) // the collector reads the first lines

	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.mu.Unlock()
	t0 := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	defer func() { t.Logf("exited %v after SIGTERM", time.Since(t0)) }()
	// Refused from now on: the listener closes at once.
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", c.addr, time.Second)
		// A dial that meets the listener as it closes can be reset: the
		// kernel completed its handshake, then reset it with the rest of
		// the closed listener's accept queue (never accepted by the
		// collector). A dial can also time out: a SYN the kernel dropped
		// while the accept queue was full is retransmitted only after a
		// second (seen once at load 4). The next dial must be refused.
		var ne net.Error
		if err != nil && !errors.Is(err, syscall.ECONNRESET) && !(errors.As(err, &ne) && ne.Timeout()) {
			assert.ErrorIs(t, err, syscall.ECONNREFUSED)
			t.Logf("refused %v after SIGTERM", time.Since(t0))
			break
		}
		if err == nil {
			conn.Close()
		}
		require.True(t, time.Now().Before(deadline), "the collector still accepts connections 5 s after SIGTERM")
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-exited:
		t.Fatal("the collector exited with uploads in flight")
	default:
	}
	for _, u := range ups {
		_, err := u.w.Write([]byte(u.rest))
		require.NoError(t, err)
		require.NoError(t, u.w.Close())
	}
	for i, u := range ups {
		select {
		case code := <-u.code:
			assert.Equal(t, http.StatusCreated, code, "upload %d in flight at SIGTERM", i)
		case <-time.After(20 * time.Second):
			t.Fatalf("upload %d: no answer", i)
		}
	}
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the collector did not exit after draining")
	}
	assert.Equal(t, 0, cmd.ProcessState.ExitCode(), "exit status after a drain")
	c.mu.Lock()
	c.cmd = nil
	c.mu.Unlock()

	out, err := exec.Command(bin, c.args("probe", "list")...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), `"runs": 3`, "every upload in flight was stored")
}
