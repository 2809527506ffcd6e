package report

import (
	"bytes"
	"os"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestRecordFastPathOn: the embedded schemas are the ones the record fast
// path was written for (else it turns itself off and this fails, so the
// hashes get a look when the schema changes).
func TestRecordFastPathOn(t *testing.T) {
	if !recordFastPath() {
		r, l, err := schemaHashes()
		t.Fatalf("record fast path off: schema hashes %s %s (%v); check recordType against the new schema, then update the constants", r, l, err)
	}
}

// FuzzRecordFastPath: recordType accepts a line only when the line schema
// accepts it as a record, with the same type; and it accepts every record
// whose keys are written without escapes.
func FuzzRecordFastPath(f *testing.F) {
	b, err := os.ReadFile("testdata/stream.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		f.Add(l)
	}
	for _, s := range []string{`{"type":""}`, `{"type":1}`, `{"type":null}`, `[]`, `{"type":"x"} {}`, `{"type":"x","type":"header"}`,
		`{"type":"header","type":"x"}`, `{"type":"\u0068eader"}`, `{"\u0074ype":"x"}`, `{"a":{"type":"x"}}`, `{"a":[{"type":"x"}],"type":"y"}`, `{"type":["x"]}`, `{"type":{"a":"b"}}`, `{"type":"a\"b"}`, ` {"type" : "x" } `, `{"Type":"x"}`, `{"type":"x"}` + "\n", "{\"type\":\"\xff\"}", `{"type":"trailer"}`} {
		f.Add([]byte(s))
	}
	s, err := compiled()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		typ, fast := recordType(line)
		slow := false
		var slowType string
		if inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line)); err == nil && s.line.Validate(inst) == nil {
			slowType, _ = inst.(map[string]any)["type"].(string)
			slow = slowType != TypeHeader && slowType != TypeTrailer
		}
		escapedKeys := bytes.Contains(line, []byte(`\`))
		if (fast && !slow) || (fast && typ != slowType) || (slow && !fast && !escapedKeys) {
			t.Fatalf("%q: fast path %v (%q), schema %v (%q)", line, fast, typ, slow, slowType)
		}
	})
}

// BenchmarkLineValidator: survey-shaped record lines through the
// validator, with and without the record fast path (MB/s).
func BenchmarkLineValidator(b *testing.B) {
	rec := []byte(`{"type":"probe","probe_path":"wlan0","resolve_path":"wwan0","resolve_paths":["wwan0","wlan0"],"address":"198.18.1.2","port":443,"domains":["d1.example"],"method":"tcp-syn","sent":10,"received":10,"rtts_ms":[1.125,2.25,3.5,4.75,5.875,6.125,7.25,8.5,9.75,10.875],"rtt_ms":5.5,"answer":"syn-ack","answer_counts":{"syn-ack":10},"responsive":true,"bytes":1200,"valid":true}`)
	hdr, err := os.ReadFile("testdata/stream.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	first := bytes.SplitN(hdr, []byte("\n"), 2)[0]
	for _, fast := range []bool{true, false} {
		b.Run(map[bool]string{true: "fast", false: "jsonschema"}[fast], func(b *testing.B) {
			saved := recordFastPath
			recordFastPath = func() bool { return fast }
			defer func() { recordFastPath = saved }()
			v, err := NewLineValidator()
			if err != nil {
				b.Fatal(err)
			}
			if err := v.Line(first); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(rec) + 1))
			for b.Loop() {
				if err := v.Line(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
