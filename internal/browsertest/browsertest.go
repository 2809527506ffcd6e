// Package browsertest loads a page in a real headless chromium (Debian's
// package) and reports what a user's browser would see: console messages
// and exceptions, every network request, facts evaluated in the page, and
// screenshots. It speaks the DevTools protocol over --remote-debugging-pipe
// (fd 3 in, fd 4 out, NUL-terminated JSON) with the standard library only.
package browsertest

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Path finds chromium. Outside CI a missing browser skips the test with a
// message; under CI=true it fails it (.ci/run installs chromium).
func Path(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found: .ci/run installs it (apt-get install chromium)")
	}
	t.Skip("chromium not found: apt-get install chromium to run the headless-browser test")
	return ""
}

// Browser is one headless chromium process.
type Browser struct {
	// Headers are sent with every request of pages opened after they are
	// set (an Authorization header for a server's page).
	Headers map[string]string

	cmd     *exec.Cmd
	in      *os.File // we write commands
	out     *bufio.Reader
	mu      sync.Mutex
	nextID  int
	waiters map[int]chan message
	events  chan message
	readErr error
	done    chan struct{}
}

type message struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// Start runs chromium headless with a throwaway profile in dir.
func Start(ctx context.Context, chromium, dir string) (*Browser, error) {
	// fd 3: chromium reads our commands; fd 4: it writes replies and events.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--disable-gpu", "--no-sandbox",
		"--remote-debugging-pipe", "--user-data-dir="+dir, "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--disable-sync", "--disable-component-update",
		"--disable-default-apps", "--mute-audio", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, evW}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	cmdR.Close()
	evW.Close()
	b := &Browser{cmd: cmd, in: cmdW, out: bufio.NewReaderSize(evR, 1<<20), waiters: map[int]chan message{},
		events: make(chan message, 4096), done: make(chan struct{})}
	go b.read()
	return b, nil
}

func (b *Browser) read() {
	defer close(b.done)
	for {
		line, err := b.out.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.readErr = err
			for _, w := range b.waiters {
				close(w)
			}
			b.waiters = map[int]chan message{}
			b.mu.Unlock()
			close(b.events)
			return
		}
		var m message
		if err := json.Unmarshal(line[:len(line)-1], &m); err != nil {
			continue
		}
		if m.ID != 0 {
			b.mu.Lock()
			w := b.waiters[m.ID]
			delete(b.waiters, m.ID)
			b.mu.Unlock()
			if w != nil {
				w <- m
			}
			continue
		}
		select {
		case b.events <- m:
		default: // a page flooding events: the test reads what it needs
		}
	}
}

// Call sends one command (in session sid, "" for the browser) and waits
// for its reply.
func (b *Browser) Call(ctx context.Context, sid, method string, params any, result any) error {
	if params == nil {
		params = struct{}{}
	}
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	w := make(chan message, 1)
	b.waiters[id] = w
	b.mu.Unlock()
	msg, _ := json.Marshal(message{ID: id, Method: method, SessionID: sid, Params: p})
	if _, err := b.in.Write(append(msg, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-w:
		if !ok {
			return fmt.Errorf("%s: browser closed the pipe: %v", method, b.readErr)
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if result != nil {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Close ends the browser.
func (b *Browser) Close() error {
	_ = b.Call(context.Background(), "", "Browser.close", nil, nil)
	b.in.Close()
	<-b.done
	return b.cmd.Wait()
}

// Page is what loading a URL showed.
type Page struct {
	Console  []string // console messages of level error or warning, exceptions, log entries of level error
	Requests []string // every request the page made (the page's own URL excluded)
	sid      string
	b        *Browser
}

// Open attaches to a new tab, starts recording console and network, sets
// the viewport (width x height CSS pixels, dark or light colour scheme),
// navigates to url and waits for its load event.
func (b *Browser) Open(ctx context.Context, url string, width, height int, dark bool) (*Page, error) {
	var tgt struct {
		TargetID string `json:"targetId"`
	}
	if err := b.Call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &tgt); err != nil {
		return nil, err
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.Call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": tgt.TargetID, "flatten": true}, &att); err != nil {
		return nil, err
	}
	p := &Page{sid: att.SessionID, b: b}
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable", "Network.enable"} {
		if err := b.Call(ctx, p.sid, m, nil, nil); err != nil {
			return nil, err
		}
	}
	if len(b.Headers) > 0 {
		if err := b.Call(ctx, p.sid, "Network.setExtraHTTPHeaders", map[string]any{"headers": b.Headers}, nil); err != nil {
			return nil, err
		}
	}
	if err := b.Call(ctx, p.sid, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}, nil); err != nil {
		return nil, err
	}
	scheme := "light"
	if dark {
		scheme = "dark"
	}
	if err := b.Call(ctx, p.sid, "Emulation.setEmulatedMedia", map[string]any{
		"features": []map[string]string{{"name": "prefers-color-scheme", "value": scheme}}}, nil); err != nil {
		return nil, err
	}
	if err := b.Call(ctx, p.sid, "Page.navigate", map[string]any{"url": url}, nil); err != nil {
		return nil, err
	}
	for {
		select {
		case m, ok := <-b.events:
			if !ok {
				return nil, errors.New("browser exited before the page loaded")
			}
			if m.SessionID != p.sid {
				continue
			}
			p.record(m, url)
			if m.Method == "Page.loadEventFired" {
				return p, p.drain(ctx, url)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("loading %s: %w", url, ctx.Err())
		}
	}
}

// drain collects what arrived up to a round trip after load (a late
// console message or request is ordered before the reply).
func (p *Page) drain(ctx context.Context, url string) error {
	var v any
	if err := p.Eval(ctx, "new Promise(r => requestAnimationFrame(() => setTimeout(() => r(1), 50)))", &v); err != nil {
		return err
	}
	for {
		select {
		case m, ok := <-p.b.events:
			if !ok {
				return nil
			}
			if m.SessionID == p.sid {
				p.record(m, url)
			}
		default:
			return nil
		}
	}
}

func (p *Page) record(m message, url string) {
	switch m.Method {
	case "Runtime.consoleAPICalled":
		var e struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		if json.Unmarshal(m.Params, &e) == nil && (e.Type == "error" || e.Type == "warning" || e.Type == "assert") {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, fmt.Sprint(a.Value, a.Description))
			}
			p.Console = append(p.Console, "console."+e.Type+": "+strings.Join(parts, " "))
		}
	case "Runtime.exceptionThrown":
		p.Console = append(p.Console, "exception: "+string(m.Params))
	case "Log.entryAdded":
		var e struct {
			Entry struct {
				Level  string `json:"level"`
				Source string `json:"source"`
				Text   string `json:"text"`
			} `json:"entry"`
		}
		if json.Unmarshal(m.Params, &e) == nil && (e.Entry.Level == "error" || e.Entry.Level == "warning") {
			p.Console = append(p.Console, "log "+e.Entry.Level+" ("+e.Entry.Source+"): "+e.Entry.Text)
		}
	case "Network.requestWillBeSent":
		var e struct {
			Request struct {
				URL string `json:"url"`
			} `json:"request"`
		}
		if json.Unmarshal(m.Params, &e) == nil && e.Request.URL != url {
			p.Requests = append(p.Requests, e.Request.URL)
		}
	}
}

// Eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its JSON value into v.
func (p *Page) Eval(ctx context.Context, expr string, v any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := p.b.Call(ctx, p.sid, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("evaluate: %s", r.Exception.Text)
	}
	return json.Unmarshal(r.Result.Value, v)
}

// Screenshot returns a PNG of the whole page (beyond the viewport).
func (p *Page) Screenshot(ctx context.Context) ([]byte, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := p.b.Call(ctx, p.sid, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

// ArtifactDir is $ARTIFACTS when set (CI keeps it), else the test's TempDir.
func ArtifactDir(t testing.TB) string {
	if d := os.Getenv("ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d
		}
	}
	return t.TempDir()
}
