//go:build linux && !race

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/internal/nstest"
)

// TestHostileCollectorAcceptance: `mptester agent --once` in a network
// namespace whose only link (wlan0) leads to a far side that counts, in
// the kernel (nftables), every packet for 10.0.0.0/8, 169.254.0.0/16 and
// the plain-HTTP port on the far side's own address; the collector is the
// test's own (HTTPS, pinned) and so is the DNS server (on the probe's
// side of wlan0: the system resolver's and wlan0's).
//
//   - The collector redirects the schedule fetch to plain HTTP, to a
//     service on the probe's loopback, to a private and to the metadata
//     address: no packet, no connection, no token; each redirect is
//     reported with its Location.
//   - Then it serves run tasks whose names rebind (public for the agent's
//     check, 10.0.0.1 / 169.254.169.254 for the run's own lookup on wlan0)
//     or fail open (SERVFAIL, then 10.0.0.1): no packet to either; the
//     rebinding runs end target-refused in the results uploaded to the
//     collector, the fail-open task is refused and reported.
//
// A control datagram to 10.0.0.1 at the end shows the counter sees what
// reaches the far side.
func TestHostileCollectorAcceptance(t *testing.T) {
	probe, far := nstest.New(t), nstest.New(t)
	probe.Veth("wlan0", far, "peer0")
	probe.IP("addr", "add", "198.18.9.2/24", "dev", "wlan0")
	probe.IP("route", "add", "default", "via", "198.18.9.1")
	far.IP("addr", "add", "198.18.9.1/24", "dev", "peer0")
	if !nstest.IsChild() {
		nstest.SkipUnless(t, lookTool("nft"))
		far.Run("nft", "add table inet count")
		far.Run("nft", "add chain inet count pre { type filter hook prerouting priority -300 ; }")
		far.Run("nft", "add rule inet count pre ip daddr 10.0.0.0/8 counter")
		far.Run("nft", "add rule inet count pre ip daddr 169.254.0.0/16 counter")
		far.Run("nft", "add rule inet count pre ip daddr 198.18.9.1 tcp dport 9999 counter")
		// The probe's system resolver: `ip netns exec` mounts this file.
		etc := filepath.Join("/etc/netns", probe.Name)
		require.NoError(t, os.MkdirAll(etc, 0o755))
		t.Cleanup(func() { os.RemoveAll(etc) })
		require.NoError(t, os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte("nameserver 198.18.9.2\n"), 0o644))
		t.Setenv("MPTESTER_E2E_BIN", bin) // the child uses this build
	}
	if !nstest.IsChild() {
		// Checked even when the child failed: what reached the far side.
		t.Cleanup(func() {
			out := far.Run("nft", "list chain inet count pre")
			counts := regexp.MustCompile(`(daddr [^ ]+(?: tcp dport \d+)?) counter packets (\d+)`).FindAllStringSubmatch(out, -1)
			require.Len(t, counts, 3, out)
			for _, c := range counts {
				n, _ := strconv.Atoi(c[2])
				if strings.Contains(c[1], "10.0.0.0/8") {
					assert.Equal(t, 1, n, "only the control datagram may reach 10.0.0.0/8:\n%s", out)
				} else {
					assert.Zero(t, n, "packets for %s reached the far side:\n%s", c[1], out)
				}
			}
		})
	}
	if nstest.InNS(t, probe) {
		hostileChild(t)
	}
}

func lookTool(name string) string {
	if _, err := exec.LookPath(name); err != nil {
		return name + " is not installed"
	}
	return ""
}

// hostileRecorder is the test's collector: what the probe sent it.
type hostileRecorder struct {
	mu       sync.Mutex
	redirect string
	schedule string
	reports  []json.RawMessage
	runs     map[string][]byte
}

func hostileChild(t *testing.T) {
	// A service on the probe's own loopback: counts connections.
	var loopConns atomic.Int32
	loop := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	loop.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			loopConns.Add(1)
		}
	}
	loop.Start()
	defer loop.Close()

	// The DNS server of the probe's network (198.18.9.2:53, UDP and TCP).
	var mu sync.Mutex
	asked := map[string]int{}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		q := req.Question[0]
		m := new(dns.Msg)
		m.SetReply(req)
		mu.Lock()
		key := q.Name + dns.TypeToString[q.Qtype]
		asked[key]++
		n := asked[key]
		mu.Unlock()
		a := func(ip string) {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0}, A: net.ParseIP(ip)})
		}
		if strings.HasPrefix(q.Name, "slow") {
			return // a silent name: the survey waits dns_timeout x (dns_retries+1)
		}
		switch {
		case q.Qtype != dns.TypeA:
		case q.Name == "rebind.test." && n == 1, q.Name == "meta.test." && n == 1:
			a("9.9.9.9") // what the agent's check sees
		case q.Name == "rebind.test.":
			a("10.0.0.1")
		case q.Name == "meta.test.":
			a("169.254.169.254")
		case q.Name == "failopen.test." && n <= 6:
			m.Rcode = dns.RcodeServerFailure
		case q.Name == "failopen.test.":
			a("10.0.0.1")
		default:
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	pc, err := net.ListenPacket("udp4", "198.18.9.2:53")
	require.NoError(t, err)
	ln, err := net.Listen("tcp4", "198.18.9.2:53")
	require.NoError(t, err)
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: handler}, {Listener: ln, Handler: handler}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go s.ActivateAndServe()
		<-started
		defer s.Shutdown()
	}

	// The hostile collector.
	rec := &hostileRecorder{runs: map[string][]byte{}}
	rec.schedule = `{"revision":7,"tasks":[
	 {"name":"rebind","type":"run","every":"1h","run":{"servers":["rebind.test:8080"],"patterns":["ping"],"transports":["tcp","quic"],"insecure":true,"ping_count":2,"pace":"0s"}},
	 {"name":"meta","type":"run","every":"1h","run":{"servers":["meta.test:80"],"patterns":["ping"],"transports":["tcp"],"insecure":true,"ping_count":2,"pace":"0s"}},
	 {"name":"failopen","type":"run","every":"1h","run":{"servers":["failopen.test:8081"],"patterns":["ping"],"transports":["tcp"],"insecure":true,"ping_count":2,"pace":"0s"}}]}`
	coll := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		redirect, schedule := rec.redirect, rec.schedule
		rec.mu.Unlock()
		b, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/status"):
			rec.mu.Lock()
			rec.reports = append(rec.reports, b)
			rec.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		case redirect != "":
			http.Redirect(w, r, redirect, http.StatusFound)
		case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, api.RunsPath):
			id := strings.TrimPrefix(r.URL.Path, api.RunsPath)
			rec.mu.Lock()
			rec.runs[id] = b
			rec.mu.Unlock()
			sum := sha256.Sum256(b)
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(api.Receipt{RunID: id, SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(b)), Status: "stored"})
		default:
			w.Header().Set("ETag", `"7"`)
			io.WriteString(w, schedule)
		}
	}))
	defer coll.Close()
	pin := sha256.Sum256(coll.Certificate().Raw)

	dir := t.TempDir()
	token := strings.Repeat("5a", 32)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600))
	cfg := fmt.Sprintf(`probe_id: pi-hostile
dns:
  wlan0: ["198.18.9.2"]
upload:
  url: %s
  token_file: %s
  pin: "%s"
  spool: %s
  compression: none
  attempts: 1
agent:
  paths: [wlan0]
  max_duration: 30s
`, coll.URL, filepath.Join(dir, "token"), hex.EncodeToString(pin[:]), filepath.Join(dir, "spool"))
	config := filepath.Join(dir, "mptester.yaml")
	require.NoError(t, os.WriteFile(config, []byte(cfg), 0o600))
	agentOnce := func(state string) string {
		out, _ := exec.Command(bin, "agent", "--once", "--config", config, "--state", filepath.Join(dir, state)).CombinedOutput()
		return string(out)
	}
	lastReport := func() (st struct{ Refusals []api.Refusal }) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		require.NotEmpty(t, rec.reports)
		require.NoError(t, json.Unmarshal(rec.reports[len(rec.reports)-1], &st))
		return st
	}

	// Redirects: plain HTTP on the far side, the probe's loopback, a
	// private and the metadata address.
	for i, target := range []string{"http://198.18.9.1:9999/v1/probes/pi-hostile/config", loop.URL + "/config",
		"http://10.0.0.1/", "http://169.254.169.254/latest/meta-data/"} {
		rec.mu.Lock()
		rec.redirect = target
		rec.mu.Unlock()
		out := agentOnce(fmt.Sprintf("state-redirect-%d", i))
		assert.Contains(t, out, "a probe follows no redirect", target)
		st := lastReport()
		if assert.Len(t, st.Refusals, 1, target) {
			assert.Equal(t, "schedule", st.Refusals[0].Task)
			assert.Contains(t, st.Refusals[0].Reason, strconv.Quote(target))
		}
	}
	rec.mu.Lock()
	rec.redirect = ""
	rec.mu.Unlock()

	// Rebinding and fail-open names.
	out := agentOnce("state")
	st := lastReport()
	refused := map[string]string{}
	for _, r := range st.Refusals {
		refused[r.Task] = r.Reason
	}
	assert.Contains(t, refused["failopen"], "failopen.test could not be resolved", out)
	assert.NotContains(t, refused, "rebind", "the agent's check saw a public address")
	rec.mu.Lock()
	runs := rec.runs
	rec.mu.Unlock()
	refusedTests := map[string]int{}
	for id, doc := range runs {
		var d struct {
			Records []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
				Error  string `json:"error"`
			} `json:"records"`
		}
		require.NoError(t, json.Unmarshal(doc, &d), id)
		for _, r := range d.Records {
			if r.Type != "pattern_test" {
				continue
			}
			assert.Equal(t, "target-refused", r.Status, "%s: %s", id, r.Error)
			for _, a := range []string{"10.0.0.1", "169.254.169.254"} {
				if strings.Contains(r.Error, a) {
					refusedTests[a]++
				}
			}
		}
	}
	assert.Equal(t, map[string]int{"10.0.0.1": 2, "169.254.169.254": 1}, refusedTests,
		"rebind over tcp and quic, meta over tcp: each refused at its dial, and uploaded\n%s", out)
	assert.Zero(t, loopConns.Load(), "no connection to the probe's loopback service")

	// A survey of silent names within every per-field cap (5 s x 6 =
	// 30 s per name) that as a whole would run for minutes: ended at
	// max_duration (30 s) with its process group, the cut reported.
	var slow []string
	for i := range 400 {
		slow = append(slow, fmt.Sprintf("\"slow%d.test\"", i))
	}
	rec.mu.Lock()
	rec.schedule = `{"revision":8,"tasks":[{"name":"slow","type":"survey","every":"1h","survey":{"domains":[` + strings.Join(slow, ",") +
		`],"dns_timeout":"5s","dns_retries":5,"paths":["wlan0"]}}]}`
	rec.mu.Unlock()
	start := time.Now()
	out = agentOnce("state-slow")
	took := time.Since(start)
	st = lastReport()
	if assert.Len(t, st.Refusals, 1, out) {
		assert.Equal(t, "slow", st.Refusals[0].Task)
		assert.Contains(t, st.Refusals[0].Reason, "cut at max_duration 30s")
	}
	left, _ := exec.Command("pgrep", "-f", config).Output()
	assert.Empty(t, strings.TrimSpace(string(left)), "a process of the task outlived it")
	t.Logf("slow survey task: agent --once took %v with max_duration 30s", took.Round(10*time.Millisecond))

	// The control: one datagram that does reach the far side's counter.
	c, err := net.Dial("udp4", "10.0.0.1:9")
	require.NoError(t, err)
	_, err = c.Write([]byte("control"))
	require.NoError(t, err)
	c.Close()
}
