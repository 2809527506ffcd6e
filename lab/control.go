package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/mptester/mptester/lab/emu"
)

// The control socket speaks one JSON request and one JSON response per
// connection.

// Request to a running lab.
type Request struct {
	Op   string   `json:"op"` // "set", "status", "scenario", "down"
	Path string   `json:"path,omitempty"`
	Args []string `json:"args,omitempty"`
}

// Response of a running lab.
type Response struct {
	OK     bool    `json:"ok"`
	Error  string  `json:"error,omitempty"`
	Status *Status `json:"status,omitempty"`
}

// Controller is what the control socket drives (a *Lab).
type Controller interface {
	Set(path string, c emu.Change) error
	Status() Status
}

// Impairer is a Controller that plants impairments (a *Lab).
type Impairer interface {
	Impair(path string, c ImpairChange) error
}

// ErrNotRunning: no lab answers on the control socket.
var ErrNotRunning = errors.New("lab is not running")

// ServeControl answers requests on unix socket sock until ctx is done.
// down is called (once) for a "down" request, after the response is sent.
func ServeControl(ctx context.Context, sock string, c Controller, down func()) error {
	ln, err := ListenControl(sock)
	if err != nil {
		return err
	}
	return ServeControlOn(ctx, ln, c, down)
}

// ListenControl creates the control socket (replacing a stale one), so
// clients can connect as soon as it returns.
func ListenControl(sock string) (net.Listener, error) {
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// ServeControlOn serves requests on ln (from ListenControl) until ctx is
// done, then closes ln and removes the socket file.
func ServeControlOn(ctx context.Context, ln net.Listener, c Controller, down func()) error {
	sock := ln.Addr().String()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	defer os.Remove(sock)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			var req Request
			if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&req); err != nil {
				_ = json.NewEncoder(conn).Encode(Response{Error: "bad request: " + err.Error()})
				return
			}
			resp := handle(c, req)
			_ = json.NewEncoder(conn).Encode(resp)
			if req.Op == "down" && resp.OK && down != nil {
				down()
			}
		}()
	}
}

func handle(c Controller, req Request) Response {
	switch req.Op {
	case "status":
		s := c.Status()
		return Response{OK: true, Status: &s}
	case "set":
		ch, ic, err := ParseSettings(req.Args)
		if err != nil {
			return Response{Error: err.Error()}
		}
		if !ic.IsZero() {
			im, ok := c.(Impairer)
			if !ok {
				return Response{Error: "set: this lab takes no impairments"}
			}
			if err := im.Impair(req.Path, ic); err != nil {
				return Response{Error: err.Error()}
			}
		}
		if err := c.Set(req.Path, ch); err != nil {
			return Response{Error: err.Error()}
		}
		s := c.Status()
		return Response{OK: true, Status: &s}
	case "scenario":
		sc, ok := c.(interface{ StartScenario(string) error })
		if !ok || len(req.Args) != 1 {
			return Response{Error: "scenario: want one scenario name on a running lab"}
		}
		if err := sc.StartScenario(req.Args[0]); err != nil {
			return Response{Error: err.Error()}
		}
		s := c.Status()
		return Response{OK: true, Status: &s}
	case "down":
		return Response{OK: true}
	}
	return Response{Error: fmt.Sprintf("unknown op %q", req.Op)}
}

// Control sends one request to the lab listening on sock.
func Control(ctx context.Context, sock string, req Request) (Response, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return Response{}, fmt.Errorf("%w (%s): %v", ErrNotRunning, sock, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return Response{}, err
	}
	var resp Response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		return Response{}, fmt.Errorf("control response: %w", err)
	}
	if !resp.OK {
		return resp, errors.New(resp.Error)
	}
	return resp, nil
}

// ReadInfo reads lab.json from a lab directory.
func ReadInfo(dir string) (Info, error) {
	var i Info
	b, err := os.ReadFile(FilesIn(dir).LabJSON)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return i, fmt.Errorf("%w: no %s", ErrNotRunning, FilesIn(dir).LabJSON)
		}
		return i, err
	}
	if err := json.Unmarshal(b, &i); err != nil {
		return i, fmt.Errorf("%s: %w", FilesIn(dir).LabJSON, err)
	}
	return i, nil
}
