package agent

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mptester/mptester/agent/caps"
	"github.com/mptester/mptester/collect/api"
	"github.com/mptester/mptester/upload"
)

func (f *fleet) put(t *testing.T, probe, body string) (int, string) {
	req, _ := http.NewRequest(http.MethodPut, f.url+"/v1/probes/"+probe+"/config", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.admin)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type listedProbe struct {
	Name     string        `json:"name"`
	Caps     *caps.Caps    `json:"caps"`
	Refusals []api.Refusal `json:"refusals"`
}

func (f *fleet) probes(t *testing.T) map[string]listedProbe {
	req, _ := http.NewRequest(http.MethodGet, f.url+"/v1/probes", nil)
	req.Header.Set("Authorization", "Bearer "+f.admin)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct{ Probes []listedProbe }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	m := map[string]listedProbe{}
	for _, p := range out.Probes {
		m[p.Name] = p
	}
	return m
}

// snapshot hashes every file under root except the skipped directories.
func snapshot(t *testing.T, root string, skip ...string) map[string][32]byte {
	out := map[string][32]byte{}
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, s := range skip {
			if p == s {
				return filepath.SkipDir
			}
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = sha256.Sum256(b)
		} else if !d.IsDir() {
			out[p] = sha256.Sum256([]byte("non-regular " + d.Type().String()))
		}
		return nil
	}))
	return out
}

// TestHostileSchedules: each schedule a hostile collector (or whoever
// holds its admin token) might send is refused by the collector with 400
// naming the field, and again by the agent when it is injected straight
// into the agent's cached copy: the agent never runs it, no file outside
// its state directory and spool changes, and the refusal reaches the
// collector's probe list with the next upload.
func TestHostileSchedules(t *testing.T) {
	root := t.TempDir() // the tree this test controls: the probe's filesystem
	for _, d := range []string{"etc", "home", "state", "spool", "tmp"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o700))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc", "mptester.yaml"), []byte("probe_id: pi1\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "home", "secrets.csv"), []byte("1,secret.example\n"), 0o600))
	stateDir, spoolDir := filepath.Join(root, "state"), filepath.Join(root, "spool")
	sp, err := upload.OpenSpool(spoolDir, upload.Quota{})
	require.NoError(t, err)

	f := newFleet(t)
	owner := caps.Defaults()
	owner.MaxRate, owner.MaxDuration, owner.Paths = 100, api.Duration(time.Minute), []string{"wlan0", "eth0"}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var ran []string
	a := &Agent{URL: f.url, Token: f.tok, Probe: "pi1", Dir: stateDir, Caps: owner, Spool: sp,
		Now: func() time.Time { return now }, Jitter: func(time.Duration) time.Duration { return 0 },
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("9.9.9.9")}, nil
		}, // never contacted: Exec records
		Exec: func(_ context.Context, task api.Task, args []string) error {
			ran = append(ran, task.Name+" "+strings.Join(args, " "))
			return nil
		},
		Upload: func(context.Context, api.UploadPolicy) error { return nil }}
	ctx := context.Background()

	// A benign schedule first: the agent caches it and reports its caps.
	code, body := f.put(t, "pi1", `{"tasks":[{"name":"ok","type":"run","every":"1h","run":{"servers":["test.example"],"paths":["wlan0"]}}]}`)
	require.Equal(t, http.StatusOK, code, body)
	got, err := a.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"ok"}, got)
	require.NotNil(t, f.probes(t)["pi1"].Caps, "the caps are reported")
	var c cached
	b, err := os.ReadFile(filepath.Join(stateDir, "schedule.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &c))

	pwned := filepath.Join(root, "tmp", "pwned.json")
	secret := filepath.Join(root, "home", "secrets.csv")
	cfg := filepath.Join(root, "etc", "mptester.yaml")
	for _, tc := range []struct{ name, task, field string }{
		{"output", `{"name":"x","command":"run","every":"1h","args":["--server","test.example","-o","` + pwned + `"]}`, "tasks[0].args[2]"},
		{"output-typed", `{"name":"x","type":"run","every":"1h","run":{"servers":["test.example"],"output":"` + pwned + `"}}`, "tasks[0].run"},
		{"memprofile", `{"name":"x","command":"survey","every":"1h","args":["--memprofile","` + pwned + `"]}`, "--memprofile"},
		{"pcap", `{"name":"x","command":"run","every":"1h","args":["--server","test.example","--pcap","` + root + `"]}`, "--pcap"},
		{"qlog", `{"name":"x","type":"run","every":"1h","run":{"servers":["test.example"],"qlog":"` + root + `"}}`, "tasks[0].run"},
		{"config", `{"name":"x","command":"run","every":"1h","args":["--config","` + cfg + `","--server","test.example"]}`, "--config"},
		{"resume", `{"name":"x","command":"survey","every":"1h","args":["--resume","` + secret + `"]}`, "--resume"},
		{"list-file", `{"name":"x","command":"survey","every":"1h","args":["--list","` + secret + `"]}`, "--list"},
		{"list-as-domain", `{"name":"x","type":"survey","every":"1h","survey":{"domains":["` + secret + `"]}}`, "tasks[0].survey.domains[0]"},
		{"private-server", `{"name":"x","type":"run","every":"1h","run":{"servers":["192.168.1.1:443"]}}`, "192.168.1.1"},
		{"private-domain", `{"name":"x","type":"survey","every":"1h","survey":{"domains":["example.com","10.0.0.138"]}}`, "10.0.0.138"},
		{"loopback", `{"name":"x","type":"run","every":"1h","run":{"servers":["[::1]:443"]}}`, "::1"},
		{"localhost", `{"name":"x","type":"run","every":"1h","run":{"servers":["localhost"]}}`, "localhost"},
		{"allow-cross-private", `{"name":"x","command":"survey","every":"1h","args":["--allow-cross-private"]}`, "--allow-cross-private"},
		{"public-prefix", `{"name":"x","command":"survey","every":"1h","args":["--public-prefix","0.0.0.0/0"]}`, "--public-prefix"},
		{"rate", `{"name":"x","type":"survey","every":"1h","survey":{"rate":5000}}`, "survey.rate"},
		{"duration", `{"name":"x","type":"run","every":"1h","run":{"servers":["test.example"],"duration":"10m"}}`, "run.duration"},
		{"unknown", `{"name":"x","type":"run","every":"1h","run":{"servers":["test.example"],"bogus":1}}`, "tasks[0].run"},
		{"forbidden-path", `{"name":"x","type":"run","every":"1h","run":{"servers":["test.example"],"paths":["wwan0"]}}`, "wwan0"},
		{"forbidden-type", `{"name":"x","type":"shell","every":"1h"}`, "tasks[0].type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched := `{"tasks":[` + tc.task + `]}`
			code, body := f.put(t, "pi1", sched)
			assert.Equal(t, http.StatusBadRequest, code, body)
			assert.Contains(t, body, tc.field, "the 400 names the field")

			// Injected into the agent's cached copy (the server answers 304).
			inj, _ := json.Marshal(cached{ETag: c.ETag, Schedule: json.RawMessage(`{"revision":1,` + sched[1:])})
			require.NoError(t, os.WriteFile(filepath.Join(stateDir, "schedule.json"), inj, 0o600))
			before := snapshot(t, root, stateDir, spoolDir)
			ran = nil
			now = now.Add(2 * time.Hour)
			got, err := a.RunOnce(ctx)
			require.NoError(t, err)
			assert.Empty(t, got)
			assert.Empty(t, ran, "nothing was run")
			assert.Equal(t, before, snapshot(t, root, stateDir, spoolDir), "no file outside the state directory and spool changed")
			_, err = os.Stat(pwned)
			assert.True(t, os.IsNotExist(err))

			p := f.probes(t)["pi1"]
			require.Len(t, p.Refusals, 1, "the refusal reached the collector with the upload")
			assert.Equal(t, "x", p.Refusals[0].Task)
			assert.Equal(t, int64(1), p.Refusals[0].Revision)
			assert.Contains(t, p.Refusals[0].Reason, tc.field)
		})
	}
}

// TestScheduleForUnknownProbe: a schedule for a probe that is not
// enrolled (a typo) is refused with 404 naming it, not stored to never apply.
func TestScheduleForUnknownProbe(t *testing.T) {
	f := newFleet(t)
	code, body := f.put(t, "typo", `{"tasks":[]}`)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, `typo`)
	code, body = f.put(t, "pi1", `{"tasks":[]}`)
	assert.Equal(t, http.StatusOK, code, body)
	code, _ = f.put(t, "*", `{"tasks":[]}`)
	assert.Equal(t, http.StatusOK, code)
}

// TestStoredLegacySchedule: a schedule stored before tasks were typed is
// served migrated when every flag is a parameter; one with a flag that is
// not is answered 409 naming it, and the agent keeps its last good copy.
func TestStoredLegacySchedule(t *testing.T) {
	f := newFleet(t)
	ctx := context.Background()
	_, err := f.st.PutSchedule(ctx, "pi1", []byte(`{"tasks":[{"name":"s","command":"survey","every":"6h","args":["--top","100"]}]}`))
	require.NoError(t, err)
	var ran []string
	a := &Agent{URL: f.url, Token: f.tok, Probe: "pi1", Dir: t.TempDir(), Caps: caps.Defaults(),
		Jitter: func(time.Duration) time.Duration { return 0 },
		Exec: func(_ context.Context, task api.Task, args []string) error {
			ran = append(ran, strings.Join(args, " "))
			return nil
		}}
	got, err := a.RunOnce(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"s"}, got)
	assert.Equal(t, []string{"survey --top 100 --rate 100 --no-private --no-upload"}, ran)

	_, err = f.st.PutSchedule(ctx, "pi1", []byte(`{"tasks":[{"name":"s","command":"survey","every":"6h","args":["--top","100","--out","/etc/cron.d/x"]}]}`))
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodGet, f.url+"/v1/probes/pi1/config", nil)
	req.Header.Set("Authorization", "Bearer "+f.tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.Contains(t, string(body), "revision 2")
	assert.Contains(t, string(body), "--out is not a parameter")
	_, _, err = a.Fetch(ctx)
	assert.NoError(t, err, "the last good copy")
}

func sign(t *testing.T, priv ed25519.PrivateKey, serial int64, probe, tasks string) string {
	payload := fmt.Sprintf(`{"serial":%d,"probe":%q,"tasks":%s}`, serial, probe, tasks)
	b, err := json.Marshal(map[string]any{"signed": api.Signature{Payload: []byte(payload), Sig: ed25519.Sign(priv, []byte(payload))}})
	require.NoError(t, err)
	return string(b)
}

// TestSignedSchedules: a probe that pins the fleet operator's key runs
// only schedules that key signed, for it or every probe, with a serial no
// lower than one it ran; anything else (unsigned, another key, a payload
// changed after signing, a replayed older serial, another probe's) is
// refused whole and reported, even though the collector stored it.
func TestSignedSchedules(t *testing.T) {
	f := newFleet(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	_, other, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	owner := caps.Defaults()
	owner.ScheduleKey = pub
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var ran []string
	a := &Agent{URL: f.url, Token: f.tok, Probe: "pi1", Dir: t.TempDir(), Caps: owner,
		Now: func() time.Time { return now }, Jitter: func(time.Duration) time.Duration { return 0 },
		Exec: func(_ context.Context, task api.Task, _ []string) error {
			ran = append(ran, task.Name)
			return nil
		},
		Upload: func(context.Context, api.UploadPolicy) error { return nil }}
	ctx := context.Background()
	task := func(name string) string {
		return `[{"name":"` + name + `","type":"survey","every":"1m","survey":{"top":10}}]`
	}
	step := func(sched string) ([]string, []api.Refusal) {
		code, body := f.put(t, "pi1", sched)
		require.Equal(t, http.StatusOK, code, body)
		ran = nil
		now = now.Add(2 * time.Minute)
		_, err := a.RunOnce(ctx)
		require.NoError(t, err)
		return ran, f.probes(t)["pi1"].Refusals
	}

	got, refusals := step(sign(t, priv, 5, "*", task("v5")))
	assert.Equal(t, []string{"v5"}, got)
	assert.Empty(t, refusals)
	got, _ = step(sign(t, priv, 6, "pi1", task("v6")))
	assert.Equal(t, []string{"v6"}, got)

	tampered := strings.Replace(sign(t, priv, 7, "*", task("v7")), `"sig":"`, `"sig":"AAAA`, 1)
	for name, sched := range map[string]string{
		"unsigned":  `{"tasks":` + task("u") + `}`,
		"other key": sign(t, other, 8, "*", task("o")),
		"tampered":  tampered,
		"replayed":  sign(t, priv, 5, "*", task("v5")),
	} {
		got, refusals = step(sched)
		assert.Empty(t, got, name)
		require.Len(t, refusals, 1, name)
		assert.Regexp(t, "not signed|does not verify|stale signed schedule: serial 5, this probe already ran serial 6", refusals[0].Reason, name)
	}
	// Signed for another probe: the collector refuses to store it for pi1.
	code, body := f.put(t, "pi1", sign(t, priv, 9, "pi2", task("x")))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, `signed for probe \"pi2\"`)
	got, refusals = step(sign(t, priv, 9, "*", task("v9")))
	assert.Equal(t, []string{"v9"}, got)
	assert.Empty(t, refusals)
}
