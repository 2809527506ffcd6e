package cmdutil

import (
	"fmt"
	"strings"

	"github.com/mptester/mptester/internal/config"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/survey"
)

// CheckConfig validates the config values that name things in the
// measuring packages' registries; the root command passes it to
// config.Load so that every command checks them at load.
func CheckConfig(c *config.Config, check func(key string, err error)) {
	check("survey.method", Method(c.Survey.Method))
	check("run.patterns", Patterns(c.Run.Patterns))
	check("run.transports", Transports(c.Run.Transports))
	check("run.pin", Pin(c.Run.Pin))
}

// Method checks a survey probe method name.
func Method(s string) error {
	if _, ok := survey.Methods[s]; !ok {
		return fmt.Errorf("unknown method %q (want one of %s)", s, strings.Join(survey.MethodNames(), ", "))
	}
	return nil
}

// Patterns checks names in the pattern registry, without duplicates.
func Patterns(names []string) error {
	for _, n := range names {
		if _, err := patterns.Get(n); err != nil {
			return err
		}
	}
	return config.Unique(names)
}

// Transports checks names in the transport registry, without duplicates.
func Transports(names []string) error {
	for _, n := range names {
		if _, err := transport.Get(n); err != nil {
			return err
		}
	}
	return config.Unique(names)
}

// Pin checks a SHA-256 certificate fingerprint.
func Pin(s string) error {
	_, err := transport.ParseFingerprint(s)
	return err
}
