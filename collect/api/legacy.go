package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A legacy task ({"command": ..., "args": [...]}, stored before tasks were
// typed) is migrated when every flag maps onto a typed parameter; any
// other flag (an output or profile file, a list, config or resume file, a
// safety override) refuses the task, naming the flag.
type legacyFlag struct {
	key  string // parameter; "ports.tcp" nests
	kind byte   // s string, i int, f float, d duration, b bool, l comma list
}

var legacyFlags = map[string]map[string]legacyFlag{
	TypeSurvey: {
		"list-id": {"list_id", 's'}, "top": {"top", 'i'}, "paths": {"paths", 'l'}, "family": {"family", 's'},
		"method": {"method", 's'}, "port": {"port", 'i'}, "count": {"count", 'i'}, "timeout": {"timeout", 'd'},
		"spacing": {"spacing", 'd'}, "rate": {"rate", 'f'}, "dns-timeout": {"dns_timeout", 'd'}, "dns-retries": {"dns_retries", 'i'},
	},
	TypeRun: {
		"server": {"servers", 'l'}, "patterns": {"patterns", 'l'}, "transports": {"transports", 'l'}, "paths": {"paths", 'l'},
		"backup": {"backup", 'l'}, "family": {"family", 's'}, "pin": {"pin", 's'}, "insecure": {"insecure", 'b'},
		"server-name": {"server_name", 's'}, "http1": {"http1", 'b'}, "mode": {"mode", 's'}, "size": {"size", 'i'},
		"duration": {"duration", 'd'}, "chunk-size": {"chunk_size", 'i'}, "interval": {"interval", 'd'}, "ping-count": {"ping_count", 'i'},
		"iperf-direction": {"iperf_direction", 's'}, "pace": {"pace", 'd'}, "timeout": {"timeout", 'd'},
		"connect-timeout": {"connect_timeout", 'd'}, "seed": {"seed", 'i'}, "stable": {"stable", 'b'}, "capture": {"capture", 'b'},
		"grace": {"grace", 'd'}, "tcp-port": {"ports.tcp", 'i'}, "quic-port": {"ports.quic", 'i'}, "mpquic-port": {"ports.mpquic", 'i'},
		"quic-alt-port": {"quic_alt_port", 'i'},
	},
}

func migrateLegacy(rt json.RawMessage, at, name string) (json.RawMessage, *FieldError) {
	var old struct {
		Name    string          `json:"name"`
		Command string          `json:"command"`
		Args    []string        `json:"args"`
		Every   json.RawMessage `json:"every"`
		Spread  json.RawMessage `json:"spread"`
		Windows json.RawMessage `json:"windows"`
	}
	if err := strictDecode(rt, &old); err != nil {
		return nil, &FieldError{Task: name, Field: at, Reason: err.Error()}
	}
	table, ok := legacyFlags[old.Command]
	if !ok {
		return nil, &FieldError{Task: name, Field: at + ".command", Reason: fmt.Sprintf("%q (want survey or run)", old.Command)}
	}
	params := map[string]any{}
	for i := 0; i < len(old.Args); i++ {
		a := old.Args[i]
		field := fmt.Sprintf("%s.args[%d]", at, i)
		if !strings.HasPrefix(a, "--") {
			return nil, &FieldError{Task: name, Field: field, Reason: fmt.Sprintf("%q is not a schedule parameter (tasks are typed now; results go to the spool)", a)}
		}
		flag, val, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if flag == "no-upload" {
			continue
		}
		f, ok := table[flag]
		if !ok {
			return nil, &FieldError{Task: name, Field: field, Reason: fmt.Sprintf("--%s is not a parameter a schedule may set (tasks are typed now: no files, no safety overrides; results go to the spool)", flag)}
		}
		if !hasVal && f.kind == 'b' {
			val = "true"
		} else if !hasVal {
			if i+1 >= len(old.Args) {
				return nil, &FieldError{Task: name, Field: field, Reason: "--" + flag + " needs a value"}
			}
			i++
			val = old.Args[i]
		}
		var v any
		var err error
		switch f.kind {
		case 's', 'd':
			v = val
		case 'i':
			v, err = strconv.ParseInt(val, 10, 64)
		case 'f':
			v, err = strconv.ParseFloat(val, 64)
		case 'b':
			v, err = strconv.ParseBool(val)
		case 'l':
			var l []string
			if prev, ok := params[f.key].([]string); ok {
				l = prev
			}
			for _, s := range strings.Split(val, ",") {
				if s = strings.TrimSpace(s); s != "" {
					l = append(l, s)
				}
			}
			v = l
		}
		if err != nil {
			return nil, &FieldError{Task: name, Field: field, Reason: fmt.Sprintf("--%s %q: %v", flag, val, err)}
		}
		if outer, inner, nested := strings.Cut(f.key, "."); nested {
			m, _ := params[outer].(map[string]any)
			if m == nil {
				m = map[string]any{}
				params[outer] = m
			}
			m[inner] = v
		} else {
			params[f.key] = v
		}
	}
	t := map[string]any{"name": old.Name, "type": old.Command, "every": old.Every}
	if old.Every == nil {
		delete(t, "every")
	}
	if old.Spread != nil {
		t["spread"] = old.Spread
	}
	if old.Windows != nil {
		t["windows"] = old.Windows
	}
	if len(params) > 0 || old.Command == TypeRun {
		t[old.Command] = params
	}
	b, err := json.Marshal(t)
	if err != nil {
		return nil, &FieldError{Task: name, Field: at, Reason: err.Error()}
	}
	return b, nil
}
