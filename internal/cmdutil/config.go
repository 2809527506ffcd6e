package cmdutil

import (
	"github.com/mptester/mptester/internal/certs"
	"github.com/mptester/mptester/internal/config"
	"github.com/mptester/mptester/patterns"
	"github.com/mptester/mptester/patterns/transport"
	"github.com/mptester/mptester/survey"
)

// ConfigChecks are the checks of every name a config file holds, each
// from the package that owns the names.
func ConfigChecks() config.Checks {
	return config.Checks{
		Transport: transport.CheckName,
		Listener:  transport.CheckListener,
		Pattern:   patterns.CheckName,
		Method:    survey.CheckMethod,
		Pin:       certs.CheckPin,
	}
}

// LoadConfig reads and checks a config file as every command does.
func LoadConfig(path string) (*config.Config, error) { return config.Load(path, ConfigChecks()) }

// ParseConfig checks a config file's bytes as every command does.
func ParseConfig(b []byte) (*config.Config, error) { return config.Parse(b, ConfigChecks()) }
