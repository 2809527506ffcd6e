package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Schedule is a probe's fleet schedule: what to measure and how often.
// The server sets Revision; `mptester agent` runs it.
type Schedule struct {
	Revision int64        `json:"revision"`
	Tasks    []Task       `json:"tasks"`
	Upload   UploadPolicy `json:"upload,omitzero"`
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

// Task is one measuring command run every Every plus a uniform random
// Spread (so a fleet does not measure in lockstep), only inside Windows
// ("HH:MM-HH:MM" UTC; none: any time).
type Task struct {
	Name    string   `json:"name"`
	Command string   `json:"command"` // survey or run
	Args    []string `json:"args,omitempty"`
	Every   Duration `json:"every"`
	Spread  Duration `json:"spread,omitempty"`
	Windows []string `json:"windows,omitempty"`
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

// Commands a schedule may run.
var ScheduleCommands = map[string]bool{"survey": true, "run": true}

// ParseSchedule decodes and checks a schedule; errors name the task.
func ParseSchedule(b []byte) (Schedule, error) {
	var s Schedule
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Schedule{}, fmt.Errorf("schedule: %w", err)
	}
	seen := map[string]bool{}
	for i, t := range s.Tasks {
		switch {
		case t.Name == "" || seen[t.Name]:
			return Schedule{}, fmt.Errorf("schedule: task %d: a unique name is required", i)
		case !ScheduleCommands[t.Command]:
			return Schedule{}, fmt.Errorf("schedule: task %s: command %q (want survey or run)", t.Name, t.Command)
		case t.Every < Duration(time.Minute):
			return Schedule{}, fmt.Errorf("schedule: task %s: every must be at least 1m", t.Name)
		case t.Spread < 0:
			return Schedule{}, fmt.Errorf("schedule: task %s: negative spread", t.Name)
		}
		for _, w := range t.Windows {
			if _, _, err := ParseWindow(w); err != nil {
				return Schedule{}, fmt.Errorf("schedule: task %s: %w", t.Name, err)
			}
		}
		seen[t.Name] = true
	}
	switch {
	case s.Upload.Every < 0:
		return Schedule{}, fmt.Errorf("schedule: upload: negative every")
	case strings.ContainsAny(s.Upload.Path, " /\\"):
		return Schedule{}, fmt.Errorf("schedule: upload: path %q is not an interface name", s.Upload.Path)
	}
	for _, w := range s.Upload.Windows {
		if _, _, err := ParseWindow(w); err != nil {
			return Schedule{}, fmt.Errorf("schedule: upload: %w", err)
		}
	}
	return s, nil
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
