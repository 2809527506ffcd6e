package api

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schedule is a probe's fleet schedule: what to measure and how often.
// The server sets Revision; `mptester agent` runs it. A task is a
// measurement definition with typed, bounded parameters
// (schema/schedule.schema.json): nothing in it names a file on the probe
// or overrides a safety check, and its results always go to the spool.
type Schedule struct {
	Revision int64        `json:"revision"`
	Tasks    []Task       `json:"tasks"`
	Upload   UploadPolicy `json:"upload,omitzero"`
	// Serial and Probe are set by the fleet operator in a signed
	// schedule's payload (Signed holds it as signed).
	Serial int64      `json:"serial,omitempty"`
	Probe  string     `json:"probe,omitempty"`
	Signed *Signature `json:"signed,omitempty"`
}

// Signature is a schedule signed with the fleet operator's Ed25519 key
// (kept offline): Payload is the schedule's JSON exactly as signed.
type Signature struct {
	Payload []byte `json:"payload"`
	Sig     []byte `json:"sig"`
}

// UploadPolicy is when and how the agent uploads the spool: at most once
// per Every (0: after every pass of the agent), only inside Windows (as a
// task's; none: any time), bound to the interface Path when set (keep
// uploads off a metered LTE path: it overrides the config's upload.path).
type UploadPolicy struct {
	Every   Duration `json:"every,omitempty"`
	Windows []string `json:"windows,omitempty"`
	Path    string   `json:"path,omitempty"`
}

// Due says whether an upload is due at now after the last one (zero:
// never uploaded).
func (p UploadPolicy) Due(now, last time.Time) bool {
	return inWindows(p.Windows, now) && (p.Every == 0 || last.IsZero() || !now.Before(last.Add(time.Duration(p.Every))))
}

// Measurement types a task may name.
const (
	TypeSurvey = "survey"
	TypeRun    = "run"
)

// Task is one measurement run every Every plus a uniform random Spread (so
// a fleet does not measure in lockstep), only inside Windows ("HH:MM-HH:MM"
// UTC; none: any time). Type says which of Survey and Run holds its
// parameters; a zero parameter is the measuring command's default.
type Task struct {
	Name    string        `json:"name"`
	Type    string        `json:"type"`
	Every   Duration      `json:"every"`
	Spread  Duration      `json:"spread,omitempty"`
	Windows []string      `json:"windows,omitempty"`
	Survey  *SurveyParams `json:"survey,omitempty"`
	Run     *RunParams    `json:"run,omitempty"`
}

// SurveyParams are the parameters of a survey (mptester survey).
type SurveyParams struct {
	// Domains are surveyed in order (the agent writes them as the list);
	// else ListID names a Tranco list the probe downloads.
	Domains    []string `json:"domains,omitempty"`
	ListID     string   `json:"list_id,omitempty"`
	Top        int      `json:"top,omitempty"`
	Paths      []string `json:"paths,omitempty"`
	Family     string   `json:"family,omitempty"`
	Method     string   `json:"method,omitempty"`
	Port       int      `json:"port,omitempty"`
	Count      int      `json:"count,omitempty"`
	Timeout    Duration `json:"timeout,omitempty"`
	Spacing    Duration `json:"spacing,omitempty"`
	Rate       float64  `json:"rate,omitempty"`
	DNSTimeout Duration `json:"dns_timeout,omitempty"`
	DNSRetries *int     `json:"dns_retries,omitempty"`
}

// RunParams are the parameters of a pattern run (mptester run).
type RunParams struct {
	Servers        []string       `json:"servers"`
	Ports          map[string]int `json:"ports,omitempty"` // transport (tcp, quic, mpquic) -> port
	QUICAltPort    *int           `json:"quic_alt_port,omitempty"`
	Patterns       []string       `json:"patterns,omitempty"`
	Transports     []string       `json:"transports,omitempty"`
	Paths          []string       `json:"paths,omitempty"`
	Backup         []string       `json:"backup,omitempty"`
	Family         string         `json:"family,omitempty"`
	Pin            string         `json:"pin,omitempty"`
	Insecure       bool           `json:"insecure,omitempty"`
	ServerName     string         `json:"server_name,omitempty"`
	HTTP1          bool           `json:"http1,omitempty"`
	Mode           string         `json:"mode,omitempty"`
	Size           int64          `json:"size,omitempty"`
	Duration       Duration       `json:"duration,omitempty"`
	ChunkSize      int            `json:"chunk_size,omitempty"`
	Interval       Duration       `json:"interval,omitempty"`
	PingCount      int            `json:"ping_count,omitempty"`
	IperfDirection string         `json:"iperf_direction,omitempty"`
	Pace           *Duration      `json:"pace,omitempty"`
	Timeout        Duration       `json:"timeout,omitempty"`
	ConnectTimeout Duration       `json:"connect_timeout,omitempty"`
	Seed           int64          `json:"seed,omitempty"`
	Stable         *bool          `json:"stable,omitempty"`
	Capture        *bool          `json:"capture,omitempty"`
	Grace          Duration       `json:"grace,omitempty"`
}

// Paths are the interfaces a task names (none: the command's default).
func (t Task) Paths() []string {
	switch {
	case t.Survey != nil:
		return t.Survey.Paths
	case t.Run != nil:
		return slices.Concat(t.Run.Paths, t.Run.Backup)
	}
	return nil
}

// Duration is a time.Duration written as "6h30m" in JSON.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"6h\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

//go:embed schema/schedule.schema.json
var schemaFS embed.FS

// ScheduleSchemaID is the $id of the published schedule schema (embedded,
// never fetched; GET /v1/schedule.schema.json serves it).
const ScheduleSchemaID = "https://github.com/mptester/mptester/collect/api/schema/schedule.schema.json"

// ScheduleSchema is the JSON Schema every schedule is checked against.
func ScheduleSchema() []byte {
	b, _ := schemaFS.ReadFile("schema/schedule.schema.json")
	return b
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema %s is not embedded", url)
}

var schedSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ScheduleSchema()))
	if err != nil {
		return nil, err
	}
	if err := c.AddResource(ScheduleSchemaID, doc); err != nil {
		return nil, err
	}
	return c.Compile(ScheduleSchemaID)
})

// ErrInvalid marks a schedule or task that fails its checks; the message
// names the field ("tasks[1] (patterns): run.rate: ...").
var ErrInvalid = errors.New("invalid schedule")

// FieldError is one refused field of a schedule.
type FieldError struct {
	Task   string // the task's name ("" for the schedule itself)
	Field  string // "tasks[1].run.servers[0]"
	Reason string
}

func (e *FieldError) Error() string {
	s := "schedule: " + e.Field
	if e.Task != "" {
		s += " (task " + e.Task + ")"
	}
	return s + ": " + e.Reason
}

func (e *FieldError) Unwrap() error { return ErrInvalid }

// Refusal is a task the probe did not run: its name, the schedule revision
// and why (a check of the schedule, an owner's cap, or the data budget).
type Refusal struct {
	Task     string    `json:"task"`
	Revision int64     `json:"revision"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
	// Budget is set when the task was skipped for the data budget (it runs
	// again when the budget allows), not refused for what it asks.
	Budget bool `json:"budget,omitempty"`
}

// ParseSchedule decodes and checks a schedule strictly: the first bad task
// is the error (the collector refuses such a schedule with 400).
func ParseSchedule(b []byte) (Schedule, error) {
	s, bad, err := ParseScheduleTasks(b)
	if err != nil {
		return Schedule{}, err
	}
	if len(bad) > 0 {
		return Schedule{}, bad[0]
	}
	return s, nil
}

// ParseScheduleTasks decodes a schedule and checks each task on its own:
// the good ones are in s.Tasks, the others come back as errors naming the
// task and field (the agent runs the good ones and reports the others). An
// error about the schedule as a whole is err.
func ParseScheduleTasks(b []byte) (s Schedule, bad []*FieldError, err error) {
	var outer struct {
		Revision int64      `json:"revision"`
		Signed   *Signature `json:"signed"`
	}
	if json.Unmarshal(b, &outer) == nil && outer.Signed != nil {
		if fe := validate(b, "", ""); fe != nil {
			return Schedule{}, nil, fe
		}
		s, bad, err := parseUnsigned(outer.Signed.Payload)
		if err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				fe.Field = "signed.payload: " + fe.Field
			}
			return Schedule{}, nil, err
		}
		s.Revision, s.Signed = outer.Revision, outer.Signed
		return s, bad, nil
	}
	return parseUnsigned(b)
}

func parseUnsigned(b []byte) (s Schedule, bad []*FieldError, err error) {
	var raw struct {
		Revision json.RawMessage   `json:"revision"`
		Tasks    []json.RawMessage `json:"tasks"`
		Upload   json.RawMessage   `json:"upload"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Schedule{}, nil, fmt.Errorf("schedule: %w: %w", ErrInvalid, err)
	}
	// The envelope without its tasks, then each task alone.
	var top map[string]json.RawMessage
	_ = json.Unmarshal(b, &top)
	delete(top, "tasks")
	env, _ := json.Marshal(top)
	if fe := validate(env, "", ""); fe != nil {
		return Schedule{}, nil, fe
	}
	if err := strictDecode(env, &s); err != nil {
		return Schedule{}, nil, &FieldError{Field: "schedule", Reason: err.Error()}
	}
	if s.Signed != nil {
		return Schedule{}, nil, &FieldError{Field: "signed", Reason: "a signed payload cannot hold another"}
	}
	if fe := checkUpload(s.Upload); fe != nil {
		return Schedule{}, nil, fe
	}
	if len(raw.Tasks) > MaxTasks {
		// The schema's maxItems, which the per-task checks below never see:
		// a probe runs (and reports) at most this many.
		return Schedule{}, nil, &FieldError{Field: "tasks", Reason: fmt.Sprintf("%d tasks, at most %d", len(raw.Tasks), MaxTasks)}
	}
	seen := map[string]bool{}
	for i, rt := range raw.Tasks {
		t, fe := parseTask(rt, i)
		if fe == nil && seen[t.Name] {
			fe = &FieldError{Task: t.Name, Field: fmt.Sprintf("tasks[%d].name", i), Reason: "a unique name is required"}
		}
		if fe != nil {
			// Bounded: the probe logs, keeps and reports each one.
			fe.Task, fe.Field, fe.Reason = clip(fe.Task, 64), clip(fe.Field, 256), clip(fe.Reason, 512)
			bad = append(bad, fe)
			continue
		}
		seen[t.Name] = true
		s.Tasks = append(s.Tasks, t)
	}
	return s, bad, nil
}

func parseTask(rt json.RawMessage, i int) (Task, *FieldError) {
	at := fmt.Sprintf("tasks[%d]", i)
	var peek struct {
		Name    string          `json:"name"`
		Command json.RawMessage `json:"command"`
	}
	_ = json.Unmarshal(rt, &peek)
	if peek.Command != nil {
		// Written before tasks were typed: migrate what maps onto a typed
		// parameter, refuse the rest.
		m, fe := migrateLegacy(rt, at, peek.Name)
		if fe != nil {
			return Task{}, fe
		}
		rt = m
	}
	wrapped, _ := json.Marshal(map[string]any{"tasks": []json.RawMessage{rt}})
	if fe := validate(wrapped, at, peek.Name); fe != nil {
		return Task{}, fe
	}
	var t Task
	if err := strictDecode(rt, &t); err != nil {
		return Task{}, &FieldError{Task: peek.Name, Field: at, Reason: err.Error()}
	}
	if fe := checkTask(t, at); fe != nil {
		return Task{}, fe
	}
	return t, nil
}

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

var printer = message.NewPrinter(language.English)

// validate checks doc against the schema; the error names the deepest
// failing field, with tasks[0] renamed to at.
func validate(doc []byte, at, task string) *FieldError {
	sch, err := schedSchema()
	if err != nil {
		return &FieldError{Field: "schedule", Reason: "schema: " + err.Error()}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &FieldError{Field: "schedule", Reason: "not JSON: " + err.Error()}
	}
	err = sch.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		if err != nil {
			return &FieldError{Field: "schedule", Reason: err.Error()}
		}
		return nil
	}
	leaf := deepest(ve)
	return &FieldError{Task: task, Field: fieldName(leaf.InstanceLocation, at), Reason: leaf.ErrorKind.LocalizedString(printer)}
}

// deepest is the first leaf with the longest instance location: the most
// specific reason (oneOf/allOf wrappers say less).
func deepest(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	best := e
	for _, c := range e.Causes {
		if d := deepest(c); len(d.InstanceLocation) > len(best.InstanceLocation) || len(best.Causes) > 0 && len(d.InstanceLocation) == len(best.InstanceLocation) {
			best = d
		}
	}
	return best
}

// fieldName turns ["tasks","0","run","rate"] into "tasks[0].run.rate".
func fieldName(loc []string, at string) string {
	var sb strings.Builder
	for i := 0; i < len(loc); i++ {
		if i == 0 && loc[0] == "tasks" && len(loc) > 1 && at != "" {
			sb.WriteString(at)
			i++
			continue
		}
		if _, err := strconv.Atoi(loc[i]); err == nil && i > 0 {
			sb.WriteString("[" + loc[i] + "]")
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(loc[i])
	}
	if sb.Len() == 0 {
		if at != "" {
			return at
		}
		return "schedule"
	}
	return sb.String()
}

// checkTask: what the schema cannot say.
// MaxTasks is the most tasks a schedule holds (the schema's maxItems).
const MaxTasks = 64

// Bounds of a task's durations: every and spread at most MaxEvery, a
// survey's per-probe and DNS waits at most MaxWait, a run's at most
// MaxRunWait (the owner's max_duration is usually far lower).
const (
	MaxEvery   = Duration(31 * 24 * time.Hour)
	MaxWait    = Duration(10 * time.Minute)
	MaxRunWait = Duration(time.Hour)
)

// clip cuts s to at most n bytes (a valid UTF-8 prefix), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = strings.ToValidUTF8(s[:n], "")
	return s + "..."
}

func checkTask(t Task, at string) *FieldError {
	bad := func(field, reason string, args ...any) *FieldError {
		return &FieldError{Task: t.Name, Field: at + "." + field, Reason: fmt.Sprintf(reason, args...)}
	}
	switch {
	case t.Every < Duration(time.Minute):
		return bad("every", "must be at least 1m")
	case t.Every > MaxEvery:
		return bad("every", "must be at most %v", time.Duration(MaxEvery))
	case t.Spread < 0:
		return bad("spread", "negative")
	case t.Spread > MaxEvery:
		return bad("spread", "must be at most %v", time.Duration(MaxEvery))
	}
	for i, w := range t.Windows {
		if _, _, err := ParseWindow(w); err != nil {
			return bad(fmt.Sprintf("windows[%d]", i), "%v", err)
		}
	}
	if t.Type == TypeSurvey && t.Survey == nil {
		t.Survey = &SurveyParams{}
	}
	if p := t.Survey; p != nil {
		for _, f := range []struct {
			name string
			d    Duration
		}{{"timeout", p.Timeout}, {"spacing", p.Spacing}, {"dns_timeout", p.DNSTimeout}} {
			if f.d < 0 {
				return bad("survey."+f.name, "negative")
			}
			if f.d > MaxWait {
				return bad("survey."+f.name, "must be at most %v", time.Duration(MaxWait))
			}
		}
	}
	if p := t.Run; p != nil {
		pace := Duration(0)
		if p.Pace != nil {
			pace = *p.Pace
		}
		for _, f := range []struct {
			name string
			d    Duration
		}{{"duration", p.Duration}, {"interval", p.Interval}, {"timeout", p.Timeout}, {"connect_timeout", p.ConnectTimeout}, {"grace", p.Grace}, {"pace", pace}} {
			if f.d < 0 {
				return bad("run."+f.name, "negative")
			}
			if f.d > MaxRunWait {
				return bad("run."+f.name, "must be at most %v", time.Duration(MaxRunWait))
			}
		}
	}
	return nil
}

func checkUpload(u UploadPolicy) *FieldError {
	if u.Every < 0 {
		return &FieldError{Field: "upload.every", Reason: "negative every"}
	}
	for i, w := range u.Windows {
		if _, _, err := ParseWindow(w); err != nil {
			return &FieldError{Field: fmt.Sprintf("upload.windows[%d]", i), Reason: err.Error()}
		}
	}
	return nil
}

// ParseWindow parses "HH:MM-HH:MM" (UTC; may wrap midnight) into minutes
// of the day.
func ParseWindow(w string) (from, to int, err error) {
	a, b, ok := strings.Cut(w, "-")
	if !ok {
		return 0, 0, fmt.Errorf("window %q: want HH:MM-HH:MM", w)
	}
	parse := func(s string) (int, error) {
		t, err := time.Parse("15:04", strings.TrimSpace(s))
		if err != nil {
			return 0, errors.New("want HH:MM")
		}
		return t.Hour()*60 + t.Minute(), nil
	}
	if from, err = parse(a); err == nil {
		to, err = parse(b)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("window %q: %w", w, err)
	}
	return from, to, nil
}

// InWindows says whether t (UTC) falls in any window; no windows: always.
func (t Task) InWindows(now time.Time) bool { return inWindows(t.Windows, now) }

func inWindows(windows []string, now time.Time) bool {
	if len(windows) == 0 {
		return true
	}
	m := now.UTC().Hour()*60 + now.UTC().Minute()
	for _, w := range windows {
		from, to, err := ParseWindow(w)
		if err != nil {
			continue
		}
		if (from <= to && m >= from && m < to) || (from > to && (m >= from || m < to)) {
			return true
		}
	}
	return false
}
