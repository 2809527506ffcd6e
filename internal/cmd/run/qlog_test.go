package run

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readQlog parses a JSON-SEQ qlog file: its header's title and how many
// events of each name it holds.
func readQlog(t *testing.T, path string) (title string, names map[string]int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := bytes.Split(b, []byte{0x1e})
	if len(recs) < 3 || len(recs[0]) != 0 {
		t.Fatalf("%s: not a qlog JSON text sequence (%d bytes)", path, len(b))
	}
	var hdr struct {
		Title      string `json:"title"`
		FileSchema string `json:"file_schema"`
	}
	if err := json.Unmarshal(recs[1], &hdr); err != nil || hdr.FileSchema != "urn:ietf:params:qlog:file:sequential" {
		t.Fatalf("%s: header %s: %v", path, recs[1], err)
	}
	names = map[string]int{}
	for _, r := range recs[2:] {
		var e struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(r, &e); err != nil {
			t.Fatalf("%s: event %q: %v", path, r, err)
		}
		names[e.Name]++
	}
	return hdr.Title, names
}

// --qlog on run and serve: a trace per QUIC connection on each side, named
// by the connection's original destination ID (so client and server
// traces pair up), quic-go's for quic and mpquic's own for mpquic, each
// with packets sent and received.
func TestQlogFlag(t *testing.T) {
	sdir, cdir := t.TempDir(), filepath.Join(t.TempDir(), "client") // run makes cdir
	_, qp, mp, pin := startServerQlog(t, false, sdir)
	_, errOut, err := execute(t, nil, "--server", "127.0.0.1", "--quic-port", fmt.Sprint(qp), "--mpquic-port", fmt.Sprint(mp),
		"--pin", pin, "--paths", "lo", "--transports", "quic,mpquic", "--patterns", "ping", "--ping-count", "3",
		"--interval", "20ms", "--pace", "0", "--qlog", cdir)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	clients, _ := filepath.Glob(filepath.Join(cdir, "*_client.sqlog"))
	titles := map[string]int{}
	for _, c := range clients {
		title, names := readQlog(t, c)
		titles[title]++
		if names["transport:packet_sent"] == 0 || names["transport:packet_received"] == 0 {
			t.Errorf("%s: events %v", c, names)
		}
		// The server's trace of the same connection; it is closed when
		// the server's side ends, shortly after the client's.
		srv := filepath.Join(sdir, strings.TrimSuffix(filepath.Base(c), "_client.sqlog")+"_server.sqlog")
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile(srv)
			if bytes.Contains(b, []byte("transport:connection_closed")) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, names := readQlog(t, srv); names["transport:packet_received"] == 0 {
			t.Errorf("%s: events %v", srv, names)
		}
	}
	if titles["mptester mpquic qlog"] < 1 || titles["quic-go qlog"] < 1 {
		t.Fatalf("client traces by writer %v (%d files): want quic-go's and mpquic's", titles, len(clients))
	}
}

// --quic-ecn: quic's connection samples carry quic-go's ECN validation
// (loopback keeps the ECN field: validated) and CE counts; without the
// flag they carry none, and mpquic's paths carry theirs either way.
func TestQUICECNFlag(t *testing.T) {
	_, qp, _, pin := startServerQlog(t, false, "")
	for _, flag := range []bool{false, true} {
		args := []string{"--server", "127.0.0.1", "--quic-port", fmt.Sprint(qp), "--pin", pin, "--paths", "lo",
			"--transports", "quic", "--patterns", "ping", "--ping-count", "20", "--interval", "10ms", "--pace", "0"}
		if flag {
			args = append(args, "--quic-ecn")
		}
		out, errOut, err := execute(t, nil, args...)
		if err != nil {
			t.Fatalf("--quic-ecn=%v: %v\n%s", flag, err, errOut)
		}
		// The first sample, taken as the handshake ends, may precede
		// quic-go's first marked packet (not-tried); later ones validate.
		has := regexp.MustCompile(`"ecn":\s*"validated",\s*"ce_sent":\s*0,\s*"ce_received":\s*0`).MatchString(out)
		if has != flag || (!flag && strings.Contains(out, `"ecn":`)) {
			t.Errorf("--quic-ecn=%v: ECN recorded %v in\n%s", flag, has, out)
		}
	}
}
