package pcapanalysis

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTsharkScenario: Wireshark's MPTCP analysis of the synthetic capture
// groups the same subflows, counts the same payload and marks the same
// reinjections.
func TestTsharkScenario(t *testing.T) {
	requireTool(t, "tshark")
	dir := t.TempDir()
	file := dir + "/scenario.pcap"
	require.NoError(t, os.WriteFile(file, scenario(t), 0o644))
	rep, err := AnalyzeFile(context.Background(), file, Options{})
	require.NoError(t, err)
	compareTshark(t, file, rep)
}

// requireTool skips without the tool, or fails under CI=true.
func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing (.ci/run installs it)", name)
		}
		t.Skipf("%s is not installed", name)
	}
}

// compareTshark runs Wireshark's MPTCP analysis on the capture: the same
// subflows grouped into the same connections, the same payload bytes per
// subflow and direction; and the same report from the capture rewritten as
// pcapng.
func compareTshark(t *testing.T, file string, rep *Report) {
	t.Helper()
	requireTool(t, "tshark")
	// Wireshark 4.0 calls the preference mptcp.analyze_mptcp (older ones
	// tcp.analyze_mptcp).
	out, err := exec.Command("tshark", "-r", file, "-o", "mptcp.analyze_mptcp:TRUE", "-o", "mptcp.analyze_mappings:TRUE",
		"-o", "mptcp.intersubflows_retransmission:TRUE", "-T", "fields", "-E", "separator=/t", "-E", "aggregator=;",
		"-e", "tcp.stream", "-e", "mptcp.stream", "-e", "tcp.srcport", "-e", "tcp.dstport",
		"-e", "tcp.len", "-e", "mptcp.reinjection_of", "-e", "ip.src", "-e", "ip.dst", "-e", "ipv6.src", "-e", "ipv6.dst",
		"-e", "tcp.analysis.initial_rtt").Output()
	require.NoError(t, err)
	type key struct{ src, dst string }
	// Only segments with an MPTCP option carry mptcp.stream: a TCP
	// stream belongs to the MPTCP stream any of its segments names.
	mpOf := map[string]string{}
	pairOf := map[string]string{}
	payload := map[key]int64{}
	// Wireshark's iRTT: first SYN to the ACK that completes the
	// handshake, in seconds, on the stream's packets after it.
	irtt := map[string]float64{}
	reinjPkts := 0
	// Not TrimSpace: a line may end in tabs (empty last fields).
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 11 || f[0] == "" {
			continue
		}
		src, dst := f[6]+":"+f[2], f[7]+":"+f[3]
		if f[6] == "" {
			src, dst = "["+f[8]+"]:"+f[2], "["+f[9]+"]:"+f[3]
		}
		pair := []string{src, dst}
		sort.Strings(pair)
		pairOf[f[0]] = strings.Join(pair, "-")
		if f[1] != "" {
			mpOf[f[0]] = f[1]
		}
		n, _ := strconv.ParseInt(f[4], 10, 64)
		payload[key{src, dst}] += n
		if f[5] != "" {
			reinjPkts++
		}
		if _, seen := irtt[pairOf[f[0]]]; !seen && f[10] != "" {
			v, err := strconv.ParseFloat(f[10], 64)
			require.NoError(t, err, "tshark iRTT %q", f[10])
			irtt[pairOf[f[0]]] = v * 1000
		}
	}
	groups := map[string]map[string]bool{} // mptcp.stream -> its subflows
	for ts, mp := range mpOf {
		if groups[mp] == nil {
			groups[mp] = map[string]bool{}
		}
		groups[mp][pairOf[ts]] = true
	}
	ourGroups := map[string]map[string]bool{}
	for _, c := range rep.Connections {
		if c.Kind != "mptcp" {
			continue
		}
		ours := map[string]bool{}
		for _, s := range c.Subflows {
			pair := []string{s.Client, s.Server}
			sort.Strings(pair)
			ours[strings.Join(pair, "-")] = true
			up, down := s.Dir[0].Payload, s.Dir[1].Payload
			if s.flipped {
				up, down = down, up
			}
			assert.Equal(t, payload[key{s.Client, s.Server}], up, "subflow %s payload from its client, tshark", s.Client)
			assert.Equal(t, payload[key{s.Server, s.Client}], down, "subflow %s payload to its client, tshark", s.Client)
			// Both from the same microsecond timestamps: equal to the
			// nanosecond tshark prints, whatever the host added.
			want, ok := irtt[strings.Join(pair, "-")]
			assert.Equal(t, ok, s.HandshakeRTT != 0, "subflow %s: a handshake RTT (ours %.3f ms), tshark has one", s.Client, s.HandshakeRTT)
			assert.InDelta(t, want, s.HandshakeRTT, 1e-6, "subflow %s handshake RTT in ms: tshark, ours", s.Client)
		}
		ourGroups[strconv.Itoa(c.ID)] = ours
	}
	// Compare as sets of subflow sets.
	canon := func(m map[string]map[string]bool) []string {
		var out []string
		for _, g := range m {
			var k []string
			for p := range g {
				k = append(k, p)
			}
			sort.Strings(k)
			out = append(out, strings.Join(k, " "))
		}
		sort.Strings(out)
		return out
	}
	assert.Equal(t, canon(groups), canon(ourGroups), "MPTCP connections and their subflows: tshark, ours")
	var ourReinj int64
	for _, c := range rep.Connections {
		ourReinj += c.Reinjections[0] + c.Reinjections[1]
	}
	t.Logf("tshark marks %d segments as reinjections, we count %d", reinjPkts, ourReinj)
	assert.Equal(t, int64(reinjPkts), ourReinj, "reinjected segments: tshark, ours")

	// The same capture as pcapng reads the same.
	ng := strings.TrimSuffix(file, ".pcap") + ".pcapng"
	b, err := exec.Command("tshark", "-r", file, "-F", "pcapng", "-w", ng).CombinedOutput()
	require.NoError(t, err, "%s", b)
	rep2, err := AnalyzeFile(context.Background(), ng, Options{})
	require.NoError(t, err)
	var j1, j2 bytes.Buffer
	rep.File, rep2.File = "", ""
	require.NoError(t, Render(&j1, "json", []*Report{rep}))
	require.NoError(t, Render(&j2, "json", []*Report{rep2}))
	assert.Equal(t, j1.String(), j2.String(), "pcap and pcapng of the same capture")
}
