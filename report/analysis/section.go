package analysis

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/mptester/mptester/report"
)

// Table is one rendered table of a section: every format (text, Markdown,
// CSV) shows the same cells. Long tables (exact ECDFs) are written whole in
// CSV; the terminal formats print how many rows they hold instead.
type Table struct {
	Name    string     `json:"name"` // unique in a report; the CSV file's base name
	Title   string     `json:"title"`
	Note    string     `json:"note,omitempty"` // definitions and sources, one sentence
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	Long    bool       `json:"long,omitempty"`
	// Href, when set, links each row's first cell (HTML only).
	Href []string `json:"-"`
	// more are rows made on demand after Rows (exact ECDFs read back from
	// spilled samples), nMore of them: use Len and All.
	more  iter.Seq[[]string]
	nMore int
}

// Len is the number of rows.
func (t Table) Len() int { return len(t.Rows) + t.nMore }

// All yields every row, those made on demand included.
func (t Table) All() iter.Seq[[]string] {
	return func(yield func([]string) bool) {
		for _, r := range t.Rows {
			if !yield(r) {
				return
			}
		}
		if t.more != nil {
			for r := range t.more {
				if !yield(r) {
					return
				}
			}
		}
	}
}

// Section aggregates the records of the runs it applies to as they stream
// past (never holding a file) and yields its tables at the end; a section
// without data yields none and is left out.
type Section interface {
	AppliesTo(command string) bool
	Types() []string // the record types Add reads
	Add(rec Record) error
	Tables() []Table
}

type entry struct {
	rank int // report order
	name string
	new  func() Section
}

var registry []entry

// register adds a section at rank (lower first); each section lives in its
// own file and registers in init.
func register(rank int, name string, f func() Section) {
	if slices.ContainsFunc(registry, func(e entry) bool { return e.name == name }) {
		panic("analysis: section registered twice: " + name)
	}
	registry = append(registry, entry{rank, name, f})
	slices.SortStableFunc(registry, func(a, b entry) int { return a.rank - b.rank })
}

// Sections lists the registered section names in report order.
func Sections() []string {
	var names []string
	for _, e := range registry {
		names = append(names, e.name)
	}
	return names
}

// RunObserver is a Section that also wants each run's provenance once its
// records have been read (the fleet views count runs, not records).
type RunObserver interface {
	EndRun(*Run)
}

// Report is the result of reading all inputs.
type Report struct {
	Runs    []*Run
	Tables  []Table
	Figures []Figure
	secs    []Section
}

// Close releases what the sections spilled to disk; the tables' rows made
// on demand cannot be read after it.
func (r *Report) Close() {
	for _, s := range r.secs {
		if c, ok := s.(interface{ Close() }); ok {
			c.Close()
		}
	}
}

// Options say where the inputs came from, for the provenance every report
// carries.
type Options struct {
	Tool    string   // "mptester v1.2.3"
	Source  string   // "files", or the store read ("db sqlite")
	Filters []string // "probe=p1", "since=…"; none for files
	// Fleet adds the fleet views (runs, reachability and RTT per probe
	// over time), meant for a store's many runs.
	Fleet bool
	// SkipBad lists a run that cannot be read (or that a section
	// refuses) as skipped, with its reason, and reads the others: one bad
	// upload in a store must not take down every fleet view. Without it
	// such a run fails the report (files given by hand).
	SkipBad  bool
	each     func(Record) error // Check's
	noTables bool               // Check's: the sections' tables are not built
}

// maxSkipped bounds the bad runs a SkipBad report skips: each one costs
// a new pass over the inputs (the sections cannot take a run back), and
// past this many the store is broken, not one upload.
const maxSkipped = 100

// fleetOnly marks a section shown only with Options.Fleet.
type fleetOnly interface{ fleetOnly() }

// Table returns the table named name, or false.
func (r *Report) Table(name string) (Table, bool) {
	for _, t := range r.Tables {
		if t.Name == name {
			return t, true
		}
	}
	return Table{}, false
}

// Figure returns the figure named name, or false.
func (r *Report) Figure(name string) (Figure, bool) {
	for _, f := range r.Figures {
		if f.Name == name {
			return f, true
		}
	}
	return Figure{}, false
}

// Input is one file to read.
type Input struct {
	Name string
	Open func() (io.ReadCloser, error)
	// SHA256, when set, is what the file's digest must be (the collect
	// store's record of the upload): a raw file changed on disk fails.
	SHA256 string
	// Skip, when set, says why the input is listed but not read (an upload
	// the collect server could not parse); it shows in the inputs table.
	Skip   string
	Header report.Header // for a skipped input: what the store knows
}

// Files makes inputs of paths on disk.
func Files(paths ...string) []Input {
	in := make([]Input, len(paths))
	for i, p := range paths {
		in[i] = Input{Name: p, Open: func() (io.ReadCloser, error) { return os.Open(p) }}
	}
	return in
}

// Analyze streams every input through every section. Any unreadable input
// fails the whole report with an *InputError naming file and line.
func Analyze(inputs []Input) (*Report, error) {
	return AnalyzeSeq(slices.Values(inputs), nil, Options{Source: "files"})
}

// AnalyzeSeq is Analyze over inputs produced one at a time (a database
// query's pages), so a fleet's month is never listed whole; next's error,
// if any, ends the report. With opts.SkipBad, inputs must be iterable
// again: a bad run found midway is skipped from a new pass.
func AnalyzeSeq(inputs iter.Seq[Input], next func() error, opts Options) (*Report, error) {
	skip := map[string]string{}
	for {
		rep, bad, err := analyzeOnce(inputs, next, opts, skip)
		var rerr *runError
		if !opts.SkipBad || !errors.As(err, &rerr) {
			return rep, err
		}
		if len(skip) == maxSkipped {
			return nil, fmt.Errorf("more than %d runs cannot be read, the last %w", maxSkipped, rerr.err)
		}
		skip[bad] = rerr.err.Error()
	}
}

// SkippedUnreadable starts the Skipped reason of a run SkipBad left out.
const SkippedUnreadable = "cannot be read: "

// runError is a run that cannot be read (as opposed to its source failing).
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// Check reads one run through every section, fleet views too: nil means
// any report over it, alone or with others, can read it. A collector
// checks an upload with it before acknowledging it.
// each, when set, is called first with every record.
func Check(in Input, each func(Record) error) error {
	rep, err := AnalyzeSeq(slices.Values([]Input{in}), nil, Options{Fleet: true, each: each, noTables: true})
	if err != nil {
		var re *runError
		if errors.As(err, &re) {
			return re.err
		}
		return err
	}
	rep.Close()
	return nil
}

// skipName is how a skipped run is named in skip.
func skipName(in Input) string { return in.Name }

func analyzeOnce(inputs iter.Seq[Input], next func() error, opts Options, skip map[string]string) (*Report, string, error) {
	var secs []Section
	var names []string
	for _, e := range registry {
		s := e.new()
		if _, ok := s.(fleetOnly); ok && !opts.Fleet {
			continue
		}
		secs, names = append(secs, s), append(names, e.name)
	}
	rep := &Report{secs: secs}
	ok := false
	defer func() {
		if !ok {
			rep.Close()
		}
	}()
	used := map[typeKey]*typeUse{}
	seen := map[string]string{} // run id -> file
	skipped := 0
	for in := range inputs {
		if why, ok := skip[skipName(in)]; ok && in.Skip == "" {
			in.Skip = SkippedUnreadable + why
			skipped++
		}
		if in.Skip != "" {
			rep.Runs = append(rep.Runs, &Run{File: in.Name, SHA256: in.SHA256, Header: in.Header, Skipped: in.Skip})
			continue
		}
		rc, err := in.Open()
		if err != nil {
			return nil, "", &InputError{File: in.Name, Reason: err.Error()}
		}
		run, err := Read(in.Name, rc, func(rec Record) error {
			k := typeKey{rec.Run.Header.Command, rec.Type}
			u := used[k]
			if u == nil {
				u = &typeUse{}
				used[k] = u
				for i, s := range secs {
					if s.AppliesTo(k.command) && slices.Contains(s.Types(), k.typ) {
						u.secs = append(u.secs, s)
						u.names = append(u.names, names[i])
					}
				}
			}
			u.n++
			rec.memo = &memo{}
			if opts.each != nil {
				if err := opts.each(rec); err != nil {
					return err
				}
			}
			if len(u.secs) == 0 && !json.Valid(rec.Raw) {
				return errors.New("not JSON")
			}
			for _, s := range u.secs {
				if err := s.Add(rec); err != nil {
					return err
				}
			}
			return nil
		})
		rc.Close()
		if err != nil {
			return nil, skipName(in), &runError{err}
		}
		if run.Header.ProbeID == "" { // the store knows which probe uploaded it
			run.Header.ProbeID = in.Header.ProbeID
		}
		if in.SHA256 != "" && in.SHA256 != run.SHA256 {
			return nil, skipName(in), &runError{&InputError{File: in.Name, Reason: fmt.Sprintf("sha256 %s, the store recorded %s: the file changed after upload", run.SHA256, in.SHA256)}}
		}
		// A run given twice (copied, or once gzip'd) would count double.
		if prev, ok := seen[run.Header.RunID]; ok {
			return nil, skipName(in), &runError{&InputError{File: in.Name, Reason: fmt.Sprintf("run %s is already read from %s: a run counts once", run.Header.RunID, prev)}}
		}
		seen[run.Header.RunID] = run.File
		rep.Runs = append(rep.Runs, run)
		for _, s := range secs {
			if o, ok := s.(RunObserver); ok {
				o.EndRun(run)
			}
		}
		// Kept for provenance only from here: a fleet's thousands of runs
		// keep their ids, not their configs and addresses.
		run.Header.Config, run.Header.Host = nil, report.Host{}
		for i, p := range run.Header.Paths {
			run.Header.Paths[i] = report.Path{Name: p.Name}
		}
	}
	if next != nil {
		if err := next(); err != nil {
			return nil, "", err
		}
	}
	for _, s := range secs {
		if e, ok := s.(interface{ Err() error }); ok && e.Err() != nil {
			return nil, "", fmt.Errorf("spilling samples to disk: %w", e.Err())
		}
	}
	if opts.noTables {
		ok = true
		return rep, "", nil
	}
	// The answer first, what the sections found next, and what made the
	// report (provenance, inputs, records read) at the end.
	for _, s := range secs {
		for _, t := range s.Tables() {
			if t.Len() > 0 { // a table is present when its data is
				rep.Tables = append(rep.Tables, t)
			}
		}
		if p, ok := s.(Plotter); ok {
			for _, f := range p.Figures() {
				if len(f.Series) > 0 {
					rep.Figures = append(rep.Figures, f)
				}
			}
		}
	}
	if f := findingsTable(rep.Tables); f.Len() > 0 {
		rep.Tables = append([]Table{f}, rep.Tables...)
	}
	rep.Tables = append(rep.Tables, provenanceTable(rep.Runs, opts, skipped), inputsTable(rep.Runs), typesTable(used))
	ok = true
	return rep, "", nil
}

// provenanceTable says what made the report: the tool, the schema versions
// read, where the inputs came from and the filters that chose them (each
// input's sha256 is in the inputs table).
func provenanceTable(runs []*Run, o Options, skipped int) Table {
	t := Table{Name: "provenance", Title: "Provenance",
		Note:    "every input's sha256 is in the inputs table",
		Columns: []string{"key", "value"}}
	var versions []string
	for _, r := range runs {
		if !slices.Contains(versions, r.Header.SchemaVersion) {
			versions = append(versions, r.Header.SchemaVersion)
		}
	}
	sort.Strings(versions)
	tool := o.Tool
	if tool == "" {
		tool = "mptester"
	}
	filters := strings.Join(o.Filters, " ")
	if filters == "" {
		filters = "none"
	}
	t.Rows = [][]string{{"tool", tool}, {"source", cmpOr(o.Source, "files")}, {"filters", filters},
		{"inputs", fmt.Sprint(len(runs))}, {"schema_versions", strings.Join(versions, " ")}}
	if o.SkipBad || skipped > 0 {
		// Every input listed but not read (unparsed or unreadable), by run
		// id; the inputs table says why for each.
		var ids []string
		for _, r := range runs {
			if r.Skipped != "" {
				ids = append(ids, cmpOr(r.Header.RunID, r.File))
			}
		}
		v := fmt.Sprint(len(ids))
		if len(ids) > 0 {
			v += ": " + strings.Join(ids, " ")
		}
		t.Rows = append(t.Rows, []string{"skipped", v})
	}
	return t
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// inputsTable is the provenance every report carries.
func inputsTable(runs []*Run) Table {
	t := Table{Name: "inputs", Title: "Inputs",
		Note:    "sha256 of each file as stored; status is the trailer's (a stream without one did not finish writing)",
		Columns: []string{"file", "sha256", "form", "gzip", "schema", "command", "tool", "run_id", "probe_id", "status", "records"}}
	for _, r := range runs {
		status := string(r.Status)
		if r.Truncated {
			status = "truncated: " + r.TruncatedNote
		}
		if r.Skipped != "" {
			status = "not read: " + r.Skipped
		}
		t.Rows = append(t.Rows, []string{r.File, r.SHA256, r.Form, fmt.Sprint(r.Gzip), r.Header.SchemaVersion,
			r.Header.Command, r.Header.Tool.Name + " " + r.Header.Tool.Version, r.Header.RunID, r.Header.ProbeID, status, fmt.Sprint(r.Records)})
	}
	return t
}

type typeKey struct{ command, typ string }

type typeUse struct {
	n     int
	secs  []Section
	names []string
}

// typesTable says which records every section read and which none did, so
// nothing is left out unseen.
func typesTable(used map[typeKey]*typeUse) Table {
	t := Table{Name: "records", Title: "Records read",
		Note:    "records of a type no section reads are counted here and shown nowhere else",
		Columns: []string{"command", "type", "records", "read_by"}}
	keys := make([]typeKey, 0, len(used))
	for k := range used {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b typeKey) int {
		if a.command != b.command {
			return strings.Compare(a.command, b.command)
		}
		return strings.Compare(a.typ, b.typ)
	})
	for _, k := range keys {
		by := strings.Join(used[k].names, " ")
		if by == "" {
			by = "(none)"
		}
		t.Rows = append(t.Rows, []string{k.command, k.typ, fmt.Sprint(used[k].n), by})
	}
	return t
}

// decode unmarshals a record into v, naming the record type on failure.
func decode(rec Record, v any) error {
	if err := json.Unmarshal(rec.Raw, v); err != nil {
		return fmt.Errorf("bad %s record: %w", rec.Type, err)
	}
	return nil
}

// memo holds a record's decoded form, so sections reading the same type
// decode it once.
type memo struct {
	v   any
	err error
}

// decoded returns rec decoded into a *T, decoding at most once per record.
func decoded[T any](rec Record) (*T, error) {
	if rec.memo != nil && rec.memo.v != nil {
		if v, ok := rec.memo.v.(*T); ok {
			return v, rec.memo.err
		}
	}
	v := new(T)
	err := decode(rec, v)
	if rec.memo != nil {
		rec.memo.v, rec.memo.err = v, err
	}
	return v, err
}

// Quantile of sorted xs at p in [0,1], interpolating linearly between the
// closest ranks (numpy's default, as survey.Summary defines RTT stats).
func Quantile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := p * float64(len(sorted)-1)
	lo := int(pos)
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (pos-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// ECDF returns the exact empirical CDF of xs: each distinct value with the
// share of xs at or below it.
func ECDF(xs []float64) (vals, cdf []float64) {
	s := slices.Clone(xs)
	sort.Float64s(s)
	for i, v := range s {
		if i+1 < len(s) && s[i+1] == v {
			continue
		}
		vals = append(vals, v)
		cdf = append(cdf, float64(i+1)/float64(len(s)))
	}
	return vals, cdf
}

func ms(v float64) string { return fmt.Sprintf("%.3f", v) }
func pct(n, of int) string {
	if of == 0 {
		return "0.00"
	}
	return fmt.Sprintf("%.2f", 100*float64(n)/float64(of))
}

// pathNames are the run's paths as its header lists them.
func (r *Run) pathNames() []string {
	names := make([]string, len(r.Header.Paths))
	for i, p := range r.Header.Paths {
		names[i] = p.Name
	}
	return names
}

// pathOrder sorts names by their position in the run's header paths, then
// by name for paths the header does not list.
func pathOrder(order []string, names []string) {
	idx := func(n string) int {
		if i := slices.Index(order, n); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(names, func(a, b string) int {
		if d := idx(a) - idx(b); d != 0 {
			return d
		}
		if a < b {
			return -1
		}
		if a > b {
			return 1
		}
		return 0
	})
}
