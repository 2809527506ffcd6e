package render_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/mptester/mptester/report/analysis"
	"github.com/mptester/mptester/report/render"
)

// FuzzReport: any bytes as a result file, through every section (the
// fleet views too) and every format, HTML with its figures included: an
// unreadable input is an error naming the file, never a panic, and
// whatever is read renders.
func FuzzReport(f *testing.F) {
	for _, p := range []string{"../../internal/cmd/report/testdata/mobile-v1.1.json", "../../internal/cmd/report/testdata/run-v1.0.json",
		"../../internal/cmd/report/testdata/survey.jsonl", "../testdata/stream.jsonl"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		inputs := []analysis.Input{{Name: "fuzz", Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(in)), nil }}}
		rep, err := analysis.AnalyzeSeq(func(yield func(analysis.Input) bool) { yield(inputs[0]) }, nil, analysis.Options{Fleet: true})
		if err != nil {
			if !errors.Is(err, analysis.ErrInput) {
				t.Fatalf("error without file and line: %v", err)
			}
			return
		}
		defer rep.Close()
		for _, format := range []string{"text", "md", "json", "html"} {
			if err := render.Write(io.Discard, format, rep.Tables, rep.Figures); err != nil {
				t.Fatalf("%s: %v", format, err)
			}
		}
		for _, tb := range rep.Tables {
			if err := render.CSV(io.Discard, tb); err != nil {
				t.Fatal(err)
			}
		}
	})
}
