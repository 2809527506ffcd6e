package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenHeader is a header with every field fixed. StartedAt is given in
// CET with a round half second on purpose: it must come out as UTC with
// all nine digits.
func goldenHeader() Header {
	synced := true
	return Header{
		SchemaVersion: SchemaVersion,
		RunID:         "0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10",
		ProbeID:       "m-0123456789abcdef",
		Command:       "survey",
		Tool:          Tool{Name: "mptester", Version: "v1.2.3", Commit: "abc1234"},
		Host:          Host{OS: "linux", Arch: "amd64", Kernel: "6.18.0", HostnameHash: "0123456789abcdef"},
		StartedAt:     time.Date(2026, 11, 22, 11, 0, 0, 500_000_000, time.FixedZone("CET", 3600)),
		Clock:         Clock{Synchronized: &synced, Source: "adjtimex"},
		Paths: []Path{
			{Name: "wlan0", Index: 2, Kind: "wifi", Up: true, Flags: []string{"up", "broadcast", "multicast", "running"}, MTU: 1500,
				Addrs: []PathAddr{
					{IP: netip.MustParseAddr("198.18.1.2"), PrefixLen: 24, Scope: "global"},
					{IP: netip.MustParseAddr("fd00:1::2"), PrefixLen: 64, Scope: "global"},
					{IP: netip.MustParseAddr("fe80::1"), PrefixLen: 64, Scope: "link-local"}},
				DefaultRoute: true,
				DNS:          []DNSServer{{Addr: netip.MustParseAddrPort("198.18.1.1:53"), Source: "systemd-resolved"}}},
			{Name: "wwan0", Index: 3, Kind: "cellular", Up: true, Flags: []string{"up", "pointtopoint", "running"}, MTU: 1428,
				Addrs:        []PathAddr{{IP: netip.MustParseAddr("198.18.2.2"), PrefixLen: 24, Scope: "global"}},
				DefaultRoute: true,
				DNS: []DNSServer{{Addr: netip.MustParseAddrPort("[fd00:2::1]:53"), Source: "flag"},
					{Addr: netip.MustParseAddrPort("198.18.0.53:53"), Source: "resolv.conf", Shared: true}}},
		},
		Config: json.RawMessage(`{"top":2,"paths":["wlan0","wwan0"]}`),
	}
}

var goldenRecords = []string{
	`{"type":"dns","path":"wlan0","name":"a.example","rcode":"NOERROR","ms":12.5}`,
	`{"type":"rtt","path":"wwan0","target":"198.18.9.1","ms":48.25}`,
}

func goldenDocument() Document {
	d := Document{Header: goldenHeader(), FinishedAt: time.Date(2026, 11, 22, 10, 0, 3, 0, time.UTC),
		Status: StatusPartial, Reason: "interrupted"}
	for _, r := range goldenRecords {
		d.Records = append(d.Records, json.RawMessage(r))
	}
	return d
}

func goldenStream(t *testing.T) []byte {
	var buf bytes.Buffer
	s, err := NewStream(&buf, goldenHeader())
	require.NoError(t, err)
	s.now = func() time.Time { return time.Date(2026, 11, 22, 10, 0, 3, 123, time.UTC) }
	for _, r := range goldenRecords {
		require.NoError(t, s.Write(json.RawMessage(r)))
	}
	require.NoError(t, s.Close(StatusOK, ""))
	return buf.Bytes()
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(file, got, 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "run go test ./report -run Golden -update to create it")
	assert.Equal(t, string(want), string(got), "%s changed: if intended, bump SchemaVersion if incompatible and run -update", file)
}

func TestGoldenDocument(t *testing.T) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(goldenDocument()))
	golden(t, "document.json", buf.Bytes())
	require.NoError(t, ValidateDocument(buf.Bytes()))

	// Times: UTC, nine digits, and they read back as the same instants.
	assert.Contains(t, buf.String(), `"started_at": "2026-11-22T10:00:00.500000000Z"`)
	assert.Contains(t, buf.String(), `"finished_at": "2026-11-22T10:00:03.000000000Z"`)
	var back Document
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	assert.True(t, back.StartedAt.Equal(goldenHeader().StartedAt))
	assert.Len(t, back.Records, 2)
}

func TestGoldenStream(t *testing.T) {
	got := goldenStream(t)
	golden(t, "stream.jsonl", got)
	require.NoError(t, ValidateStream(bytes.NewReader(got)))
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	require.Len(t, lines, 4)
	assert.True(t, strings.HasPrefix(lines[0], `{"type":"header",`), lines[0])
	assert.Contains(t, lines[3], `"finished_at":"2026-11-22T10:00:03.000000123Z"`)
}

// A document written by NewHeader on this machine must validate too.
func TestLiveHeaderValidates(t *testing.T) {
	h, err := NewHeader("doctor", "p-test", []Path(nil), map[string]any{"dns": []string{}})
	require.NoError(t, err)
	b, err := json.Marshal(Document{Header: h, FinishedAt: time.Now(), Status: StatusOK})
	require.NoError(t, err)
	require.NoError(t, ValidateDocument(b), string(b))
}

func TestTimestamp(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 60, time.FixedZone("X", -7*3600))
	assert.Equal(t, "2026-01-02T10:04:05.000000060Z", Timestamp(at))
}

// mutate decodes the golden document, applies f and re-encodes it.
func mutate(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	b, err := json.Marshal(goldenDocument())
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	f(m)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

func TestValidateDocumentRejects(t *testing.T) {
	firstPath := func(m map[string]any) map[string]any { return m["paths"].([]any)[0].(map[string]any) }
	tests := []struct {
		name string
		f    func(m map[string]any)
		want string // in the error
	}{
		{"missing run_id", func(m map[string]any) { delete(m, "run_id") }, "run_id"},
		{"run_id not a uuid", func(m map[string]any) { m["run_id"] = "run-1" }, "run_id"},
		{"bad status", func(m map[string]any) { m["status"] = "done" }, "status"},
		{"non-UTC started_at", func(m map[string]any) { m["started_at"] = "2026-11-22T11:00:00.500000000+01:00" }, "started_at"},
		{"finished_at without nanoseconds", func(m map[string]any) { m["finished_at"] = "2026-11-22T10:00:03Z" }, "finished_at"},
		{"impossible date", func(m map[string]any) { m["finished_at"] = "2026-13-45T10:00:03.000000000Z" }, "finished_at"},
		{"record without type", func(m map[string]any) { m["records"] = []any{map[string]any{"path": "wlan0"}} }, "records"},
		{"record typed header", func(m map[string]any) { m["records"] = []any{map[string]any{"type": "header"}} }, "records"},
		{"record not an object", func(m map[string]any) { m["records"] = []any{"dns"} }, "records"},
		{"records missing", func(m map[string]any) { delete(m, "records") }, "records"},
		{"unknown top-level field", func(m map[string]any) { m["extra"] = 1 }, "extra"},
		{"incompatible schema_version", func(m map[string]any) { m["schema_version"] = "2.0" }, "schema_version"},
		{"path without name", func(m map[string]any) { delete(firstPath(m), "name") }, "paths"},
		{"path bad kind", func(m map[string]any) { firstPath(m)["kind"] = "carrier-pigeon" }, "paths"},
		{"path bad ip", func(m map[string]any) {
			firstPath(m)["addresses"].([]any)[0].(map[string]any)["ip"] = "198.18.1.300"
		}, "paths"},
		{"hostname not hashed", func(m map[string]any) { m["host"].(map[string]any)["hostname_hash"] = "laptop.local" }, "hostname_hash"},
		{"clock synchronized not boolean", func(m map[string]any) { m["clock"].(map[string]any)["synchronized"] = "yes" }, "synchronized"},
		{"tool missing commit", func(m map[string]any) { delete(m["tool"].(map[string]any), "commit") }, "tool"},
		{"config a string", func(m map[string]any) { m["config"] = "top=2" }, "config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateDocument(mutate(t, tt.f))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	for name, b := range map[string]string{"not JSON": "{", "trailing garbage": "{} {}", "array": "[]"} {
		assert.Error(t, ValidateDocument([]byte(b)), name)
	}
}

func TestValidateStreamRejects(t *testing.T) {
	good := strings.Split(strings.TrimSpace(string(goldenStream(t))), "\n")
	hdr, rec1, rec2, trl := good[0], good[1], good[2], good[3]
	join := func(lines ...string) string { return strings.Join(lines, "\n") + "\n" }
	tests := []struct {
		name, stream, want string
	}{
		{"empty", "", "empty stream"},
		{"no trailer", join(hdr, rec1, rec2), "no trailer"},
		{"header not first", join(rec1, hdr, rec2, trl), "first line must be the header"},
		{"two headers", join(hdr, rec1, hdr, rec2, trl), "header is not the first line"},
		{"data after trailer", join(hdr, rec1, rec2, trl, rec1), "after the trailer"},
		{"record count wrong", join(hdr, rec1, trl), "counts 2 records, the stream holds 1"},
		{"run_id mismatch", join(hdr, rec1, rec2, strings.Replace(trl, "0f8c3f6e", "1f8c3f6e", 1)), "differs"},
		{"record without type", join(hdr, `{"path":"wlan0"}`, rec2, trl), "line 2"},
		{"empty line", join(hdr, "", rec2, trl), "line 2: empty"},
		{"not JSON", join(hdr, "{", rec2, trl), "line 2: not JSON"},
		{"bad trailer status", join(hdr, rec1, rec2, strings.Replace(trl, `"status":"ok"`, `"status":"fine"`, 1)), "line 4"},
		{"header missing run_id", join(strings.Replace(hdr, `"run_id":"0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10",`, "", 1), rec1, rec2, trl), "line 1"},
		{"non-UTC header time", join(strings.Replace(hdr, "10:00:00.500000000Z", "11:00:00.500000000+01:00", 1), rec1, rec2, trl), "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateStream(strings.NewReader(tt.stream))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// FuzzValidateStream: arbitrary input yields an error or nil, never a panic.
func FuzzValidateStream(f *testing.F) {
	f.Add(`{"type":"header"}` + "\n")
	f.Add(`{"type":"trailer","run_id":"0f8c3f6e-3c1a-4c36-9a55-1f2d1c5e7a10","finished_at":"2026-11-22T10:00:03.000000000Z","status":"ok","records":1e3}` + "\n")
	f.Add("{}\n[]\nnull\n")
	f.Fuzz(func(t *testing.T, s string) {
		_ = ValidateStream(strings.NewReader(s))
		_ = ValidateDocument([]byte(s))
	})
}

func TestTimeType(t *testing.T) {
	rec := struct {
		At Time `json:"at"`
	}{Time{time.Date(2026, 1, 2, 4, 4, 5, 0, time.FixedZone("CET", 3600))}}
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	assert.JSONEq(t, `{"at":"2026-01-02T03:04:05.000000000Z"}`, string(b))
	require.NoError(t, json.Unmarshal(b, &rec))
	assert.True(t, rec.At.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
}
