package run

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/mptester/mptester/report"
)

// docStream writes the run document as the run goes: the header fields and
// an open "records" array first, each record when its test ends, and the
// closing fields (finished_at, status, reason) last. A run that crashes
// leaves every finished test in the file (as a survey's JSON Lines do); a
// finished run is the same JSON document as ever (field order aside).
type docStream struct {
	w   io.Writer
	n   int
	err error
}

func newDocStream(w io.Writer, hdr report.Header) (*docStream, error) {
	// The envelope's own marshalling (timestamps with nine digits), cut
	// before the fields that come at the end.
	b, err := json.Marshal(report.Document{Header: hdr})
	if err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	i := bytes.LastIndex(b, []byte(`,"finished_at":`))
	if i < 0 {
		return nil, fmt.Errorf("encode header: no finished_at in %.40q", b)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, append(b[:i:i], '}'), "", "  "); err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	head := bytes.TrimRight(bytes.TrimSuffix(bytes.TrimRight(buf.Bytes(), "\n"), []byte("}")), "\n ")
	d := &docStream{w: w}
	d.write(append(head, []byte(",\n  \"records\": [")...))
	return d, d.err
}

// record appends one test record (already JSON).
func (d *docStream) record(rec []byte) error {
	var buf bytes.Buffer
	if d.n > 0 {
		buf.WriteByte(',')
	}
	buf.WriteString("\n    ")
	if err := json.Indent(&buf, rec, "    ", "  "); err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	d.n++
	d.write(buf.Bytes())
	return d.err
}

// end closes the records and the document.
func (d *docStream) end(finished time.Time, status report.Status, reason string) error {
	tail := struct {
		FinishedAt string        `json:"finished_at"`
		Status     report.Status `json:"status"`
		Reason     string        `json:"reason,omitempty"`
	}{report.Timestamp(finished), status, reason}
	b, err := json.MarshalIndent(tail, "", "  ")
	if err != nil {
		return err
	}
	closing := "\n  ]"
	if d.n == 0 {
		closing = "]"
	}
	d.write(append([]byte(closing+",\n"), append(bytes.TrimPrefix(b, []byte("{\n")), '\n')...))
	return d.err
}

func (d *docStream) write(b []byte) {
	if d.err == nil {
		_, d.err = d.w.Write(b)
	}
}
