//go:build darwin

package nw

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// The bindings: Network.framework and libdispatch through purego (no cgo).
// Blocks are purego/objc blocks: NewBlock holds one reference, the
// framework copies what it keeps, and we drop ours right after the call.

const (
	networkPath = "/System/Library/Frameworks/Network.framework/Network"
	libSystem   = "/usr/lib/libSystem.B.dylib"
)

var (
	loadOnce sync.Once
	loadErr  error

	// Globals of the framework (extern blocks and contexts), read once.
	configureDisable, configureDefault  uintptr
	contextDefaultMessage, contextFinal uintptr
	tcpDefinition                       uintptr

	nw_endpoint_create_host                 func(host, port string) uintptr
	nw_endpoint_get_address                 func(ep uintptr) unsafe.Pointer
	nw_parameters_create_secure_tcp         func(tls, tcp uintptr) uintptr
	nw_parameters_set_multipath_service     func(p uintptr, s int32)
	nw_parameters_require_interface         func(p, iface uintptr)
	nw_parameters_prohibit_interface_type   func(p uintptr, t int32)
	nw_connection_create                    func(ep, p uintptr) uintptr
	nw_connection_set_queue                 func(c, q uintptr)
	nw_connection_set_state_changed_handler func(c uintptr, b objc.Block)
	nw_connection_start                     func(c uintptr)
	nw_connection_send                      func(c, data, ctx uintptr, complete bool, b objc.Block)
	nw_connection_receive                   func(c uintptr, min, max uint32, b objc.Block)
	nw_connection_cancel                    func(c uintptr)
	nw_connection_copy_current_path         func(c uintptr) uintptr
	nw_connection_access_establishment_rep  func(c, q uintptr, b objc.Block)
	nw_content_context_get_is_final         func(ctx uintptr) bool
	nw_path_get_status                      func(p uintptr) int32
	nw_path_enumerate_interfaces            func(p uintptr, b objc.Block)
	nw_path_copy_effective_local_endpoint   func(p uintptr) uintptr
	nw_path_copy_effective_remote_endpoint  func(p uintptr) uintptr
	nw_interface_get_type                   func(i uintptr) int32
	nw_interface_get_name                   func(i uintptr) string
	nw_interface_get_index                  func(i uintptr) uint32
	nw_error_get_error_domain               func(e uintptr) int32
	nw_error_get_error_code                 func(e uintptr) int32
	nw_path_monitor_create                  func() uintptr
	nw_path_monitor_set_queue               func(m, q uintptr)
	nw_path_monitor_set_update_handler      func(m uintptr, b objc.Block)
	nw_path_monitor_start                   func(m uintptr)
	nw_path_monitor_cancel                  func(m uintptr)
	nw_protocol_definition_is_equal         func(a, b uintptr) bool
	nw_protocol_copy_tcp_definition         func() uintptr
	nw_report_get_duration                  func(r uintptr) uint64
	nw_report_get_attempt_started_after     func(r uintptr) uint64
	nw_report_get_previous_attempt_count    func(r uintptr) uint32
	nw_report_get_used_proxy                func(r uintptr) bool
	nw_report_enumerate_protocols           func(r uintptr, b objc.Block)
	nw_retain                               func(o uintptr) uintptr
	nw_release                              func(o uintptr)

	dispatch_queue_create    func(label string, attr uintptr) uintptr
	dispatch_release         func(o uintptr)
	dispatch_data_create     func(buf unsafe.Pointer, size uintptr, q, destructor uintptr) uintptr
	dispatch_data_get_size   func(d uintptr) uintptr
	dispatch_data_create_map func(d uintptr, buf *unsafe.Pointer, size *uintptr) uintptr

	// reportQueue runs establishment-report blocks (kept for the process).
	reportQueue uintptr
)

// load opens the libraries and resolves every symbol; a missing one (a
// macOS before 10.15) is an error, not a crash at the first call.
func load() error {
	loadOnce.Do(func() { loadErr = loadSymbols() })
	return loadErr
}

func loadSymbols() (err error) {
	nwh, err := purego.Dlopen(networkPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("open Network.framework: %w", err)
	}
	sys, err := purego.Dlopen(libSystem, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("open libSystem: %w", err)
	}
	// RegisterLibFunc panics on a missing symbol: check each first.
	reg := func(fptr any, h uintptr, name string) {
		if err != nil {
			return
		}
		if _, e := purego.Dlsym(h, name); e != nil {
			err = fmt.Errorf("Network.framework: %s missing (macOS 10.15 or later needed): %w", name, e)
			return
		}
		purego.RegisterLibFunc(fptr, h, name)
	}
	global := func(dst *uintptr, name string) {
		if err != nil {
			return
		}
		sym, e := purego.Dlsym(nwh, name)
		if e != nil {
			err = fmt.Errorf("Network.framework: %s missing: %w", name, e)
			return
		}
		// dlsym gives the variable's address; its value is the object.
		*dst = **(**uintptr)(unsafe.Pointer(&sym))
	}
	reg(&nw_endpoint_create_host, nwh, "nw_endpoint_create_host")
	reg(&nw_endpoint_get_address, nwh, "nw_endpoint_get_address")
	reg(&nw_parameters_create_secure_tcp, nwh, "nw_parameters_create_secure_tcp")
	reg(&nw_parameters_set_multipath_service, nwh, "nw_parameters_set_multipath_service")
	reg(&nw_parameters_require_interface, nwh, "nw_parameters_require_interface")
	reg(&nw_parameters_prohibit_interface_type, nwh, "nw_parameters_prohibit_interface_type")
	reg(&nw_connection_create, nwh, "nw_connection_create")
	reg(&nw_connection_set_queue, nwh, "nw_connection_set_queue")
	reg(&nw_connection_set_state_changed_handler, nwh, "nw_connection_set_state_changed_handler")
	reg(&nw_connection_start, nwh, "nw_connection_start")
	reg(&nw_connection_send, nwh, "nw_connection_send")
	reg(&nw_connection_receive, nwh, "nw_connection_receive")
	reg(&nw_connection_cancel, nwh, "nw_connection_cancel")
	reg(&nw_connection_copy_current_path, nwh, "nw_connection_copy_current_path")
	reg(&nw_connection_access_establishment_rep, nwh, "nw_connection_access_establishment_report")
	reg(&nw_content_context_get_is_final, nwh, "nw_content_context_get_is_final")
	reg(&nw_path_get_status, nwh, "nw_path_get_status")
	reg(&nw_path_enumerate_interfaces, nwh, "nw_path_enumerate_interfaces")
	reg(&nw_path_copy_effective_local_endpoint, nwh, "nw_path_copy_effective_local_endpoint")
	reg(&nw_path_copy_effective_remote_endpoint, nwh, "nw_path_copy_effective_remote_endpoint")
	reg(&nw_interface_get_type, nwh, "nw_interface_get_type")
	reg(&nw_interface_get_name, nwh, "nw_interface_get_name")
	reg(&nw_interface_get_index, nwh, "nw_interface_get_index")
	reg(&nw_error_get_error_domain, nwh, "nw_error_get_error_domain")
	reg(&nw_error_get_error_code, nwh, "nw_error_get_error_code")
	reg(&nw_path_monitor_create, nwh, "nw_path_monitor_create")
	reg(&nw_path_monitor_set_queue, nwh, "nw_path_monitor_set_queue")
	reg(&nw_path_monitor_set_update_handler, nwh, "nw_path_monitor_set_update_handler")
	reg(&nw_path_monitor_start, nwh, "nw_path_monitor_start")
	reg(&nw_path_monitor_cancel, nwh, "nw_path_monitor_cancel")
	reg(&nw_protocol_definition_is_equal, nwh, "nw_protocol_definition_is_equal")
	reg(&nw_protocol_copy_tcp_definition, nwh, "nw_protocol_copy_tcp_definition")
	reg(&nw_report_get_duration, nwh, "nw_establishment_report_get_duration_milliseconds")
	reg(&nw_report_get_attempt_started_after, nwh, "nw_establishment_report_get_attempt_started_after_milliseconds")
	reg(&nw_report_get_previous_attempt_count, nwh, "nw_establishment_report_get_previous_attempt_count")
	reg(&nw_report_get_used_proxy, nwh, "nw_establishment_report_get_used_proxy")
	reg(&nw_report_enumerate_protocols, nwh, "nw_establishment_report_enumerate_protocols")
	reg(&nw_retain, nwh, "nw_retain")
	reg(&nw_release, nwh, "nw_release")
	reg(&dispatch_queue_create, sys, "dispatch_queue_create")
	reg(&dispatch_release, sys, "dispatch_release")
	reg(&dispatch_data_create, sys, "dispatch_data_create")
	reg(&dispatch_data_get_size, sys, "dispatch_data_get_size")
	reg(&dispatch_data_create_map, sys, "dispatch_data_create_map")
	global(&configureDisable, "_nw_parameters_configure_protocol_disable")
	global(&configureDefault, "_nw_parameters_configure_protocol_default_configuration")
	global(&contextDefaultMessage, "_nw_content_context_default_message")
	global(&contextFinal, "_nw_content_context_final_send")
	if err != nil {
		return err
	}
	tcpDefinition = nw_protocol_copy_tcp_definition()
	reportQueue = dispatch_queue_create("org.mptester.nw.report", 0)
	return nil
}

type system struct{}

// System is Network.framework, loaded at the first call.
func System() (API, error) {
	if err := load(); err != nil {
		return nil, err
	}
	return system{}, nil
}

func nwError(e uintptr) *Error {
	if e == 0 {
		return nil
	}
	return &Error{Domain: int(nw_error_get_error_domain(e)), Code: int(nw_error_get_error_code(e))}
}

func (system) NewEndpoint(host, port string) (Object, error) {
	ep := nw_endpoint_create_host(host, port)
	if ep == 0 {
		return 0, fmt.Errorf("nw_endpoint_create_host(%q, %q) failed", host, port)
	}
	return Object(ep), nil
}

func (system) NewParameters(p Params) (Object, error) {
	// TLS is Go's, above the stream; TCP has the default options.
	par := nw_parameters_create_secure_tcp(configureDisable, configureDefault)
	if par == 0 {
		return 0, errors.New("nw_parameters_create_secure_tcp failed")
	}
	nw_parameters_set_multipath_service(par, int32(p.Service))
	if p.Interface != 0 {
		nw_parameters_require_interface(par, uintptr(p.Interface))
	}
	for _, t := range p.Prohibit {
		nw_parameters_prohibit_interface_type(par, int32(t))
	}
	return Object(par), nil
}

// findWait bounds the wait for the path monitor's first update.
const findWait = 2 * time.Second

func (system) FindInterface(name string) (Object, error) {
	m := nw_path_monitor_create()
	if m == 0 {
		return 0, errors.New("nw_path_monitor_create failed")
	}
	q := dispatch_queue_create("org.mptester.nw.monitor", 0)
	nw_path_monitor_set_queue(m, q)
	found := make(chan uintptr, 1)
	var once sync.Once
	update := objc.NewBlock(func(_ objc.Block, path uintptr) {
		var iface uintptr
		enum := objc.NewBlock(func(_ objc.Block, i uintptr) bool {
			if nw_interface_get_name(i) == name {
				iface = nw_retain(i)
				return false
			}
			return true
		})
		nw_path_enumerate_interfaces(path, enum)
		enum.Release()
		sent := false
		once.Do(func() { found <- iface; sent = true })
		if !sent && iface != 0 {
			nw_release(iface) // a later update: nobody takes it
		}
	})
	nw_path_monitor_set_update_handler(m, update)
	update.Release()
	nw_path_monitor_start(m)
	var iface uintptr
	select {
	case iface = <-found:
	case <-time.After(findWait):
		once.Do(func() {})
	}
	nw_path_monitor_cancel(m)
	nw_release(m)
	dispatch_release(q)
	if iface == 0 {
		return 0, fmt.Errorf("Network.framework lists no interface %s", name)
	}
	return Object(iface), nil
}

func (system) NewConnection(ep, params Object) (Object, error) {
	c := nw_connection_create(uintptr(ep), uintptr(params))
	if c == 0 {
		return 0, errors.New("nw_connection_create failed")
	}
	return Object(c), nil
}

func (system) SetStateHandler(c Object, fn func(State, *Error)) {
	b := objc.NewBlock(func(_ objc.Block, state int32, err uintptr) { fn(State(state), nwError(err)) })
	nw_connection_set_state_changed_handler(uintptr(c), b)
	b.Release()
}

func (system) Start(c Object) {
	// One serial queue per connection; the connection retains it.
	q := dispatch_queue_create("org.mptester.nw.connection", 0)
	nw_connection_set_queue(uintptr(c), q)
	dispatch_release(q)
	nw_connection_start(uintptr(c))
}

func (system) Send(c Object, data []byte, final bool, done func(*Error)) {
	var content uintptr
	if len(data) > 0 {
		// The default destructor copies the bytes before the call returns.
		content = dispatch_data_create(unsafe.Pointer(&data[0]), uintptr(len(data)), 0, 0)
	}
	ctx := contextDefaultMessage
	if final {
		ctx = contextFinal
	}
	b := objc.NewBlock(func(_ objc.Block, err uintptr) { done(nwError(err)) })
	nw_connection_send(uintptr(c), content, ctx, true, b)
	b.Release()
	if content != 0 {
		dispatch_release(content)
	}
}

func (system) Receive(c Object, max int, fn func([]byte, bool, *Error)) {
	b := objc.NewBlock(func(_ objc.Block, content, ctx uintptr, complete bool, err uintptr) {
		var data []byte
		if content != 0 && dispatch_data_get_size(content) > 0 {
			var p unsafe.Pointer
			var n uintptr
			m := dispatch_data_create_map(content, &p, &n)
			data = append([]byte(nil), unsafe.Slice((*byte)(p), n)...)
			dispatch_release(m)
		}
		// The stream ends with a complete receive in the final context.
		eof := complete && (ctx == 0 || nw_content_context_get_is_final(ctx))
		fn(data, eof, nwError(err))
	})
	nw_connection_receive(uintptr(c), 1, uint32(max), b)
	b.Release()
}

func (system) Cancel(c Object) { nw_connection_cancel(uintptr(c)) }

func (system) CopyCurrentPath(c Object) Object {
	return Object(nw_connection_copy_current_path(uintptr(c)))
}

func (system) ReadPath(path Object) PathInfo {
	p := uintptr(path)
	pi := PathInfo{Status: PathStatus(nw_path_get_status(p)), Interfaces: []Interface{}}
	enum := objc.NewBlock(func(_ objc.Block, i uintptr) bool {
		pi.Interfaces = append(pi.Interfaces, Interface{Name: nw_interface_get_name(i),
			Index: int(nw_interface_get_index(i)), Type: InterfaceType(nw_interface_get_type(i))})
		return true
	})
	nw_path_enumerate_interfaces(p, enum)
	enum.Release()
	pi.Local = endpointAddr(nw_path_copy_effective_local_endpoint(p))
	pi.Remote = endpointAddr(nw_path_copy_effective_remote_endpoint(p))
	return pi
}

// endpointAddr reads an address endpoint and releases it.
func endpointAddr(ep uintptr) netip.AddrPort {
	if ep == 0 {
		return netip.AddrPort{}
	}
	defer nw_release(ep)
	sa := nw_endpoint_get_address(ep)
	if sa == nil {
		return netip.AddrPort{}
	}
	// struct sockaddr starts with sa_len, so the length is known.
	n := int(*(*uint8)(sa))
	return DecodeSockaddr(unsafe.Slice((*byte)(sa), n))
}

func (system) EstablishmentReport(c Object, fn func(*Report)) {
	b := objc.NewBlock(func(_ objc.Block, r uintptr) {
		if r == 0 {
			fn(nil)
			return
		}
		rep := &Report{DurationMillis: nw_report_get_duration(r),
			AttemptStartedAfterMillis: nw_report_get_attempt_started_after(r),
			PreviousAttempts:          nw_report_get_previous_attempt_count(r),
			UsedProxy:                 nw_report_get_used_proxy(r), Protocols: []ProtocolHandshake{}}
		enum := objc.NewBlock(func(_ objc.Block, def uintptr, ms, rtt uint64) bool {
			name := "other"
			if nw_protocol_definition_is_equal(def, tcpDefinition) {
				name = "tcp"
			}
			rep.Protocols = append(rep.Protocols, ProtocolHandshake{Name: name, Millis: ms, RTTMillis: rtt})
			return true
		})
		nw_report_enumerate_protocols(r, enum)
		enum.Release()
		fn(rep)
	})
	nw_connection_access_establishment_rep(uintptr(c), reportQueue, b)
	b.Release()
}

func (system) Release(o Object) { nw_release(uintptr(o)) }
